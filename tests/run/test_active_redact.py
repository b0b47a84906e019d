"""What an active check's steps leave in the report has its secrets masked (issue 17, finding 3):
a tool that echoes a token, a command line with --token VALUE, a URL with credentials."""

from __future__ import annotations

import threading
import time

from nodecheck.core.model import Capture, Node, Outcome, Probe
from nodecheck.core.redact import REDACTED
from nodecheck.run.active import CommandRunner


class Echoing:
    def connect(self, node, timeout_s):
        return self

    def run(self, probe, timeout_s):
        return Capture(
            "node1",
            probe.name,
            probe.argv,
            Outcome.EXITED,
            0,
            "NCCL INFO ok\nHF_TOKEN=s3cr3t\nfetch https://alice:s3cr3t@hub.example/x\n",
            "warning: --token s3cr3t ignored\n",
            0.01,
        )

    def close(self):
        pass


def test_recorded_steps_have_secrets_masked_and_the_check_still_sees_what_came_back():
    commands = CommandRunner(Echoing(), time.monotonic() + 60, threading.Event())
    probe = Probe("step", ("tool", "--token", "s3cr3t", "NCCL_IB_HCA=mlx5_0"))
    got = commands.run(Node("node1", "10.0.0.1"), probe)
    assert "HF_TOKEN=s3cr3t" in got.stdout  # the judge reads the real output
    [kept] = commands.captures
    assert kept.argv == ("tool", "--token", REDACTED, "NCCL_IB_HCA=mlx5_0")
    assert kept.stdout == f"NCCL INFO ok\nHF_TOKEN={REDACTED}\nfetch https://***@hub.example/x\n"
    assert "s3cr3t" not in kept.stderr and kept.probe == "step"

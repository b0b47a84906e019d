"""The cpu probe's fixed script, run here with sh: lscpu through PATH (a fake one first in PATH
answers, as on the simulated nodes), and this machine's /sys/devices/system/cpu."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nodecheck.checks.cpu import CpuParams, cpu
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status
from nodecheck.parsers.cpu_sysfs import parse_cpu_sysfs
from nodecheck.parsers.lscpu import parse_lscpu
from nodecheck.probes.cpu import CPU, CPU_SCRIPT, cpu_sections
from tests.helpers import DATA, captures

REPLAY = "lscpu/hf-blog-sapphire-rapids-8480plus-2s-56c-smt-224cpu.txt"


def run(path: str) -> str:
    env = {**os.environ, "PATH": path}
    return subprocess.run(
        ["/bin/sh", "-c", CPU_SCRIPT, "nodecheck-cpu"], capture_output=True, text=True, timeout=30, env=env
    ).stdout


def test_the_script_is_fixed_text_and_calls_lscpu_through_path():
    assert CPU.argv == ("sh", "-c", CPU_SCRIPT, "nodecheck-cpu")
    assert "/usr/bin/lscpu" not in CPU_SCRIPT and "| head -c 262144" in CPU_SCRIPT
    assert "-gt 8192" in CPU_SCRIPT


def test_a_fake_lscpu_first_in_path_is_the_one_read(tmp_path):
    fake = tmp_path / "lscpu"
    fake.write_text(f"#!/bin/sh\ncat '{DATA / REPLAY}'\n")
    fake.chmod(0o755)
    out = run(f"{tmp_path}:{os.environ['PATH']}")
    sections = cpu_sections(captures(CPU, out))
    assert parse_lscpu(sections.require("lscpu", "t").text).cpus == 224
    here = parse_cpu_sysfs(sections.require("cpu-sysfs", "t").text)
    assert here.online is not None and len(here.online) >= 1  # this machine's own CPUs, not the replay's
    verdicts = list(cpu(captures(CPU, out), CpuParams(cpus=224, smt="on")))
    assert [(v.status, v.message) for v in verdicts if v.subject in ("CPUs", "SMT")] == [
        (Status.PASS, "224 CPUs online (lscpu)"),
        (Status.PASS, "SMT on (lscpu: 2 threads per core)"),
    ]


def test_without_lscpu_the_counts_come_from_sysfs(tmp_path):
    # a PATH with the shell's own tools but no lscpu
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("head", "cat"):
        for where in ("/usr/bin", "/bin"):
            if Path(where, tool).exists():
                (bin_dir / tool).symlink_to(Path(where, tool))
                break
    out = run(str(bin_dir))
    sections = cpu_sections(captures(CPU, out))
    assert sections.facts["lscpu"] == "missing"
    verdicts = list(cpu(captures(CPU, out), CpuParams(sockets=2)))
    assert verdicts[0].message.endswith("(sysfs: no lscpu on the node)")
    assert [(v.status, v.message) for v in verdicts if v.subject == "Socket(s)"] == [
        (Status.ERROR, "Socket(s) not known (no lscpu on the node), expected 2")
    ]


def fake_lscpu(tmp_path, body: str) -> str:
    fake = tmp_path / "lscpu"
    fake.write_text("#!/bin/sh\n" + body)
    fake.chmod(0o755)
    return f"{tmp_path}:{os.environ['PATH']}"


def test_an_lscpu_that_crashes_after_two_lines_is_an_error_not_heads_exit(tmp_path):
    # issue 32, 3.1: `lscpu | head -c` gave head's exit status: two lines then a crash read as PASS
    path = fake_lscpu(tmp_path, f"head -n 2 '{DATA / REPLAY}'\nkill -SEGV $$\n")
    sections = cpu_sections(captures(CPU, run(path)))
    assert sections.require("lscpu", "t").rc == 128 + 11
    with pytest.raises(ParseError, match="lscpu: exited 139"):
        list(cpu(captures(CPU, run(path)), CpuParams()))


def test_lscpu_s_own_exit_status_is_kept_and_its_whole_output_read(tmp_path):
    path = fake_lscpu(tmp_path, f"cat '{DATA / REPLAY}'\nexit 3\n")
    section = cpu_sections(captures(CPU, run(path))).require("lscpu", "t")
    assert section.rc == 3
    assert section.text == (DATA / REPLAY).read_text()
    ok = cpu_sections(captures(CPU, run(fake_lscpu(tmp_path, f"cat '{DATA / REPLAY}'\n")))).require("lscpu", "t")
    assert (ok.rc, ok.text) == (0, (DATA / REPLAY).read_text())

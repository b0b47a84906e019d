"""The shipped watcher unit (nodecheck/deploy/nodecheck-watch@.service) and examples/watch.yml: the unit's
syntax (systemd-analyze where it exists, else its structure), that its command is one the CLI accepts,
restarts only for failures a restart can fix, and that the example config loads as documented."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from nodecheck import cli
from nodecheck.watch.config import load_watch_config
from tests.deploy.test_deploy import DEPLOY, seconds, unit

ROOT = Path(__file__).resolve().parents[2]
UNIT = "nodecheck-watch@.service"
WATCH_ARGV = [
    "watch",
    "--slurm-job",
    "%i",
    "--config",
    "/etc/nodecheck/watch.yml",
    "--output-dir",
    "/var/lib/nodecheck/reports",
]


def test_the_unit_runs_a_watch_of_its_instance_the_cli_accepts():
    service = unit(UNIT)
    assert service.sections() == ["Unit", "Service"]  # no [Install]: started per job, not at boot
    s = service["Service"]
    assert s["Type"] == "simple"
    argv = shlex.split(s["ExecStart"])
    assert argv[0] == "/opt/nodecheck/bin/nodecheck" and argv[1:] == WATCH_ARGV
    args = cli.build_parser().parse_args([a.replace("%i", "1234") for a in argv[1:]])
    assert (args.command, args.slurm_job, args.config, args.output_dir) == (
        "watch",
        "1234",
        "/etc/nodecheck/watch.yml",
        "/var/lib/nodecheck/reports",
    )
    assert (args.inventory, args.on_hang, args.once, args.accept_new_host_keys) == (None, None, False, False)
    assert s["WorkingDirectory"] == "/var/lib/nodecheck"
    assert s["StateDirectory"].split() == ["nodecheck", "nodecheck/reports"]


def test_the_unit_restarts_only_where_a_restart_can_help():
    service = unit(UNIT)
    s = service["Service"]
    assert (s["Restart"], seconds(s["RestartSec"])) == ("on-failure", 30)
    assert s["SuccessExitStatus"].split() == ["1", "2"]  # the job's verdicts are findings
    assert s["RestartPreventExitStatus"] == "64"  # bad config / unknown job: same again
    assert (service["Unit"]["StartLimitIntervalSec"], service["Unit"]["StartLimitBurst"]) == ("1h", "10")
    assert (s["KillSignal"], seconds(s["TimeoutStopSec"])) == ("SIGTERM", 60)
    assert (s["PrivateTmp"], s["ProtectSystem"]) == ("true", "full")  # as nodecheck-sweep.service


def test_the_exit_codes_the_unit_names_are_the_watchers():
    from nodecheck.watch.command import EXIT_INTERNAL, EXIT_NO_SAMPLE
    from nodecheck.watch.verdicts import exit_code

    assert {v: exit_code(v) for v in ("completed", "progressing", "slow", "unresponsive", "hung", "crashed")} == {
        "completed": 0,
        "progressing": 0,
        "slow": 1,
        "unresponsive": 1,
        "hung": 2,
        "crashed": 2,
    }
    assert (EXIT_NO_SAMPLE, EXIT_INTERNAL) == (3, 70)  # restarted (not in SuccessExitStatus)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verifies_the_unit_without_a_warning(tmp_path):
    text = (DEPLOY / UNIT).read_text().replace("ExecStart=/opt/nodecheck/bin/nodecheck ", "ExecStart=/bin/true ")
    (tmp_path / UNIT).write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "nodecheck-watch@1234.service"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")


def test_the_example_config_loads_with_the_values_it_documents(tmp_path):
    # installed as the unit reads it: /etc/nodecheck/watch.yml, root's (or the test user's), 0644. The
    # checkout's own copy may belong to whoever cloned it, whose file root takes only the job's fields from
    installed = tmp_path / "watch.yml"
    installed.write_bytes((ROOT / "examples" / "watch.yml").read_bytes())
    installed.chmod(0o644)
    cfg = load_watch_config(str(installed))
    assert (cfg.match, cfg.interval_s, cfg.history, cfg.on_hang) == (r"train\.py", 30, 240, None)
    assert cfg.progress.for_node("gpu017") == ("/scratch/gpu017/train.log", None)
    b = cfg.bounds
    assert (b.hang_after_s, b.checkpoint_max_s, b.startup_grace_s, b.unresponsive_after_s) == (600, 900, 900, 90)
    assert (b.throughput_floor, b.slow_for_s, b.straggler_pct) == (4000, 300, 15)
    assert cfg.alerts.argv == ("/usr/local/bin/page-oncall", "--team", "training")
    assert (cfg.alerts.url, cfg.alerts.retries, cfg.alerts.timeout_s, cfg.alerts.backoff_s) == (
        "https://alerts.example.org/hooks/nodecheck",
        3,
        10,
        1,
    )
    line = "[rank0]: step: 42  loss: 7.1234  memory: 31.20GiB(39.43%)  tps: 5,400  mfu: 41.20%"
    assert cfg.progress.compiled("step_regex").search(line)["step"] == "42"
    assert cfg.progress.compiled("throughput_regex").search(line)["throughput"] == "5,400"

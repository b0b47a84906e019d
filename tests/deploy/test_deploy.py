"""The shipped schedulers of `nodecheck sweep` (nodecheck/deploy/): systemd service + timer and a cron
line. Their syntax (systemd-analyze where it exists), and that the command they run is one the
CLI accepts, with a timeout above the sweep playbook's deadline and no overlapping sweeps."""

from __future__ import annotations

import configparser
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from nodecheck import cli
from nodecheck.config.playbook import load_playbook

DEPLOY = Path(__file__).resolve().parents[2] / "nodecheck" / "deploy"
SWEEP_ARGV = [
    "sweep",
    "/etc/nodecheck/hosts.yml",
    "--playbook",
    "sweep",
    "--allow-disruptive",  # the sweep playbook's DCGM level 2, on idle nodes only
    "--output-dir",
    "/var/lib/nodecheck/reports",
    "--metrics",
    "/var/lib/node_exporter/textfile_collector/nodecheck.prom",
]


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True, delimiters=("=",), comment_prefixes=("#", ";"))
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string((DEPLOY / name).read_text(), source=name)
    return parser


def seconds(text: str) -> float:
    """A systemd time span of the forms used here: 15min, 60s, 10min."""
    units = {"s": 1, "sec": 1, "min": 60, "h": 3600}
    total = 0.0
    for number, suffix in re.findall(r"(\d+)\s*([a-z]+)", text):
        total += int(number) * units[suffix]
    assert total > 0, text
    return total


def test_the_deploy_folder_holds_exactly_the_shipped_files():
    assert sorted(p.name for p in DEPLOY.iterdir() if not p.name.startswith("__")) == [
        "nodecheck-gate.logrotate",
        "nodecheck-sweep.cron",
        "nodecheck-sweep.service",
        "nodecheck-sweep.timer",
        "nodecheck-watch@.service",
    ]


def test_the_logrotate_file_rotates_the_gate_and_sweep_logs():
    text = (DEPLOY / "nodecheck-gate.logrotate").read_text()
    body = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    assert body[0] == "/var/log/nodecheck/*.log {" and body[-1] == "}"
    assert {"weekly", "rotate 12", "compress", "missingok", "copytruncate", "su root root"} <= set(body)


@pytest.mark.parametrize("name", ["nodecheck-sweep.service", "nodecheck-watch@.service"])
def test_the_units_write_nothing_others_can_read(name):
    """UMask=0027 for whatever nodecheck does not set a mode on itself (a hook's files, a log the
    unit's own redirection makes); systemd's default is 0022."""
    assert unit(name)["Service"]["UMask"] == "0027"


def test_the_service_is_a_oneshot_running_a_sweep_the_cli_accepts():
    service = unit("nodecheck-sweep.service")
    assert service.sections() == ["Unit", "Service"]
    s = service["Service"]
    assert s["Type"] == "oneshot"  # no second start while one runs
    argv = shlex.split(s["ExecStart"])
    assert argv[0] == "/opt/nodecheck/bin/nodecheck" and argv[1:] == SWEEP_ARGV
    args = cli.build_parser().parse_args(argv[1:])
    assert (args.command, args.playbook, args.offender, args.format) == ("sweep", "sweep", "3/5", "table")
    assert args.allow_disruptive is True
    assert s["WorkingDirectory"] == "/var/lib/nodecheck"
    assert seconds(s["TimeoutStartSec"]) == 1800 > load_playbook("sweep").deadline_s == 1500
    assert (s["Nice"], s["IOSchedulingClass"], s["IOSchedulingPriority"]) == ("10", "best-effort", "7")
    assert s["SuccessExitStatus"].split() == ["1", "2", "3"]  # findings are not a failed unit


def test_the_timer_is_hourly_randomized_and_persistent():
    timer = unit("nodecheck-sweep.timer")
    assert timer.sections() == ["Unit", "Timer", "Install"]
    t = timer["Timer"]
    assert (t["OnCalendar"], t["Persistent"], t["Unit"]) == ("hourly", "true", "nodecheck-sweep.service")
    assert seconds(t["RandomizedDelaySec"]) == 600
    assert timer["Install"]["WantedBy"] == "timers.target"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verifies_both_units_without_a_warning(tmp_path):
    # verify also demands that ExecStart exists: point it at a binary this host has
    for name in ("nodecheck-sweep.service", "nodecheck-sweep.timer"):
        text = (DEPLOY / name).read_text().replace("ExecStart=/opt/nodecheck/bin/nodecheck ", "ExecStart=/bin/true ")
        (tmp_path / name).write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "nodecheck-sweep.service", "nodecheck-sweep.timer"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    calendar = subprocess.run(["systemd-analyze", "calendar", "hourly"], capture_output=True, text=True, timeout=60)
    assert "Normalized form: *-*-* *:00:00" in calendar.stdout


def test_a_bad_key_would_be_caught(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed")
    (tmp_path / "bad.service").write_text("[Service]\nTipe=oneshot\nExecStart=/bin/true\n")
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "bad.service"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Unknown key 'Tipe'" in done.stderr  # so an empty stderr above means clean


def test_the_cron_line_never_stacks_sweeps_and_runs_the_same_command():
    lines = [
        ln for ln in (DEPLOY / "nodecheck-sweep.cron").read_text().splitlines() if ln.strip() and not ln.startswith("#")
    ]
    env = [ln for ln in lines if re.match(r"^[A-Z]+=", ln)]
    assert env == ["SHELL=/bin/sh", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    [job] = [ln for ln in lines if ln not in env]
    fields = job.split(None, 6)
    assert fields[:6] == ["17", "*", "*", "*", "*", "root"]  # cron.d: minute 17 hourly, as root
    command = shlex.split(fields[6])
    assert command[:3] == ["umask", "027", "&&"]  # its log is not readable by others
    command = command[3:]
    assert command[:4] == ["cd", "/var/lib/nodecheck", "&&", "flock"]
    assert command[4:6] == ["-n", "/run/lock/nodecheck-sweep.lock"]  # skip, never queue, a second sweep
    assert command[6:10] == ["timeout", "--kill-after=60", "1800", "nice"]
    start = command.index("/opt/nodecheck/bin/nodecheck")
    assert command[start + 1 : start + 1 + len(SWEEP_ARGV)] == SWEEP_ARGV
    assert command[start + 1 + len(SWEEP_ARGV) :] == [">>/var/log/nodecheck/sweep.log", "2>&1"]

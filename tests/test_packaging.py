"""An installed nodecheck (a wheel, not this checkout) finds its shipped playbooks and runs."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_ships_the_playbooks_and_an_install_finds_them(tmp_path):
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert build.returncode == 0, build.stderr
    [wheel] = list((tmp_path / "dist").glob("nodecheck-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert {
        "nodecheck/playbooks/default.yml",
        "nodecheck/playbooks/demo.yml",
        "nodecheck/playbooks/prolog.yml",
        "nodecheck/playbooks/health.yml",
        "nodecheck/playbooks/sweep.yml",
        "nodecheck/deploy/nodecheck-sweep.service",
        "nodecheck/deploy/nodecheck-sweep.timer",
        "nodecheck/deploy/nodecheck-sweep.cron",
        "nodecheck/deploy/nodecheck-gate.logrotate",
        "nodecheck/config/ladders/default.yml",
        "nodecheck/remedy/plan.py",
    } <= set(names)
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    for script in (
        "nodecheck = nodecheck.cli:entry",
        "nodecheck-prolog = nodecheck.cli:prolog_entry",
        "nodecheck-prolog-slurmctld = nodecheck.cli:prolog_slurmctld_entry",
        "nodecheck-health = nodecheck.cli:health_entry",
    ):
        assert script in entry_points
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    # from an unrelated directory, with the installed copy first on the path
    probe = "import nodecheck.config.playbook as p; b = p.load_playbook('default'); print(p.__file__); print(b.path)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(site)),
        check=True,
    ).stdout.split()
    assert out == [str(site / "nodecheck/config/playbook.py"), str(site / "nodecheck/playbooks/default.yml")]
    # the shipped remediation ladders, found in the installed copy
    probe = "import nodecheck.config.remedy as r; print(r.load_ladders(None, r.known_check_names()).file)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(site)),
        check=True,
    ).stdout.split()
    assert out == [str(site / "nodecheck/config/ladders/default.yml")]

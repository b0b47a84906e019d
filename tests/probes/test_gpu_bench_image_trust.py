"""The GPU benchmark runs in the job's image as root (issue 32, 1.11): an image a job's user can
change is that user's code run by root on the host. So the image's code never runs with root's
rights (docker/podman: an unprivileged user, no capabilities, no privilege gain; apptainer: no
privileges), and an apptainer .sif is run only when no one but root can change it: the file and
every directory above it root's and not writable by group or others (a sticky directory such as
/tmp still lets no one replace root's file). Run for real: the node step script with a fake runtime
on PATH that records whether it was started."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nodecheck.checks.gpu_bench import read_step
from nodecheck.core.model import Capture, Outcome, Status
from nodecheck.probes.gpu_bench import BenchTarget, bench_probe, launcher
from tests import everyone_tmp

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="ownership of the image: needs root to chown")


tmp_path = everyone_tmp.tmp_path  # a directory everyone may enter (pytest's own: root's only)


def target(runtime: str, image: str) -> BenchTarget:
    return BenchTarget.model_validate({"container": {"image": image, "runtime": runtime}})


def test_docker_and_podman_run_the_image_as_an_unprivileged_user_without_capabilities():
    for runtime in ("docker", "podman"):
        argv = launcher(target(runtime, "registry.local/train:24.10"))
        image = argv.index("registry.local/train:24.10")
        options = argv[:image]
        assert options[options.index("--user") + 1] == f"{NOBODY}:{NOBODY}", argv
        assert options[options.index("--cap-drop") + 1] == "ALL", argv
        assert options[options.index("--security-opt") + 1] == "no-new-privileges", argv


def test_apptainer_runs_the_image_without_privileges():
    argv = launcher(target("apptainer", "/shared/images/train.sif"))
    assert argv[:3] == ("apptainer", "exec", "--no-privs"), argv


def run_step(tmp_path: Path, sif: Path) -> tuple[Capture, Path]:
    """The gpu.perf node step with a fake apptainer that records that it ran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    ran = tmp_path / "apptainer-ran"
    fake = bin_dir / "apptainer"
    fake.write_text(f"#!/bin/sh\necho ran > {ran}\necho '{{}}'\n")
    fake.chmod(0o755)
    probe = bench_probe("gpu.perf", target("apptainer", str(sif)), ["--mode", "perf"], 30, guard=False)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LC_ALL": "C"}
    done = subprocess.run(probe.argv, input="", capture_output=True, text=True, timeout=60, env=env)
    capture = Capture("node1", probe.name, probe.argv, Outcome.EXITED, done.returncode, done.stdout, done.stderr, 0.1)
    return capture, ran


def image(tmp_path: Path, *, dir_mode: int = 0o755, file_owner: int = 0, file_mode: int = 0o644) -> Path:
    images = tmp_path / "images"
    images.mkdir(mode=dir_mode)
    images.chmod(dir_mode)
    sif = images / "train.sif"
    sif.write_bytes(b"SIF")
    sif.chmod(file_mode)
    os.chown(sif, file_owner, file_owner)
    return sif


@pytest.mark.parametrize(
    "how, why",
    [
        ({"file_owner": NOBODY}, "owned by uid 65534"),
        ({"file_mode": 0o664}, "writable by group or others"),
        ({"dir_mode": 0o777}, "writable by group or others"),
    ],
)
def test_an_image_a_user_could_change_is_not_run_as_root(tmp_path, how, why):
    sif = image(tmp_path, **how)
    capture, ran = run_step(tmp_path, sif)
    assert not ran.exists(), "the runtime was started on an image a user could change"
    step = read_step(capture, "gpu.perf", target("apptainer", str(sif)))
    assert step.problem is not None and step.problem.status is Status.ERROR
    assert step.problem.message.startswith(f"gpu.perf not run: a user could change the image {sif}"), step.problem
    assert why in step.problem.message


def test_a_link_to_an_image_is_judged_where_it_leads(tmp_path):
    sif = image(tmp_path, file_owner=NOBODY)
    link = tmp_path / "train.sif"
    link.symlink_to(sif)
    capture, ran = run_step(tmp_path, link)
    assert not ran.exists()
    assert "owned by uid 65534" in read_step(capture, "gpu.perf", target("apptainer", str(link))).problem.message


def test_roots_own_image_in_a_root_only_directory_is_run(tmp_path):
    sif = image(tmp_path)
    capture, ran = run_step(tmp_path, sif)
    assert ran.read_text() == "ran\n", capture.stdout + capture.stderr

"""The GPU probe run for real by the local transport (no sshd): its shell fallback to a fake
`nvidia-smi` when python3 or pynvml is missing, the NVML probe spawned as `python3 -`, and prolog
mode's in-process NVML call (Probe.local_call) with the fake nvidia-ml-py: its answer, its fallback
to the command, its timeout and its failure."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from nodecheck.checks import all_checks
from nodecheck.checks.gpu import GPU, parse_gpu_probe
from nodecheck.config.playbook import PlannedCheck
from nodecheck.core.model import Capture, Node, Outcome, Status
from nodecheck.parsers.gpu import GpuFacts
from nodecheck.parsers.nvidia_smi_csv import COMPUTE_APPS_FIELDS, QUERY_GPU_FIELDS
from nodecheck.parsers.sections import split_sections
from nodecheck.run.runner import judge_node
from nodecheck.transport.local import AFTER_GO, SHELL, LocalSession, LocalTransport

# the constructed 2x H100 PCIe `--query-gpu` CSV (noheader, nounits) and the facts it reads as
from tests.parsers.test_nvidia_smi import H100_CSV, H100_CSV_GPUS

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "fakes"
HEALTHY = FAKES / "nvml_states" / "h100x8-healthy.json"
SYSTEM_PYTHON = "/usr/bin/python3"
SPAWNED = dataclasses.replace(GPU, local_call=None)  # what a remote node runs: the command only
NODE = Node("node001", "node001")
FALLBACK_GPUS = tuple(dataclasses.replace(g, processes=()) for g in H100_CSV_GPUS)
NO_Q_GAPS = ("GPU0 remapped rows: no -q output", "GPU1 remapped rows: no -q output")

pytestmark = pytest.mark.skipif(
    not os.access("/bin/sh", os.X_OK) or not os.access("/bin/cat", os.X_OK), reason="needs /bin/sh and /bin/cat"
)


def fake_nvidia_smi(folder: Path) -> None:
    """`nvidia-smi` answering the probe's two CSV queries, and nothing else (exit 2, as for an unknown
    option); /bin/sh builtins and /bin/cat only, so it runs with no other tool on PATH."""
    folder.mkdir(exist_ok=True)
    (folder / "gpus.csv").write_text(H100_CSV)
    query_gpu = f"--query-gpu={','.join(QUERY_GPU_FIELDS)} --format=csv,noheader,nounits"
    compute_apps = f"--query-compute-apps={','.join(COMPUTE_APPS_FIELDS)} --format=csv,noheader,nounits"
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f"  '{query_gpu}') /bin/cat '{folder / 'gpus.csv'}' ;;\n"
        f"  '{compute_apps}') ;;\n"
        "  --query-gpu=*|--query-compute-apps=*) printf 'unexpected query: %s\\n' \"$*\"; exit 9 ;;\n"
        "  *) printf \"Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\\n\"; exit 2 ;;\n"
        "esac\n"
    )
    script.chmod(0o755)


@pytest.fixture
def only_sh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holds `sh` and the fake `nvidia-smi`, nothing else: no python3."""
    folder = tmp_path / "bin"
    fake_nvidia_smi(folder)
    (folder / "sh").symlink_to("/bin/sh")
    monkeypatch.setenv("PATH", str(folder))
    return folder


@pytest.fixture
def with_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH: the fake `nvidia-smi` first, then the system's python3; no PYTHONPATH (no pynvml)."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"no {SYSTEM_PYTHON}")
    folder = tmp_path / "bin"
    fake_nvidia_smi(folder)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("NODECHECK_FAKE_NVML_STATE", raising=False)
    return folder


def section(name: str, text: str, rc: int) -> str:
    return f"@@nodecheck begin {name}\n{text}@@nodecheck end {name} rc={rc}\n"


INVALID = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"


def fallback_stdout(why: str) -> str:
    return (
        f"nodecheck-nvml-unavailable: {why}\n"
        + section("query-gpu", H100_CSV, 0)
        + section("compute-apps", "", 0)
        + section("q", INVALID, 2)
        + section("nvlink", INVALID, 2)
    )


def assert_clock_and_counters_sections(stdout: str, has_date: bool = True) -> None:
    """After the four sections fallback_stdout() shows: the clock, uptime and boot id, read on this
    machine, and `nvlink -e`, which this nvidia-smi refuses like any other unknown option."""
    sections = split_sections(stdout, "gpu probe")
    clock = sections.require("clock", "date")
    assert clock.ok == has_date and (not has_date or float(clock.text) > 1.7e9)
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert sections.require("boot-id", "boot id").text == f.read()
    assert float(sections.require("uptime", "uptime").text.split()[0]) > 0
    errors = sections.require("nvlink-errors", "nvidia-smi nvlink -e")
    assert (errors.text, errors.rc) == (INVALID, 2)


def run(probe=SPAWNED, timeout_s: float = 30) -> Capture:
    return LocalSession(NODE).run(probe, timeout_s)


# -- the command: the shell falls back to nvidia-smi ---------------------------------------------------


def test_no_python3_on_the_node_falls_back_to_nvidia_smi(only_sh):
    capture = run()
    assert (capture.outcome, capture.exit_code, capture.stderr, capture.node, capture.probe) == (
        Outcome.EXITED,
        0,
        "",
        "node001",
        "gpu",
    )
    assert capture.stdout.startswith(fallback_stdout("python3 not found"))
    assert_clock_and_counters_sections(capture.stdout, has_date=False)  # PATH holds sh and nvidia-smi only
    facts = parse_gpu_probe(capture.stdout)
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot_id = f.read().strip()
    assert facts.uptime_s is not None and facts.uptime_s > 0
    assert facts == GpuFacts(
        "nvidia-smi",
        "535.104.05",
        None,
        FALLBACK_GPUS,
        "NVML unavailable (python3 not found); read from nvidia-smi",
        NO_Q_GAPS,
        clock=None,  # no `date` on this PATH
        uptime_s=facts.uptime_s,
        boot_id=boot_id,
    )
    assert len(facts.gpus) == 2
    assert [(g.nvlinks, g.remapped_rows, g.processes) for g in facts.gpus] == [(None, None, ())] * 2


def _system_python_has_pynvml() -> bool:
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return False
    return (
        subprocess.run(
            [SYSTEM_PYTHON, "-c", "import pynvml"], capture_output=True, env={"PATH": "/usr/bin:/bin"}
        ).returncode
        == 0
    )


@pytest.mark.skipif(_system_python_has_pynvml(), reason="this machine's python3 has a real pynvml")
def test_python3_without_pynvml_falls_back_and_says_the_import_failed(with_python):
    capture = run()
    why = "cannot import pynvml (nvidia-ml-py): ModuleNotFoundError: No module named 'pynvml'"
    assert (capture.outcome, capture.exit_code, capture.stderr) == (Outcome.EXITED, 0, "")
    assert capture.stdout.startswith(fallback_stdout(why))
    assert_clock_and_counters_sections(capture.stdout)
    facts = parse_gpu_probe(capture.stdout)
    assert (facts.source, facts.source_note, facts.gpus) == (
        "nvidia-smi",
        f"NVML unavailable ({why}); read from nvidia-smi",
        FALLBACK_GPUS,
    )


def test_python3_with_pynvml_answers_with_nvml_json(with_python, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(FAKES))
    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(HEALTHY))
    capture = run()
    assert (capture.outcome, capture.exit_code, capture.stderr) == (Outcome.EXITED, 0, "")
    assert capture.stdout.count("\n") == 1 and json.loads(capture.stdout)["source"] == "nvml"
    facts = parse_gpu_probe(capture.stdout)
    assert (facts.source, len(facts.gpus), facts.driver_version, facts.gaps) == ("nvml", 8, "550.90.07", ())


def test_nvidia_smi_missing_too_is_an_error_naming_it(tmp_path, monkeypatch):
    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "sh").symlink_to("/bin/sh")
    monkeypatch.setenv("PATH", str(folder))
    capture = run()
    assert (capture.exit_code, capture.stdout.splitlines()[:2]) == (
        0,
        ["nodecheck-nvml-unavailable: python3 not found", "@@nodecheck begin query-gpu"],
    )
    [result] = judge_node(_planned("gpu.health"), "node001", {("node001", "gpu"): capture})
    assert result.verdict.status is Status.ERROR
    assert result.verdict.message.startswith("cannot read nvidia-smi output: exit 127: ")
    assert result.verdict.message.endswith("nvidia-smi: not found")


# -- in-process NVML (prolog mode) -----------------------------------------------------------------------


def _no_spawning(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"a subprocess was spawned: {args!r}")

    monkeypatch.setattr(subprocess, "Popen", refuse)


def _planned(name: str, **params) -> PlannedCheck:
    spec = all_checks()[name]
    model = spec.params.model_validate(params)
    return PlannedCheck(spec, model, spec.probes_for(model))


def test_in_process_nvml_answers_without_spawning(fake_pynvml, monkeypatch):
    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(HEALTHY))
    _no_spawning(monkeypatch)
    capture = LocalTransport().connect(NODE, 5).run(GPU, 30)
    assert (capture.outcome, capture.exit_code, capture.stderr, capture.argv) == (Outcome.EXITED, 0, "", GPU.argv)
    facts = parse_gpu_probe(capture.stdout)
    assert (facts.source, len(facts.gpus), facts.cuda_driver_version) == ("nvml", 8, "12.4")
    assert fake_pynvml._init_count == 0  # nvmlShutdown ran
    results = judge_node(_planned("gpu.health"), "node001", {("node001", "gpu"): capture})
    assert [(r.verdict.subject, r.verdict.status) for r in results] == [(f"GPU{i}", Status.PASS) for i in range(8)]


def test_in_process_nvml_unavailable_runs_the_command_instead(fake_pynvml, with_python, tmp_path, monkeypatch):
    state = tmp_path / "state.json"
    state.write_text(json.dumps(dict(json.loads(HEALTHY.read_text()), init_error="DriverNotLoaded")))
    monkeypatch.setenv("NODECHECK_FAKE_NVML_STATE", str(state))
    monkeypatch.setenv("PYTHONPATH", str(FAKES))  # the spawned python3 meets the same driver
    spawned = []
    real_popen = subprocess.Popen

    def popen(argv, *args, **kwargs):
        spawned.append(tuple(argv))
        return real_popen(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    capture = run(GPU)
    # the probe's own argv, behind the go handshake (transport.local: it starts once the guardian knows it)
    assert spawned == [(SHELL, "-c", AFTER_GO, "nodecheck-probe", *GPU.argv)]
    assert (capture.outcome, capture.exit_code, capture.stderr) == (Outcome.EXITED, 0, "")
    assert capture.stdout.startswith(fallback_stdout("nvmlInit failed: Driver Not Loaded"))
    assert_clock_and_counters_sections(capture.stdout)
    facts = parse_gpu_probe(capture.stdout)
    assert (facts.source, facts.source_note, facts.gpus) == (
        "nvidia-smi",
        "NVML unavailable (nvmlInit failed: Driver Not Loaded); read from nvidia-smi",
        FALLBACK_GPUS,
    )


def test_in_process_call_that_hangs_times_out_within_its_timeout(fake_pynvml, monkeypatch):
    from nodecheck.probes import nvml_probe

    release = threading.Event()
    monkeypatch.setattr(nvml_probe, "collect", lambda: release.wait(30) and {})
    _no_spawning(monkeypatch)
    started = time.monotonic()
    try:
        capture = run(GPU, timeout_s=0.3)
    finally:
        release.set()  # let the abandoned worker thread end
    took = time.monotonic() - started
    assert 0.3 <= took < 2.0
    assert (capture.outcome, capture.exit_code, capture.stdout) == (Outcome.TIMEOUT, None, "")
    assert capture.detail == "in-process nodecheck.probes.local:nvml gave no answer within 0.3 s"
    [result] = judge_node(_planned("gpu.count", expect=8), "node001", {("node001", "gpu"): capture})
    assert result.verdict.status is Status.TIMEOUT
    assert result.verdict.message.endswith(
        " timed out: in-process nodecheck.probes.local:nvml gave no answer within 0.3 s"
    )


def test_in_process_call_that_raises_is_nodechecks_own_error(fake_pynvml, monkeypatch):
    from nodecheck.probes import nvml_probe

    def explode():
        raise RuntimeError("NVML handle table corrupted")

    monkeypatch.setattr(nvml_probe, "collect", explode)
    _no_spawning(monkeypatch)
    capture = run(GPU)
    detail = "in-process nodecheck.probes.local:nvml failed: RuntimeError: NVML handle table corrupted"
    assert (capture.outcome, capture.exit_code, capture.stdout, capture.detail) == (Outcome.FAILED, None, "", detail)
    assert "Traceback" in capture.stderr
    for name, params in (("gpu.count", {"expect": 8}), ("gpu.health", {}), ("gpu.processes", {})):
        [result] = judge_node(_planned(name, **params), "node001", {("node001", "gpu"): capture})
        assert (result.check, result.verdict.status, result.verdict.message) == (
            name,
            Status.ERROR,
            f"nodecheck could not run gpu: {detail}",
        )


def test_health_on_the_real_fallback_run(only_sh):
    results = judge_node(_planned("gpu.health"), "node001", {("node001", "gpu"): run()})
    assert [(r.verdict.status, r.verdict.subject, r.verdict.message) for r in results] == [
        (Status.ERROR, "GPU0", "not read: GPU0 remapped rows: no -q output"),
        (Status.ERROR, "GPU1", "not read: GPU1 remapped rows: no -q output"),
        (
            Status.ERROR,
            "GPU0",
            "GPU0: clock-event reasons not reported by nvidia-smi; the playbook requires it to judge the GPU",
        ),
        (Status.FAIL, "GPU1", "GPU1: volatile uncorrectable ECC 2 errors, expected <= 0 errors"),
        (
            Status.ERROR,
            "GPU1",
            "GPU1: clock-event reasons not reported by nvidia-smi; the playbook requires it to judge the GPU",
        ),
    ]

"""gpu.dcgm_diag through a fake ActiveContext that runs the check's real node script with sh, on a
PATH of fake tools: a `dcgmi` replaying a recording from tests/data/dcgmi-diag, and the idle guard's
pgrep / nvidia-smi / squeue."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from nodecheck.checks.gpu_dcgm import (
    _DIAG_SCRIPT,
    DCGMI_WHERE,
    LEVEL_TIMEOUT_S,
    DcgmDiag,
    dcgm_diag,
    diag_probe,
    judge_capture,
    judge_report,
)
from nodecheck.core.model import Capture, Node, Outcome, Probe, Status
from nodecheck.parsers.dcgm_diag import parse_dcgmi_diag
from tests.helpers import DATA, SerialActiveContext, data

D = "dcgmi-diag/"
PASS_1 = D + "derived-glimmer-v4.5.2-gb10-r1-pass.txt"
PASS_2 = D + "derived-glimmer-v4.5.2-gb10-r2-pass.txt"
MEMORY_FAIL = D + "derived-glimmer-v4.5.2-gb10-r2-memory-fail.txt"
DCGM_284 = D + "derived-glimmer-v4.5.2-gb10-r2-memory-alloc-error-pass-dcgm284.txt"
HOST_ENGINE = D + "dcgm-exporter-193-hostengine-unreachable.txt"


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


class FakeNode:
    """A node's PATH: coreutils, a dcgmi that prints `output` (stdout) and exits `rc`, an idle guard's
    tools (nothing runs unless told)."""

    def __init__(self, root: Path, output: str | None, rc: int = 0, stderr: str = ""):
        self.bin = root
        root.mkdir(parents=True)
        for name in ("sh", "timeout", "head", "hostname", "mktemp", "rm", "cat", "sleep"):
            real = shutil.which(name)
            assert real, name
            (root / name).symlink_to(real)
        _tool(root, "pgrep", "exit 1")
        _tool(root, "nvidia-smi", "exit 0")
        if output is not None:
            (root.parent / f"{root.name}.out").write_text(output)
            (root.parent / f"{root.name}.err").write_text(stderr)
            _tool(
                root,
                "dcgmi",
                f'cat "{root.parent / f"{root.name}.out"}"\ncat "{root.parent / f"{root.name}.err"}" >&2\nexit {rc}',
            )
        self.calls: list[tuple[str, ...]] = []


class FakeContext(SerialActiveContext):
    check = "gpu.dcgm_diag"

    def __init__(self, nodes: dict[str, FakeNode], *, allow_disruptive: bool = True, left: float = 100000.0):
        super().__init__()
        self.fakes = nodes
        self.nodes = {n: Node(n, n) for n in nodes}
        self.order = list(nodes)
        self.allow_disruptive = allow_disruptive
        self.captures = {
            n: {
                DCGMI_WHERE.name: Capture(
                    n,
                    DCGMI_WHERE.name,
                    DCGMI_WHERE.argv,
                    Outcome.EXITED,
                    0,
                    "@@nodecheck dcgmi " + ("/usr/bin/dcgmi" if (f.bin / "dcgmi").exists() else "") + "\n",
                    "",
                    0.0,
                )
            }
            for n, f in nodes.items()
        }
        self._left = left
        self.ran: list[tuple[str, Probe]] = []

    def run(self, node: str, probe: Probe, *, fresh: bool = False, cleanup: bool = False) -> Capture:
        self.ran.append((node, probe))
        done = subprocess.run(
            list(probe.argv), capture_output=True, text=True, timeout=60, env={"PATH": str(self.fakes[node].bin)}
        )
        return Capture(node, probe.name, probe.argv, Outcome.EXITED, done.returncode, done.stdout, done.stderr, 0.1)

    def left(self) -> float:
        return self._left


def node(tmp_path: Path, name: str = "node1", path: str | None = PASS_1, **kw) -> dict[str, FakeNode]:
    return {name: FakeNode(tmp_path / name, data(path) if path else None, **kw)}


def run(ctx: FakeContext, **params) -> list[tuple[str, Status, str, str]]:
    return [(nodes[0], v.status, v.subject, v.message) for nodes, v in dcgm_diag(ctx, DcgmDiag(**params))]


# --- level 1 and the disruptive levels ----------------------------------------------------------


def test_level_1_passes_naming_the_level_gpus_versions_and_tests(tmp_path):
    ctx = FakeContext(node(tmp_path), allow_disruptive=False)
    assert run(ctx) == [
        ("node1", Status.PASS, "", "DCGM level 1 passed on GPU 0 (DCGM 4.5.2, driver 580.82.09): software")
    ]
    [(_, probe)] = ctx.ran
    assert probe.argv[3:] == ("nodecheck-dcgm-diag", "1", "300", str(4 * 1024 * 1024), "0")  # no idle guard
    assert ctx.data.as_json([])["nodes"]["node1"]["status"] == "pass"


def test_level_1_runs_even_on_a_busy_node(tmp_path):
    fakes = node(tmp_path)
    _tool(fakes["node1"].bin, "nvidia-smi", 'echo "4242, python"')
    assert run(FakeContext(fakes, allow_disruptive=False))[0][1] is Status.PASS


def test_level_2_without_allow_disruptive_is_skipped_on_every_node_and_runs_nothing(tmp_path):
    fakes = {**node(tmp_path, "node1", PASS_2), **node(tmp_path, "node2", PASS_2)}
    ctx = FakeContext(fakes, allow_disruptive=False)
    message = "disruptive (DCGM level 2 loads the GPUs for ~2 min): not run without --allow-disruptive"
    assert run(ctx, level=2) == [
        ("node1", Status.SKIPPED, "", message),
        ("node2", Status.SKIPPED, "", message),
    ]
    assert ctx.ran == []


def test_named_memory_test_is_disruptive_and_software_alone_is_not(tmp_path):
    ctx = FakeContext(node(tmp_path, path=PASS_2), allow_disruptive=False)
    [(_, status, _, message)] = run(ctx, tests=["memory", "pcie"])
    assert status is Status.SKIPPED and message.startswith("disruptive (DCGM tests memory,pcie loads the GPUs")
    [(_, status, _, message)] = run(FakeContext(node(tmp_path / "b"), allow_disruptive=False), tests=["software"])
    assert (status, message) == (
        Status.PASS,
        "DCGM tests software passed on GPU 0 (DCGM 4.5.2, driver 580.82.09): software",
    )


def test_level_2_on_an_idle_node_passes(tmp_path):
    ctx = FakeContext(node(tmp_path, path=PASS_2))
    assert run(ctx, level=2) == [
        (
            "node1",
            Status.PASS,
            "",
            "DCGM level 2 passed on GPU 0 (DCGM 4.5.2, driver 580.82.09): software, memory, pcie",
        )
    ]
    assert ctx.ran[0][1].argv[-1] == "1"  # the guard ran


@pytest.mark.parametrize(
    ("tool", "body", "reason"),
    [
        ("nvidia-smi", 'printf "4242, python\\n"', "GPU processes are running: 4242, python"),
        ("pgrep", 'case "$2" in slurmstepd) exit 0;; esac; exit 1', "a Slurm job step is running on this node"),
    ],
)
def test_level_2_on_a_busy_node_is_skipped_with_the_reason_never_passed(tmp_path, tool, body, reason):
    fakes = node(tmp_path, path=PASS_2)
    _tool(fakes["node1"].bin, tool, body)
    [(_, status, _, message)] = run(FakeContext(fakes), level=2)
    assert status is Status.SKIPPED
    assert message.startswith(f"DCGM level 2 not run: busy — {reason}")


def test_a_run_the_deadline_would_cut_is_not_started(tmp_path):
    ctx = FakeContext(node(tmp_path, path=PASS_2), left=600)
    [(_, status, _, message)] = run(ctx, level=3)
    assert status is Status.SKIPPED
    assert message == (
        "DCGM level 3 not started: 600 s left before the run's deadline, it may take 3660 s "
        "(raise --deadline or lower the level)"
    )
    assert ctx.ran == [] and ctx.undone == ["node1: DCGM level 3 not started (600 s left, it may take 3690 s)"]


# --- failures, warnings and DCGM's traps ------------------------------------------------------------


def test_a_failing_memory_test_fails_naming_gpu_test_message_and_code(tmp_path):
    ctx = FakeContext(node(tmp_path, path=MEMORY_FAIL, rc=226))
    verdicts = [(n, s, subj, m) for n, s, subj, m in run(ctx, level=2)]
    assert verdicts == [
        (
            "node1",
            Status.FAIL,
            "GPU 0",
            "GPU 0: DCGM memory test Fail: A memory mismatch was detected on GPU 0, but no error was "
            "reported by CUDA or NVML. (DCGM error 58)",
        )
    ]
    [(_, v)] = list(dcgm_diag(FakeContext(node(tmp_path / "b", path=MEMORY_FAIL, rc=226)), DcgmDiag(level=2)))
    assert v.observed["error_ids"] == [58] and v.observed["dcgmi_exit"] == 226
    assert '"name" : "memory"' in v.excerpt


def test_a_warn_result_warns(tmp_path):
    doc = json.loads(data(PASS_2))
    pcie = doc["DCGM Diagnostic"]["test_categories"][2]["tests"][0]
    pcie["results"][0]["status"] = "Warn"
    pcie["results"][0]["warnings"] = [{"error_id": 46, "warning": "GPU 0 is running at PCI link width 8X"}]
    fakes = {"node1": FakeNode(tmp_path / "w", json.dumps(doc))}
    ctx = FakeContext(fakes)
    assert run(ctx, level=2) == [
        (
            "node1",
            Status.WARN,
            "GPU 0",
            "GPU 0: DCGM pcie test Warn: GPU 0 is running at PCI link width 8X (DCGM error 46)",
        )
    ]


def test_dcgm_284_memory_pass_after_an_allocation_failure_fails(tmp_path):
    [(_, status, subject, message)] = run(FakeContext(node(tmp_path, path=DCGM_284)), level=2)
    assert (status, subject) == (Status.FAIL, "GPU 0")
    assert message == (
        "GPU 0: DCGM memory test says Pass but DCGM could not allocate the memory it tests "
        "(Couldn't allocate at least 75.0% of GPU memory on GPU 0 (DCGM error 56)): the memory was not "
        "tested as configured (NVIDIA/DCGM#284)"
    )


def test_a_4x_table_test_failing_while_every_gpu_passes_fails_with_dcgms_words(tmp_path):
    fakes = node(tmp_path, path=D + "dcgm-253-comment-v4.4.1-b200-r2-pcie-fail-slurm.txt")
    [(_, status, subject, message)] = run(FakeContext(fakes), level=2)
    assert (status, subject) == (Status.FAIL, "pcie")
    assert message.startswith(
        "DCGM pcie test Fail (every GPU's own result Pass): There was an internal error during the test: "
        "'Output of child process (11167) couldn't be parsed"
    )


def test_a_3x_table_fails_the_gpu_dcgm_names_and_says_the_output_was_cut(tmp_path):
    fakes = node(tmp_path, path=D + "derived-go-dcgm-52-v3.3.1-r2-memory-fail-gpu0-stitched.txt")
    verdicts = run(FakeContext(fakes), level=2)
    assert [(s, subject) for _, s, subject, _ in verdicts] == [
        (Status.FAIL, "GPU 0"),
        (Status.FAIL, "all GPUs"),
        (Status.FAIL, "all GPUs"),
        (Status.ERROR, ""),
    ]
    assert verdicts[0][3] == (
        "GPU 0: DCGM GPU Memory test Fail: GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs "
        "for errors. Reset GPU. Restart DCGM. Rerun diagnostics. Unable to create CUDA context: "
        "'CUDA-capable device(s) is/are busy or unavailable'."
    )
    assert verdicts[2][3] == "all GPUs: DCGM Targeted Stress test Fail: DCGM gave no message"


def test_persistence_mode_off_fails_the_software_test_with_dcgms_fix(tmp_path):
    fakes = node(tmp_path, path=D + "glimmer-burnin-v4.2.3-gb10-r1-software-fail-exit226.txt", rc=226)
    [(_, status, subject, message)] = run(FakeContext(fakes))
    assert (status, subject) == (Status.FAIL, "GPU 0")
    assert message.startswith(
        "GPU 0: DCGM software test Fail: Persistence Mode: Persistence mode for GPU 0 is disabled."
    )
    assert message.endswith('-pm 1 " as root. (DCGM error 29)')


def test_skipped_gpu_tests_are_no_evidence(tmp_path):
    doc = json.loads(data(PASS_2))
    for category in doc["DCGM Diagnostic"]["test_categories"][1:]:
        test = category["tests"][0]
        test["results"][0]["status"] = test["test_summary"]["status"] = "Skip"
        test["results"][0].pop("info")
    fakes = {"node1": FakeNode(tmp_path / "s", json.dumps(doc))}
    assert run(FakeContext(fakes), level=2) == [
        (
            "node1",
            Status.ERROR,
            "",
            "DCGM level 2 ran only the software checks: memory (Skip), pcie (Skip); the GPUs were not tested",
        )
    ]


def test_one_skipped_test_warns_unless_listed_in_skip_ok(tmp_path):
    doc = json.loads(data(PASS_2))
    pcie = doc["DCGM Diagnostic"]["test_categories"][2]["tests"][0]
    pcie["results"][0]["status"] = pcie["test_summary"]["status"] = "Skip"
    fakes = {"node1": FakeNode(tmp_path / "s", json.dumps(doc))}
    assert run(FakeContext(fakes), level=2) == [
        (
            "node1",
            Status.WARN,
            "",
            "DCGM level 2: DCGM skipped pcie (Skip): not tested (list a test in skip_ok if this hardware "
            "does not support it)",
        )
    ]
    fakes = {"node1": FakeNode(tmp_path / "t", json.dumps(doc))}
    [(_, status, _, message)] = run(FakeContext(fakes), level=2, skip_ok=["pcie"])
    assert (status, message) == (
        Status.PASS,
        "DCGM level 2 passed on GPU 0 (DCGM 4.5.2, driver 580.82.09): software, memory",
    )


def test_a_run_where_everything_skipped_is_an_error_never_a_pass():
    report = parse_dcgmi_diag(
        data(D + "glimmer-burnin-v4.5.2-gb10-r2-plugins-gated-skip.txt").replace('"Fail"', '"Skip"')
    )
    [v] = judge_report(report, DcgmDiag(level=2), 0)
    assert v.status is Status.ERROR
    assert (
        v.message == "DCGM level 2 tested nothing: every test was skipped or not run "
        "(software (Skip), memory (Skip), pcie (Skip))"
    )


# --- what is not a result ---------------------------------------------------------------------------


def test_host_engine_down_is_an_error_saying_how_to_start_it(tmp_path):
    [(_, status, _, message)] = run(FakeContext(node(tmp_path, path=HOST_ENGINE, rc=1)))
    assert status is Status.ERROR
    assert message == (
        "dcgmi cannot reach the DCGM host engine (Error: unable to establish a connection to the specified host: "
        "localhost Error: Unable to connect to host engine. Host engine connection invalid/disconnected.): start "
        "the DCGM host engine: `systemctl enable --now nvidia-dcgm` (the unit DCGM's package ships) or run "
        "`nv-hostengine` as root; an engine on another host is reached with `dcgmi --host`; see docs/dcgm.md; "
        "not a GPU fault"
    )


def test_host_engine_error_on_stderr_is_recognised_too(tmp_path):
    fakes = {
        "node1": FakeNode(tmp_path / "e", "", rc=1, stderr=data(D + "dcgm-43-v2.4.5-hostengine-connection-invalid.txt"))
    }
    [(_, status, _, message)] = run(FakeContext(fakes))
    assert status is Status.ERROR and message.startswith("dcgmi cannot reach the DCGM host engine (Error: Unable")


def test_a_result_quoting_a_connection_error_is_judged_as_a_result(tmp_path):
    doc = json.loads(data(PASS_2))
    pcie = doc["DCGM Diagnostic"]["test_categories"][2]["tests"][0]
    pcie["results"][0]["status"] = pcie["test_summary"]["status"] = "Fail"
    pcie["results"][0]["warnings"] = [{"error_id": 23, "warning": "Host engine connection invalid/disconnected"}]
    fakes = {"node1": FakeNode(tmp_path / "c", json.dumps(doc))}
    assert run(FakeContext(fakes), level=2) == [
        (
            "node1",
            Status.FAIL,
            "GPU 0",
            "GPU 0: DCGM pcie test Fail: Host engine connection invalid/disconnected (DCGM error 23)",
        )
    ]


def test_a_test_this_dcgm_lacks_is_an_error_quoting_dcgmi(tmp_path):
    fakes = node(tmp_path, path=D + "dcgm-67-requested-test-not-found.txt", rc=255)
    assert run(FakeContext(fakes), tests=["memory_bandwidth"]) == [
        (
            "node1",
            Status.ERROR,
            "",
            'dcgmi diag -r memory_bandwidth failed (dcgmi exit 255): Error: requested test "memory bandwidth" '
            "was not found among possible test choices.",
        )
    ]


def test_dcgmi_missing_is_an_error_naming_the_package(tmp_path):
    ctx = FakeContext(node(tmp_path, path=None), allow_disruptive=False)
    [(_, status, _, message)] = run(ctx)
    assert status is Status.ERROR
    assert message.startswith("dcgmi not found in PATH: install DCGM: the datacenter-gpu-manager package")
    assert ctx.ran == []


def test_dcgmi_gone_by_the_time_the_script_runs_is_the_same_error(tmp_path):
    fakes = node(tmp_path)
    ctx = FakeContext(fakes)
    (fakes["node1"].bin / "dcgmi").unlink()
    [(_, status, _, message)] = run(ctx)
    assert status is Status.ERROR and message.startswith("dcgmi not found in PATH")


def test_truncated_json_is_an_error_never_a_pass(tmp_path):
    fakes = node(tmp_path, path=D + "derived-glimmer-v4.5.2-gb10-r2-json-truncated.txt")
    [(_, status, _, message)] = run(FakeContext(fakes), level=2)
    assert status is Status.ERROR
    assert message.startswith("cannot read DCGM level 2's output: JSON cut short or malformed")


def test_a_table_cut_short_keeps_its_failure_and_is_never_a_pass(tmp_path):
    fakes = node(tmp_path, path=D + "dcgm-253-v4.2.3-pcie-fail-wrapped-warnings-no-closing-border.txt")
    verdicts = run(FakeContext(fakes), level=2)
    assert [(s, subj) for _, s, subj, _ in verdicts] == [(Status.FAIL, "pcie"), (Status.ERROR, "")]
    assert verdicts[1][3] == (
        "DCGM level 2's output ends before its result table does (run cut short): 3 test(s) read, the rest "
        "unknown; not judged as a pass"
    )


def test_a_table_cut_short_with_only_passes_is_an_error(tmp_path):
    fakes = node(tmp_path, path=D + "dcgm-55-v3.0.4-r3-no-metadata-truncated.txt")
    [(_, status, _, message)] = run(FakeContext(fakes), level=3)
    assert status is Status.ERROR and "run cut short" in message


def test_dcgmi_killed_at_its_timeout_is_an_error(tmp_path):
    fakes = node(tmp_path, path=D + "derived-glimmer-v4.5.2-gb10-r2-json-truncated.txt", rc=124)
    [(_, status, _, message)] = run(FakeContext(fakes), level=2, test_timeout_s=600)
    assert (status, message) == (
        Status.ERROR,
        "DCGM level 2 did not finish within 600 s (dcgmi killed, exit 124); "
        "raise test_timeout_s if the GPUs are merely slow",
    )


def test_a_runtime_error_is_an_error_with_dcgms_words():
    report = parse_dcgmi_diag('{"DCGM GPU Diagnostic": {"runtime_error": "No GPUs found", "version": "3.3.5"}}')
    [v] = judge_report(report, DcgmDiag(), 1)
    assert (v.status, v.message) == (Status.ERROR, "DCGM could not run DCGM level 1: No GPUs found")


# --- params and the probe -----------------------------------------------------------------------------


def test_params_choose_one_way_and_validate_names():
    with pytest.raises(ValidationError, match="either level or tests"):
        DcgmDiag(level=2, tests=["memory"])
    with pytest.raises(ValidationError):
        DcgmDiag(tests=["memroy"])
    with pytest.raises(ValidationError):
        DcgmDiag(level=5)
    with pytest.raises(ValidationError, match="twice"):
        DcgmDiag(tests=["pcie", "pcie"])
    assert (DcgmDiag().run_level, DcgmDiag().what, DcgmDiag().disruptive) == (1, "1", False)
    assert [DcgmDiag(level=n).bound_s for n in (1, 2, 3, 4)] == [LEVEL_TIMEOUT_S[n] for n in (1, 2, 3, 4)]
    assert DcgmDiag(tests=["memory", "pcie"]).bound_s == 1200
    assert DcgmDiag(level=3, test_timeout_s=5400).bound_s == 5400


def test_the_script_is_fixed_text_and_values_travel_as_arguments():
    a, b = diag_probe(DcgmDiag(level=2)), diag_probe(DcgmDiag(tests=["memory"], test_timeout_s=700))
    assert a.argv[:3] == b.argv[:3] == ("sh", "-c", _DIAG_SCRIPT)
    assert a.argv[4:] == ("2", "900", str(4 * 1024 * 1024), "1")
    assert b.argv[4:] == ("memory", "700", str(4 * 1024 * 1024), "1")
    assert a.name != b.name and a.name.startswith("dcgm_diag:")
    assert a.timeout_s == 900 + 60
    assert 'timeout -k 10 "$t" dcgmi diag -r "$what" -j' in _DIAG_SCRIPT and 'head -c "$cap"' in _DIAG_SCRIPT


def test_every_recording_under_the_check_is_judged_without_crashing(tmp_path):
    for i, path in enumerate(sorted(p.name for p in (DATA / "dcgmi-diag").iterdir())):
        fakes = {"n": FakeNode(tmp_path / str(i), data(D + path))}
        statuses = {s for _, s, _, _ in run(FakeContext(fakes), level=2)}
        assert statuses and (Status.PASS not in statuses or statuses == {Status.PASS}), path


# --- lost evidence and a test's own warning (issue 32, 3.1) ---------------------------------------------

TABLE_PASS = D + "derived-dcgm-253-comment-v4.4.1-b200-r2-pass.txt"
TABLE_PCIE_FAIL = D + "dcgm-253-comment-v4.4.1-b200-r2-pcie-fail-slurm.txt"


def judged(text: str, rc: int = 0, **params) -> list[tuple[Status, str, str]]:
    """The verdicts of one node's diag step, as its script would have framed dcgmi's output."""
    stdout = (
        "@@nodecheck begin diag\n" + text + ("" if text.endswith("\n") else "\n") + "@@nodecheck end diag rc=0\n"
        f"@@nodecheck diag_rc {rc}\n@@nodecheck begin stderr\n@@nodecheck end stderr rc=0\n"
    )
    out = Capture("node1", "dcgm_diag:x", ("sh",), Outcome.EXITED, 0, stdout, "", 1.0)
    return [(v.status, v.subject, v.message) for v in judge_capture(out, DcgmDiag(**params))]


def test_the_passing_table_passes():
    assert judged(data(TABLE_PASS), level=2) == [
        (
            Status.PASS,
            "",
            "DCGM level 2 passed on GPUs 0-7 (DCGM 4.4.1, driver 570.172.08): software, memory, pcie",
        )
    ]


def test_a_table_that_lost_the_failing_tests_row_is_never_a_pass():
    # was PASS: the pcie warning and GPU rows were read as memory's
    text = data(TABLE_PCIE_FAIL).replace(
        "| pcie                      | Fail                                           |\n", ""
    )
    [(status, _, message)] = judged(text, level=2)
    assert status is Status.ERROR
    assert message.startswith("cannot read DCGM level 2's output: a Warning row under Integration before any test")


def test_a_passing_table_tests_own_warning_warns():
    warning = "| Warning                   | GPU 2 is running at PCI link width 8X          |\n"
    text = data(TABLE_PASS)
    at = text.index("|                           | GPU0: Pass", text.index("| pcie "))
    assert judged(text[:at] + warning + text[at:], level=2) == [
        (Status.WARN, "pcie", "DCGM pcie test Pass with warnings: GPU 2 is running at PCI link width 8X")
    ]


def test_a_passing_json_tests_summary_warning_warns():
    doc = json.loads(data(PASS_2))
    pcie = doc["DCGM Diagnostic"]["test_categories"][2]["tests"][0]
    pcie["test_summary"]["warnings"] = [{"error_id": 46, "warning": "GPU 0 is running at PCI link width 8X"}]
    assert judged(json.dumps(doc), level=2) == [
        (
            Status.WARN,
            "pcie",
            "DCGM pcie test Pass with warnings: GPU 0 is running at PCI link width 8X (DCGM error 46)",
        )
    ]


def test_a_memory_tests_own_allocation_warning_fails_as_on_a_gpu_row():
    # NVIDIA/DCGM#284 in the table layout: the warning sits at the test, not at a GPU row
    warning = "| Warning                   | Couldn't allocate at least 75.0% of GPU memory |\n"
    text = data(TABLE_PASS)
    at = text.index("|                           | GPU0: Pass", text.index("| memory "))
    [(status, subject, message)] = judged(text[:at] + warning + text[at:], level=2)
    assert (status, subject) == (Status.FAIL, "memory")
    assert message.startswith("DCGM memory test says Pass but DCGM could not allocate the memory it tests")


@pytest.mark.parametrize("rc", ["\u00b2", "9" * 5000])
def test_an_exit_code_that_is_not_a_small_number_is_not_read(rc):
    # str.isdigit() is true for '²', which int() refuses; 5000 digits exceed int()'s limit
    [(status, _, message)] = judged(data(PASS_2), rc=rc, level=2)
    assert status is Status.PASS and "passed on GPU 0" in message


def test_a_table_whose_gpu_rows_were_all_lost_is_never_a_pass():
    # found by tests/fuzz (hollowed: every line with a number dropped): 'software/memory/pcie Pass' alone
    # read as a level-2 pass on no GPU
    text = "".join(ln for ln in data(TABLE_PASS).splitlines(keepends=True) if "GPU" not in ln or "Detected" in ln)
    verdicts = judged(text, level=2)
    assert [(s, subject) for s, subject, _ in verdicts] == [
        (Status.ERROR, "memory"),
        (Status.ERROR, "pcie"),
        (Status.ERROR, ""),
    ]
    assert verdicts[0][2] == "DCGM memory test says Pass but lists no GPU's result: not judged as a pass"


def test_a_4x_json_result_without_its_entity_id_is_not_a_result_for_all_gpus():
    doc = json.loads(data(PASS_2))
    del doc["DCGM Diagnostic"]["test_categories"][1]["tests"][0]["results"][0]["entity_id"]
    [(status, _, message)] = judged(json.dumps(doc), level=2)
    assert status is Status.ERROR and "memory: a GPU result without its entity_id" in message

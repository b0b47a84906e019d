"""gpu.dcgm_diag: NVIDIA's own diagnostic (`dcgmi diag -r LEVEL|TESTS -j`), every test's result per GPU
judged with DCGM's own message and error code. docs/dcgm.md is the operator's reference.

Levels (DCGM user guide, "DCGM Diagnostics", run levels: docs.nvidia.com/datacenter/dcgm/latest/
user-guide/dcgm-diagnostics.html): 1 "quick" (deployment/software checks, seconds), 2 "medium"
(adds the memory and PCIe plugins, about 2 minutes), 3 "long" (adds the stress plugins, about 30
minutes), 4 "extra long" (adds memtest, pulse test, EUD: 1-2 hours). Level 1 reads state only; level 2
and up load the GPUs with kernels and allocations, so they are disruptive: they run only with
`--allow-disruptive`, and then only on a node the idle guard (nodecheck.probes.idle) finds idle.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nodecheck.checks.context import ActiveContext
from nodecheck.checks.disruptive import busy, did_not_complete, not_started, without_consent
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Capture, Probe, Status, Verdict, excerpt
from nodecheck.core.registry import check
from nodecheck.parsers.dcgm_diag import (
    DiagReport,
    DiagTest,
    EntityResult,
    Message,
    host_engine_error,
    parse_dcgmi_diag,
)
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.sections import split_sections
from nodecheck.probes.idle import IDLE_GUARD

Grouped = tuple[tuple[str, ...], Verdict]

# The `-r` names DCGM 3.x/4.x accept for single plugins (dcgmi diag --help; DCGM user guide, "DCGM
# Diagnostics"); sm_stress is 3.x's SM Stress plugin ("SM Stress" in its JSON, DCGM's own testing/),
# nvbandwidth 4.x's (NVIDIA/DCGM#272). A name the installed DCGM lacks fails the run with dcgmi's
# "requested test ... was not found" (NVIDIA/DCGM#67, #296), read as an ERROR.
DcgmTestName = Literal[
    "software",
    "memory",
    "pcie",
    "diagnostic",
    "sm_stress",
    "targeted_stress",
    "targeted_power",
    "memory_bandwidth",
    "memtest",
    "pulse_test",
    "eud",
    "nvbandwidth",
]
# only reads state: not disruptive (the deployment checks of level 1)
QUICK_TESTS = frozenset({"software"})
# per-level timeouts: the guide's durations (1: seconds, 2: ~2 min, 3: ~30 min, 4: 1-2 h) with room for
# a slow start (the host engine spawning nvvs, CUDA init on 8 GPUs) and slow 8-GPU boards
LEVEL_TIMEOUT_S = {1: 300, 2: 900, 3: 3600, 4: 9000}
LEVEL_MINUTES = {1: "1", 2: "2", 3: "30", 4: "60-120"}  # what the SKIPPED message says a level takes
# a named test's share when `tests` is given (plugins run one after the other)
TEST_TIMEOUT_S = {
    "software": 300,
    "memory": 600,
    "pcie": 600,
    "memory_bandwidth": 900,
    "diagnostic": 1200,
    "sm_stress": 1200,
    "targeted_stress": 1200,
    "targeted_power": 1200,
    "nvbandwidth": 1200,
    "pulse_test": 1800,
    "memtest": 3600,
    "eud": 3600,
}
OUTPUT_CAP = 4 * 1024 * 1024  # bytes of dcgmi's stdout kept: an 8-GPU level-4 JSON is well under 1 MiB
STDERR_CAP = 16384
GUARD_S = 40  # the idle guard's own bounds (squeue 5 s, nvidia-smi 15 s) plus mktemp and start-up
# DCGM_FR_MEMORY_ALLOC (56, dcgmlib/dcgm_errors.h): "Couldn't allocate at least %.1f%% of GPU memory"
MEMORY_ALLOC_ERROR = 56
_ALLOC_FAILED = re.compile(r"couldn'?t allocate|could not allocate|alloc\w*\s+(?:fail|error)", re.I)
INSTALL = (
    "install DCGM: the datacenter-gpu-manager package (DCGM 4: datacenter-gpu-manager-4-cuda<N>) "
    "from NVIDIA's CUDA repository, then `systemctl enable --now nvidia-dcgm`"
)
HOST_ENGINE_FIX = (
    "start the DCGM host engine: `systemctl enable --now nvidia-dcgm` (the unit DCGM's package ships) "
    "or run `nv-hostengine` as root; an engine on another host is reached with `dcgmi --host`; "
    "see docs/dcgm.md"
)


class DcgmDiag(BaseModel):
    """Which DCGM diagnostic to run: a level or named tests (not both), and how long to wait."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    level: int | None = Field(
        None,
        ge=1,
        le=4,
        strict=True,
        description="DCGM run level 1-4 (`dcgmi diag -r N`); unset: 1, unless tests is given. "
        "Levels >= 2 load the GPUs: they run only with --allow-disruptive, on idle nodes",
    )
    tests: list[DcgmTestName] | None = Field(
        None,
        min_length=1,
        description="named DCGM tests instead of a level (`-r memory,pcie`); any test but software is disruptive",
    )
    test_timeout_s: int | None = Field(
        None,
        ge=30,
        le=14400,
        strict=True,
        description="bound on the run on each node; unset: by level (1: 300, 2: 900, 3: 3600, 4: 9000 s, "
        "from DCGM's documented durations) or the sum of the named tests' shares",
    )
    skip_ok: list[DcgmTestName] = Field(
        [],
        description="tests DCGM may skip on this hardware without a warning (a plugin that does not "
        "support the GPU); any other Skip or Not Run is a WARN, and a run in which nothing but the "
        "software test ran is an ERROR",
    )

    @model_validator(mode="after")
    def _one_way(self) -> DcgmDiag:
        if self.level is not None and self.tests is not None:
            raise ValueError("give either level or tests, not both")
        if self.tests is not None and len(set(self.tests)) != len(self.tests):
            raise ValueError("tests lists a test twice")
        return self

    @property
    def run_level(self) -> int | None:
        return None if self.tests is not None else (self.level or 1)

    @property
    def what(self) -> str:
        """The `-r` argument: "2" or "memory,pcie"."""
        return ",".join(self.tests) if self.tests is not None else str(self.run_level)

    @property
    def label(self) -> str:
        return f"DCGM tests {self.what}" if self.tests is not None else f"DCGM level {self.run_level}"

    @property
    def disruptive(self) -> bool:
        if self.tests is not None:
            return not set(self.tests) <= QUICK_TESTS
        return (self.run_level or 1) >= 2

    @property
    def bound_s(self) -> int:
        if self.test_timeout_s is not None:
            return self.test_timeout_s
        if self.tests is not None:
            return min(14400, sum(TEST_TIMEOUT_S[t] for t in self.tests))
        return LEVEL_TIMEOUT_S[self.run_level or 1]

    @property
    def minutes(self) -> str:
        if self.tests is not None:
            return str(max(1, self.bound_s // 120))  # the shares are about twice the expected run
        return LEVEL_MINUTES[self.run_level or 1]


# The passive read: is dcgmi there at all (a node without DCGM gets its ERROR without a guard run)
DCGMI_WHERE = Probe(
    "dcgmi_where",
    (
        "sh",
        "-c",
        'if p=$(command -v dcgmi 2>/dev/null); then echo "@@nodecheck dcgmi $p"; else echo "@@nodecheck dcgmi"; fi',
    ),
    timeout_s=10,
)

# $1: the -r argument, $2: its timeout, $3: stdout cap, $4: 1 = run the idle guard first
_DIAG_SCRIPT = (
    r"""
what=$1 t=$2 cap=$3 guard=$4
command -v dcgmi >/dev/null 2>&1 || { echo "@@nodecheck missing dcgmi"; exit 0; }
if [ "$guard" = 1 ]; then
"""
    + IDLE_GUARD
    + r"""
fi
d=$(mktemp -d 2>/dev/null) || { echo "mktemp -d failed: nowhere to keep dcgmi's exit code" >&2; exit 70; }
trap 'rm -rf "$d"' EXIT
echo "@@nodecheck begin diag"
{ timeout -k 10 "$t" dcgmi diag -r "$what" -j 2>"$d/err"; echo $? >"$d/rc"; } | head -c "$cap"
echo "@@nodecheck end diag rc=0"
echo "@@nodecheck diag_rc $(cat "$d/rc" 2>/dev/null)"
echo "@@nodecheck begin stderr"
head -c """
    + str(STDERR_CAP)
    + r""" "$d/err"
echo "@@nodecheck end stderr rc=0"
"""
)


def diag_probe(want: DcgmDiag) -> Probe:
    """The node step: argv carries the values, the script is fixed; named per argv (probes are
    deduplicated by name)."""
    args = (want.what, str(want.bound_s), str(OUTPUT_CAP), "1" if want.disruptive else "0")
    digest = hashlib.sha256("\0".join(args).encode()).hexdigest()[:10]
    return Probe(
        f"dcgm_diag:{digest}",
        ("sh", "-c", _DIAG_SCRIPT, "nodecheck-dcgm-diag", *args),
        timeout_s=want.bound_s + GUARD_S + 20,  # dcgmi's own bound, its kill grace, the guard
    )


@dataclass(frozen=True)
class DcgmDiagReport:
    """The JSON report's gpu.dcgm_diag block: what ran, and each node's results test by test."""

    run: str
    nodes: dict[str, dict] = field(default_factory=dict)

    def as_json(self, incomplete: Sequence[str]) -> dict:
        return {"run": self.run, "nodes": self.nodes, "incomplete": list(incomplete)}


@check("gpu.dcgm_diag", probes=[DCGMI_WHERE], params=DcgmDiag, scope="active")
def dcgm_diag(ctx: ActiveContext, want: DcgmDiag) -> Iterator[Grouped]:
    """NVIDIA DCGM diagnostics (`dcgmi diag`, level 1-4 or named tests): fails a GPU whose test DCGM
    fails, with DCGM's own message and error code.

    Level 1 runs anywhere; levels >= 2 load the GPUs for minutes to hours and run only with
    `--allow-disruptive`, on nodes with no Slurm job and no GPU process. A host engine that is down is
    an ERROR saying how to start it, a skipped test is no evidence, and a memory test that reports
    Pass after failing to allocate its memory (NVIDIA/DCGM#284) fails."""
    if want.disruptive and not ctx.allow_disruptive:
        yield from without_consent(ctx, f"{want.label} loads the GPUs for ~{want.minutes} min")
        return
    runnable: list[str] = []
    for node in ctx.nodes:
        where = split_sections(ctx.captures[node][DCGMI_WHERE.name].stdout, "dcgmi_where").facts.get("dcgmi")
        if not where:
            yield (node,), Verdict(Status.ERROR, f"dcgmi not found in PATH: {INSTALL}", observed={"dcgmi": None})
        else:
            runnable.append(node)
    report = DcgmDiagReport(want.label)
    ctx.progress.phase(want.label, len(runnable))
    done = ctx.each(runnable, lambda node: _run(ctx, want, node, report))
    ctx.report(report)
    for node, verdicts in zip(runnable, done):
        for v in verdicts:
            yield (node,), v


def _run(ctx: ActiveContext, want: DcgmDiag, node: str, report: DcgmDiagReport) -> list[Verdict]:
    probe = diag_probe(want)
    if (late := not_started(ctx, node, probe, want.label, "raise --deadline or lower the level")) is not None:
        return [late]
    out = ctx.run(node, probe)
    verdicts = judge_capture(out, want)
    report.nodes[node] = _summary(out, verdicts)
    return verdicts


def judge_capture(out: Capture, want: DcgmDiag) -> list[Verdict]:
    """The verdicts for one node's diag step."""
    if (unfinished := did_not_complete(out, want.label)) is not None:
        return [unfinished]
    sections = split_sections(out.stdout, "dcgm_diag")
    if "missing" in sections.facts:
        return [Verdict(Status.ERROR, f"dcgmi not found in PATH: {INSTALL}", observed={"dcgmi": None})]
    if (busy_node := busy(sections.facts, want.label)) is not None:
        return [busy_node]
    diag = sections.get("diag")
    if diag is None:  # refused before the run: no pgrep, no mktemp
        first = next((ln.strip() for ln in split_lines(out.stderr) if ln.strip()), "no message")
        return [
            Verdict(
                Status.ERROR,
                f"{want.label} not run: the node script exited {out.exit_code}: {first}",
                excerpt=excerpt(out.stderr + out.stdout),
            )
        ]
    stderr = sections.get("stderr")
    err = stderr.text if stderr else ""
    rc = _exit_code(sections.facts.get("diag_rc", ""))
    raw = diag.text
    shown = excerpt(raw + (f"\n[stderr]\n{err}" if err.strip() else ""))
    observed: dict[str, object] = {"dcgmi_exit": rc}
    if rc in (124, 137):
        return [
            Verdict(
                Status.ERROR,
                f"{want.label} did not finish within {want.bound_s} s (dcgmi killed, exit {rc}); "
                "raise test_timeout_s if the GPUs are merely slow",
                observed=observed,
                expected={"within_s": want.bound_s},
                excerpt=shown,
            )
        ]
    if len(raw.encode()) >= OUTPUT_CAP:
        return [Verdict(Status.ERROR, f"dcgmi printed more than {OUTPUT_CAP} bytes: not judged", excerpt=shown)]
    try:
        report = parse_dcgmi_diag(raw)
    except ParseError as e:
        # dcgmi's connection error is its whole output: a result document whose warning quotes such
        # words (a plugin losing its connection mid-run) is judged as the result it is
        if engine := host_engine_error(raw + "\n" + err):
            return [
                Verdict(
                    Status.ERROR,
                    f"dcgmi cannot reach the DCGM host engine ({engine}): {HOST_ENGINE_FIX}; not a GPU fault",
                    observed={**observed, "host_engine": "unreachable"},
                    excerpt=shown,
                )
            ]
        said = f" (dcgmi exit {rc})" if rc else ""
        refused = next((ln.strip() for ln in split_lines(raw + "\n" + err) if ln.strip().startswith("Error:")), "")
        if refused:  # dcgmi's own refusal: a test this DCGM lacks (NVIDIA/DCGM#67, #296), no GPU, ...
            return [
                Verdict(
                    Status.ERROR,
                    f"dcgmi diag -r {want.what} failed{said}: {refused[:300]}",
                    observed={**observed, "dcgmi_error": refused[:300]},
                    excerpt=shown,
                )
            ]
        first = next((ln.strip() for ln in split_lines(err) if ln.strip()), "")
        return [
            Verdict(
                Status.ERROR,
                f"cannot read {want.label}'s output{said}: {e.reason}" + (f"; stderr: {first[:200]}" if first else ""),
                observed=observed,
                excerpt=shown,
            )
        ]
    return judge_report(report, want, rc, shown)


def _exit_code(text: str) -> int | None:
    """The script's `echo $?`: 0-255, else None (str.isdigit() alone takes '²', which int() refuses)."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 3 else None


def judge_report(report: DiagReport, want: DcgmDiag, rc: int | None, shown: str = "") -> list[Verdict]:
    """A parsed run: FAIL per failing GPU and test, WARN per warning, ERROR when nothing (or not all)
    was read, one PASS naming what passed otherwise."""
    observed = {"dcgm_version": report.dcgm_version, "driver_version": report.driver_version, "dcgmi_exit": rc}
    if report.runtime_error:
        return [
            Verdict(
                Status.ERROR,
                f"DCGM could not run {want.label}: {report.runtime_error}",
                observed=observed,
                excerpt=shown,
            )
        ]
    verdicts: list[Verdict] = []
    skipped: list[str] = []  # skipped or not run, and not in skip_ok: a WARN
    not_run: list[str] = []  # every test with no result but Skip / Not Run
    passed: list[str] = []
    for test in report.tests:
        bad = _judge_test(test, observed, shown)
        verdicts += bad
        statuses = {r.status for r in test.results} | ({test.status} if test.status else set())
        if statuses and statuses <= {"Skip", "Not Run"}:
            not_run.append(f"{test.name} ({'/'.join(sorted(statuses))})")
            if test.plugin not in want.skip_ok:
                skipped.append(not_run[-1])
        elif not bad and "Pass" in statuses and test.plugin != "software" and not test.results:
            verdicts.append(_no_gpu_result(test, observed, shown))
        elif not bad and "Pass" in statuses:
            passed.append(test.name)
    ran_beyond_software = [t for t in report.tests if t.plugin != "software" and t.name in passed]
    asked_beyond_software = want.disruptive
    if not report.complete:
        verdicts.append(
            Verdict(
                Status.ERROR,
                f"{want.label}'s output ends before its result table does (run cut short): "
                f"{len(report.tests)} test(s) read, the rest unknown; not judged as a pass",
                observed={**observed, "complete": False},
                excerpt=shown,
            )
        )
        return verdicts  # what was read still fails a GPU; what was not read says nothing
    if not report.tests or not any(s in ("Pass", "Fail", "Warn") for s in report.statuses):
        verdicts.append(
            Verdict(
                Status.ERROR,
                f"{want.label} tested nothing: every test was skipped or not run"
                + (f" ({', '.join(not_run)})" if not_run else ""),
                observed=observed,
                excerpt=shown,
            )
        )
        return verdicts
    if asked_beyond_software and not ran_beyond_software and not any(v.status is Status.FAIL for v in verdicts):
        verdicts.append(
            Verdict(
                Status.ERROR,
                f"{want.label} ran only the software checks: {', '.join(not_run) or 'no GPU test reported'}; "
                "the GPUs were not tested",
                observed={**observed, "skipped": not_run},
                excerpt=shown,
            )
        )
        return verdicts
    if skipped:
        verdicts.append(
            Verdict(
                Status.WARN,
                f"{want.label}: DCGM skipped {', '.join(skipped)}: not tested (list a test in skip_ok "
                "if this hardware does not support it)",
                observed={**observed, "skipped": skipped},
                excerpt=shown,
            )
        )
    if not verdicts and report.complete:
        gpus = _span(report.gpus)
        versions = ", ".join(
            x
            for x in (
                f"DCGM {report.dcgm_version}" if report.dcgm_version else "",
                f"driver {report.driver_version}" if report.driver_version else "",
            )
            if x
        )
        verdicts.append(
            Verdict(
                Status.PASS,
                f"{want.label} passed"
                + (f" on GPU{'s' if len(report.gpus) > 1 else ''} {gpus}" if gpus else "")
                + (f" ({versions})" if versions else "")
                + f": {', '.join(_unique(passed))}",
                observed={**observed, "passed": _unique(passed), "gpus": list(report.gpus)},
                excerpt=shown,
            )
        )
    return verdicts


def _judge_test(test: DiagTest, observed: dict, shown: str) -> list[Verdict]:
    out: list[Verdict] = []
    gpu_failed = False
    for r in test.results:
        where = r.where
        what = f"{where}: DCGM {test.name} test"
        codes = [m.error_id for m in r.warnings if m.error_id]
        facts = {
            **observed,
            "test": test.name,
            "plugin": test.plugin,
            "category": test.category,
            "status": r.status,
            "gpus": list(r.gpus),
            "error_ids": codes,
        }
        if r.status == "Fail":
            gpu_failed = True
            out.append(Verdict(Status.FAIL, f"{what} Fail: {_said(r, test)}", where, facts, {"status": "Pass"}, shown))
        elif r.status == "Warn":
            out.append(Verdict(Status.WARN, f"{what} Warn: {_said(r, test)}", where, facts, {"status": "Pass"}, shown))
        elif r.status == "Pass" and test.plugin == "memory" and (alloc := _allocation_failed(r.warnings, r.info)):
            # NVIDIA/DCGM#284 (DCGM 4.5): the memory plugin records DCGM_FR_MEMORY_ALLOC ("Couldn't
            # allocate at least N% of GPU memory") and still returns Pass; the memory it did not
            # allocate was never tested. The run happens on an idle node (the guard), so memory that
            # cannot be allocated is held by something nodecheck cannot see or is itself faulty: FAIL,
            # as the DCGM documentation lists the code as an error and the issue recommends.
            gpu_failed = True
            out.append(
                Verdict(
                    Status.FAIL,
                    f"{what} says Pass but DCGM could not allocate the memory it tests ({alloc}): "
                    "the memory was not tested as configured (NVIDIA/DCGM#284)",
                    where,
                    {**facts, "memory_alloc_error": True},
                    {"status": "Pass", "memory_alloc_error": False},
                    shown,
                )
            )
        elif r.status == "Pass" and r.warnings:
            out.append(Verdict(Status.WARN, f"{what} Pass with warnings: {_said(r, test)}", where, facts, {}, shown))
    if (
        not out
        and test.warnings
        and test.status not in ("Fail", "Warn")
        and any(r.status == "Pass" for r in test.results)
    ):
        # the test's own warnings (4.x test_summary, the tables' Warning rows) under a Pass: DCGM said something
        out.append(_passed_with_warnings(test, observed, shown))
    if test.status in ("Fail", "Warn") and not gpu_failed and not any(v.status is Status.WARN for v in out):
        # 4.x: the test's own status fails while every GPU row passes (NVIDIA/DCGM#253: an internal
        # error of the pcie plugin): DCGM's verdict on the test stands
        status = Status.FAIL if test.status == "Fail" else Status.WARN
        words = "; ".join(_message(m.text, m.error_id) for m in test.warnings) or "; ".join(test.info) or "no message"
        note = (
            " (every GPU's own result Pass)" if test.results and all(r.status == "Pass" for r in test.results) else ""
        )
        out.append(
            Verdict(
                status,
                f"DCGM {test.name} test {test.status}{note}: {words}",
                test.name,
                {**observed, "test": test.name, "plugin": test.plugin, "status": test.status},
                {"status": "Pass"},
                shown,
            )
        )
    return out


def _no_gpu_result(test: DiagTest, observed: dict, shown: str) -> Verdict:
    """A GPU test whose own status says Pass with no GPU's result under it (DCGM lists one per GPU):
    the rows that would say which GPUs passed were lost, so it is not a pass."""
    return Verdict(
        Status.ERROR,
        f"DCGM {test.name} test says {test.status} but lists no GPU's result: not judged as a pass",
        test.name,
        {**observed, "test": test.name, "plugin": test.plugin, "status": test.status, "gpus": []},
        {"gpu_results": "one per GPU"},
        shown,
    )


def _passed_with_warnings(test: DiagTest, observed: dict, shown: str) -> Verdict:
    """A test that passed with warnings of its own: WARN with DCGM's words; the memory test's allocation
    failure (NVIDIA/DCGM#284) FAILs as it does on a GPU's row."""
    facts = {
        **observed,
        "test": test.name,
        "plugin": test.plugin,
        "status": test.status or "Pass",
        "error_ids": [m.error_id for m in test.warnings if m.error_id],
    }
    if test.plugin == "memory" and (alloc := _allocation_failed(test.warnings, test.info)):
        return Verdict(
            Status.FAIL,
            f"DCGM memory test says Pass but DCGM could not allocate the memory it tests ({alloc}): "
            "the memory was not tested as configured (NVIDIA/DCGM#284)",
            test.name,
            {**facts, "memory_alloc_error": True},
            {"status": "Pass", "memory_alloc_error": False},
            shown,
        )
    words = "; ".join(_message(m.text, m.error_id) for m in test.warnings)
    return Verdict(Status.WARN, f"DCGM {test.name} test Pass with warnings: {words}", test.name, facts, {}, shown)


def _allocation_failed(warnings: Sequence[Message], info: Sequence[str]) -> str | None:
    for m in warnings:
        if m.error_id == MEMORY_ALLOC_ERROR or _ALLOC_FAILED.search(m.text):
            return _message(m.text, m.error_id or MEMORY_ALLOC_ERROR)
    return next((i for i in info if _ALLOC_FAILED.search(i)), None)


def _said(r: EntityResult, test: DiagTest) -> str:
    """DCGM's words for one result: its own warnings; else the test's (the tables put them there),
    those naming this GPU first ("GPU 0 Error using CUDA API ...", the 3.x table's prefix)."""
    own = list(r.warnings)
    if not own and len(r.gpus) == 1:
        own = [m for m in test.warnings if m.text.startswith(f"GPU {r.gpus[0]} ")]
    messages = [_message(m.text, m.error_id) for m in own or test.warnings]
    return "; ".join(messages) or "; ".join(r.info or test.info) or "DCGM gave no message"


def _message(text: str, error_id: int | None) -> str:
    return text + (f" (DCGM error {error_id})" if error_id else "")


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _span(gpus: Sequence[int]) -> str:
    """0,1,2,3,5 -> '0-3,5'."""
    runs: list[list[int]] = []
    for g in sorted(gpus):
        if runs and runs[-1][-1] == g - 1:
            runs[-1].append(g)
        else:
            runs.append([g])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs)


def _summary(out: Capture, verdicts: list[Verdict]) -> dict:
    worst = max((v.status for v in verdicts), key=_rank, default=Status.ERROR)
    return {
        "status": worst.value,
        "exit_code": out.exit_code,
        "verdicts": [{"status": v.status.value, "subject": v.subject, "message": v.message} for v in verdicts],
    }


def _rank(status: Status) -> int:
    order = [Status.PASS, Status.SKIPPED, Status.WARN, Status.ERROR, Status.FAIL]
    return order.index(status) if status in order else 0

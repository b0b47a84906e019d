"""What gpu.perf and gpu.sdc share: reading a benchmark step's capture (the idle guard's refusal, the
probe's JSON, nvbandwidth's tables) into the probe's facts, or the one verdict that says why there are
none. Whether a step may start at all: nodecheck.checks.disruptive.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nodecheck.checks.disruptive import busy, did_not_complete
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Capture, Status, Verdict, excerpt
from nodecheck.parsers.gpu_bench import BenchRun, parse_gpu_bench, unavailable_reason
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nvbandwidth import NvbandwidthRun, parse_nvbandwidth
from nodecheck.parsers.sections import Section, split_sections
from nodecheck.probes.gpu_bench import UNAVAILABLE_EXIT, BenchTarget

Grouped = tuple[tuple[str, ...], Verdict]
NO_LIBRARY_FIX = (
    "install PyTorch (with CUDA) or CuPy for the node's python3, or set `container:` to run the "
    "benchmark in the job's own image"
)


@dataclass(frozen=True)
class StepResult:
    """One node's step: the probe's facts, nvbandwidth's where it ran, or the verdict saying why not."""

    run: BenchRun | None = None
    nvbandwidth: NvbandwidthRun | None = None
    problem: Verdict | None = None  # set iff run is None
    notes: tuple[Verdict, ...] = ()  # nvbandwidth unreadable or failed: the probe's own figures stand


def read_step(out: Capture, label: str, target: BenchTarget, *, nvbandwidth: str = "never") -> StepResult:
    """The capture of a bench step (probes/gpu_bench._STEP_SCRIPT) read."""
    if (unfinished := did_not_complete(out, label)) is not None:
        return StepResult(problem=unfinished)
    sections = split_sections(out.stdout, label)
    if (tool := sections.facts.get("missing")) is not None:
        what = "the container runtime" if target.container else "the interpreter"
        return _problem(Status.ERROR, f"{label} not run: {what} {tool!r} not found on the node", out)
    if (why := sections.facts.get("untrusted_image")) is not None:
        image = target.container.image if target.container else "?"
        if why.strip() == "not found":
            return _problem(Status.ERROR, f"{label} not run: the image {image} was not found on the node", out)
        return _problem(
            Status.ERROR,
            f"{label} not run: a user could change the image {image} ({why.strip()[:300]}), and the benchmark "
            "runs it as root; keep the image where only root can write (the file and every directory above it)",
            out,
        )
    if (refused := busy(sections.facts, label)) is not None:
        return StepResult(problem=refused)
    bench = sections.get("bench")
    if bench is None:  # refused before the run: no pgrep, no mktemp
        first = next((ln.strip() for ln in split_lines(out.stderr) if ln.strip()), "no message")
        return _problem(Status.ERROR, f"{label} not run: the node script exited {out.exit_code}: {first}", out)
    err_section = sections.get("stderr")
    err = err_section.text.strip() if err_section else ""
    rc_text = sections.facts.get("bench_rc", "").strip()
    rc = int(rc_text) if rc_text.isdigit() else None
    text = bench.text.strip()
    if rc in (124, 137):
        return _problem(
            Status.TIMEOUT,
            f"{label} did not finish within its bound on {target.where} (killed, exit {rc}); not judged",
            out,
        )
    if rc == UNAVAILABLE_EXIT and (reason := unavailable_reason(text)) is not None:
        return _problem(
            Status.ERROR, f"{label} not run: no usable GPU library in {target.where}: {reason}; {NO_LIBRARY_FIX}", out
        )
    if rc != 0:
        last = next((ln.strip() for ln in reversed(split_lines(err)) if ln.strip()), "no message")
        started = "could not start " + target.where if target.container and rc in (125, 126, 127) else "failed"
        return _problem(Status.ERROR, f"{label} {started} (exit {rc}): {last[:300]}", out)
    try:
        run = parse_gpu_bench(text)
    except ParseError as e:
        return _problem(Status.ERROR, f"cannot read {label}'s output: {e.reason}", out)
    if not run.gpus:
        return _problem(Status.ERROR, f"{label} found no GPU in {target.where}", out)
    nvb, notes = _nvbandwidth(sections.get("nvbandwidth"), sections.facts, nvbandwidth)
    return StepResult(run=run, nvbandwidth=nvb, notes=notes)


def _nvbandwidth(
    section: Section | None, facts: Mapping[str, str], wanted: str
) -> tuple[NvbandwidthRun | None, tuple[Verdict, ...]]:
    if wanted == "never":
        return None, ()
    if "nvbandwidth_missing" in facts or section is None:
        if wanted == "required":
            return None, (Verdict(Status.ERROR, "nvbandwidth is required but not installed on the node"),)
        return None, ()
    rc = facts.get("nvbandwidth_rc", "").strip()
    status = Status.ERROR if wanted == "required" else Status.WARN
    if rc != "0":
        return None, (
            Verdict(
                status,
                f"nvbandwidth exited {rc or 'without an exit code'}: its figures are not used",
                excerpt=excerpt(section.text),
            ),
        )
    try:
        return parse_nvbandwidth(section.text), ()
    except ParseError as e:
        return None, (
            Verdict(
                status,
                f"cannot read nvbandwidth's output: {e.reason}; its figures are not used",
                excerpt=excerpt(section.text),
            ),
        )


def _problem(status: Status, message: str, out: Capture) -> StepResult:
    return StepResult(problem=Verdict(status, message, excerpt=excerpt(out.stdout + out.stderr), cut=out.cut))

"""nccl-tests against bus-bandwidth thresholds: on each node alone (nccl.allreduce_single) and across
the run's nodes through mpirun or srun (nccl.allreduce_multi), which localizes a failure with 2-node
tests (the pair planner of ib.pairs) and names the node that drags every pair down.

If nccl-tests pass at the job's scale the job's own code is the suspect; if they fail, the fabric or
a node is. A hang is a finding too: every run is bounded on the node by `timeout`, and what it printed
before it was killed says where it stuck (never started / NCCL init / mid-sweep at size X).
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from nodecheck.checks.context import AFTER_RESERVE_S, ActiveContext
from nodecheck.core.errors import ParseError
from nodecheck.core.hostlist import fold
from nodecheck.core.model import Capture, Cut, Outcome, Probe, Status, Verdict, excerpt, worst
from nodecheck.core.redact import redact_text
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Floor, fmt
from nodecheck.judging import pair_plan as planner
from nodecheck.parsers.nccl_tests import NcclTestRun, NoNcclTestsOutput, Stage, parse_nccl_tests, parse_nccl_tests_json
from nodecheck.parsers.sections import split_sections
from nodecheck.parsers.tools import missing_tools
from nodecheck.probes import nccl_tests as nccltest
from nodecheck.probes.env_policy import LOADS_OR_WRITES, EnvName, EnvValue

Verdicts = Iterator[Verdict]
Grouped = tuple[tuple[str, ...], Verdict]

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(i?B)?\s*$", re.IGNORECASE)
_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _bytes(value: object) -> object:
    """8, "8", "1G", "1GiB", "512M" -> bytes (nccl-tests' own K/M/G suffixes are powers of 1024)."""
    if isinstance(value, bool):
        raise ValueError("a size in bytes, not true/false")
    if isinstance(value, str):
        m = _SIZE.match(value)
        if not m:
            raise ValueError(f"{value!r} is not a size: use bytes (1073741824) or K/M/G/T (1G)")
        return int(m.group(1)) * _UNIT[m.group(2).upper()]
    return value


ByteSize = Annotated[int, BeforeValidator(_bytes), Field(ge=0, le=1 << 44)]
Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall"]
Variant = Literal["default", "network_only", "nvlink_only"]
_PATH = r"^/[A-Za-z0-9_./+-]*$"


def human(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


class NcclSweep(BaseModel):
    """What every nccl-tests check shares: the sweep, the thresholds and the environment."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    collectives: list[Collective] = Field(
        ["all_reduce"], min_length=1, description="which *_perf tests run, each its own verdict"
    )
    variants: list[Variant] = Field(
        ["default"],
        min_length=1,
        description=(
            "default; network_only (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: every byte through the NIC); "
            "nvlink_only (NCCL_P2P_LEVEL=NVL, no SHM/IB fallback): each its own verdict, so a slow "
            "result says whether NVLink or the network is slow"
        ),
    )
    min_bytes: ByteSize = Field(8, description="-b: first message size (bytes or 1K/1M/1G)")
    max_bytes: ByteSize = Field(8 << 30, description="-e: last message size")
    step_factor: int = Field(2, ge=2, le=1024, strict=True, description="-f: size multiplier per step")
    iters: int = Field(20, ge=1, le=100000, strict=True, description="-n")
    warmup_iters: int = Field(5, ge=0, le=100000, strict=True, description="-w")
    check: bool = Field(True, description="-c 1: validate results (#wrong); off, corruption goes unseen")
    datatype: Literal["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16"] = (
        "float"
    )
    op: Literal["sum", "prod", "max", "min", "avg", "all"] = "sum"
    plateau_min_bytes: ByteSize = Field(
        1 << 30,
        description=(
            "rows at or above this size are the plateau, judged against busbw_gbps (smaller sizes are latency-bound)"
        ),
    )
    busbw_gbps: Floor | None = Field(
        None,
        description=(
            "{fail_below, warn_below} in GB/s (nccl-tests' busbw, 1e9 bytes/s) for the slowest plateau "
            "row; unset: only correctness and completion are judged"
        ),
    )
    variant_busbw_gbps: dict[Variant, Floor] = Field(
        {},
        description="thresholds per variant, e.g. {network_only: {fail_below: 40}}: a network-only "
        "run moves a node's own GPU traffic through its NICs and is slower by design (default busbw_gbps)",
    )
    env: dict[EnvName, EnvValue] = Field(
        {},
        description="environment of the test (the job's: NCCL_SOCKET_IFNAME, NCCL_IB_HCA, ...); "
        "--job-env FILE overrides it (except what names a library, plugin or file); NCCL_DEBUG defaults to VERSION",
    )
    job_env: dict[EnvName, EnvValue] = Field(
        {},
        description="set by nodecheck from --job-env FILE, not written in a playbook: the job's variables, "
        "over `env`; one that names a library, plugin, program or file stays behind (jobenv.job_refuses): the "
        "test runs as root",
    )
    test_timeout_s: float = Field(
        600,
        gt=0,
        le=86400,
        allow_inf_nan=False,
        description=(
            "each test is killed after this (timeout on the node); a killed test is a hang, classified "
            "by how far its output got"
        ),
    )
    binary_dir: Annotated[str, Field(pattern=_PATH)] | None = Field(
        None, description="where the *_perf binaries are (e.g. /opt/nccl-tests/build); unset: PATH"
    )
    json_report: Literal["auto", "on", "off"] = Field(
        "auto", description="read nccl-tests' JSON report (-J) when the binary has it (auto), always, or never"
    )

    @model_validator(mode="after")
    def _sizes(self):
        if self.max_bytes < self.min_bytes:
            raise ValueError(f"max_bytes ({self.max_bytes}) must be >= min_bytes ({self.min_bytes})")
        if (self.busbw_gbps is not None or self.variant_busbw_gbps) and self.plateau_min_bytes > self.max_bytes:
            raise ValueError(
                f"plateau_min_bytes ({human(self.plateau_min_bytes)}) is above max_bytes "
                f"({human(self.max_bytes)}): no row would be judged"
            )
        return self

    def floor(self, variant: Variant) -> Floor | None:
        return self.variant_busbw_gbps.get(variant, self.busbw_gbps)

    def test_env(self, variant: str) -> dict[str, str]:
        """The environment the test runs with: `env`, the job's over it as far as each travels."""
        return nccltest.job_env(self.env, variant, self.job_env)

    def ran_without(self, verdict: Verdict) -> Verdict:
        """`verdict` with what of the environment the test ran without: every name left behind and why
        in observed["env_not_passed"] (names only), and, where the job's library, plugin or file
        variables were refused, a note in the message, so no one takes the job's plugin as tested."""
        left = nccltest.left_behind(self.env, self.job_env)
        if not left:
            return verdict
        loading = [name for name, why in left.items() if why == LOADS_OR_WRITES]
        note = (
            f"; the test ran without the job's {', '.join(loading)}: each {LOADS_OR_WRITES} (a playbook's "
            "env: may set it)"
            if loading
            else ""
        )
        return dataclasses.replace(
            verdict, message=verdict.message + note, observed={**verdict.observed, "env_not_passed": left}
        )

    def sweep(self, collective: str) -> nccltest.Sweep:
        return nccltest.Sweep(
            collective,
            self.min_bytes,
            self.max_bytes,
            self.step_factor,
            self.iters,
            self.warmup_iters,
            self.check,
            self.datatype,
            self.op,
        )


class NcclSingle(NcclSweep):
    """nccl.allreduce_single: every node at once, one process driving all its GPUs."""

    gpus: int = Field(8, ge=1, le=64, strict=True, description="-g: GPUs per node the test drives")


class NcclMulti(NcclSweep):
    """nccl.allreduce_multi: one test across the selected nodes through a launcher."""

    launcher: Literal["mpirun", "srun"] = Field(
        "mpirun", description="mpirun (Open MPI / HPC-X, -H host list) or srun (inside an allocation)"
    )
    launcher_args: list[Annotated[str, Field(pattern=nccltest.WORD.pattern)]] = Field(
        [], description="extra launcher arguments, e.g. [--allow-run-as-root] or [--mca, pml, ucx]"
    )
    launch_node: str | None = Field(
        None, description="where the launcher runs (rank 0's node); unset: the first node of the run"
    )
    ranks_per_node: int = Field(1, ge=1, le=64, strict=True, description="processes per node")
    gpus_per_rank: int = Field(8, ge=1, le=64, strict=True, description="-g per process")
    localize: bool = Field(
        True,
        description="when the test fails: 2-node tests (ring, then suspects "
        "re-paired with good partners) to name the node or link",
    )
    pairing: Literal["ring", "all"] = "ring"
    max_rounds: int = Field(planner.DEFAULT_MAX_ROUNDS, ge=0, le=64, strict=True)
    pair_busbw_gbps: Floor | None = Field(
        None,
        description="thresholds for the 2-node tests (default: busbw_gbps); a variant listed in "
        "variant_busbw_gbps judges its 2-node tests by that",
    )
    pair_max_bytes: ByteSize | None = Field(None, description="-e of the 2-node tests (default max_bytes)")
    pair_timeout_s: float | None = Field(
        None, gt=0, le=86400, allow_inf_nan=False, description="per 2-node test (default test_timeout_s)"
    )

    @model_validator(mode="after")
    def _multi(self):
        if "nvlink_only" in self.variants:
            raise ValueError("nvlink_only is a single-node variant (nccl.allreduce_single)")
        if self.pair_max_bytes is not None and self.pair_max_bytes < self.min_bytes:
            raise ValueError(f"pair_max_bytes ({self.pair_max_bytes}) must be >= min_bytes ({self.min_bytes})")
        judged = self.busbw_gbps is not None or self.pair_busbw_gbps is not None or self.variant_busbw_gbps
        if self.pair_max_bytes is not None and judged and self.pair_max_bytes < self.plateau_min_bytes:
            raise ValueError(
                f"pair_max_bytes ({human(self.pair_max_bytes)}) is below plateau_min_bytes "
                f"({human(self.plateau_min_bytes)}): no pair row would be judged"
            )
        return self

    def pair_floor(self, variant: Variant) -> Floor | None:
        """A variant's own floor first (a network-only pair is slow by design), then the pairs', then
        busbw_gbps."""
        return self.variant_busbw_gbps.get(variant) or self.pair_busbw_gbps or self.busbw_gbps


# ---------------------------------------------------------------- judging one run (pure)


@dataclass(frozen=True)
class RunVerdict:
    """One nccl-tests run judged; `hang` is "init" or "collective" for a run that was killed."""

    status: Status
    message: str
    observed: dict = field(default_factory=dict)
    excerpt: str = ""
    hang: str | None = None
    busbw: float | None = None
    cut: Cut | None = None  # the launcher's step was cut by nodecheck (deadline, stop)

    @property
    def brief(self) -> str:
        """The finding without the test's name or the run's details: "busbw 137.8 GB/s",
        "hung in NCCL init: ...", "data corruption: ...", "nccl failure on node3: ..."."""
        if self.busbw is not None:
            return f"busbw {fmt(self.busbw)} GB/s"
        return self.message.split(": ", 1)[-1].split("; ")[0]

    def verdict(self, subject: str, expected: Mapping[str, object] | None = None) -> Verdict:
        return Verdict(self.status, self.message, subject, self.observed, dict(expected or {}), self.excerpt, self.cut)


_HANG_STAGE = {
    Stage.NOTHING: "before any output: the launcher or the processes never started",
    Stage.HEADER: "before the rank list: the ranks never all started or met (launcher / MPI rendezvous)",
    Stage.DEVICES: "after the rank list, before NCCL init began (no 'NCCL version' line)",
    Stage.INIT: "in NCCL init: 'NCCL version' printed, no result row (the communicator's bootstrap "
    "never completed: a rank with another NCCL, e.g. a stale image, or an unreachable "
    "bootstrap interface)",
}


def judge_output(
    stdout: str,
    want: NcclSweep,
    what: str,
    expected_ranks: int | None = None,
    floor: Floor | None = None,
    env: Mapping[str, str] | None = None,
) -> RunVerdict:
    """A test probe's output (sections `test`, optionally `json`) -> one verdict. Pure."""
    sections = split_sections(stdout, "nccl-tests")
    test = sections.get("test")
    if test is None:
        return RunVerdict(
            Status.ERROR, f"{what}: the test never started: {_first_line(sections.preamble)}", excerpt=excerpt(stdout)
        )
    rc = test.rc
    floor = floor if floor is not None else want.busbw_gbps
    run, unread = _read(test.text, sections.get("json"))
    note = unread.reason if unread else ""
    killed = rc is None or rc in (124, 137)
    limit = fmt(want.test_timeout_s)
    if run is None:
        if killed:
            return RunVerdict(
                Status.FAIL,
                f"{what}: hung before printing anything, killed after {limit} s: " + _HANG_STAGE[Stage.NOTHING],
                {"stage": Stage.NOTHING.value, "exit_code": rc},
                excerpt(test.text),
                hang="init",
            )
        if rc == 127:
            return RunVerdict(
                Status.ERROR,
                f"{what}: {_first_line(test.text) or 'command not found (exit 127)'}",
                {"exit_code": rc},
                excerpt(test.text),
            )
        # no nccl-tests line at all: the launcher or the binary refused to start (mpirun as root, a
        # bad option, a library missing). Nothing was measured, so nothing is judged: ERROR, and a
        # multi-node run is not "localized" onto healthy nodes
        if unread and not isinstance(unread, NoNcclTestsOutput):
            # nccl-tests lines that cannot be judged as one run (two runs in one output, a nan row)
            return RunVerdict(
                Status.ERROR,
                f"{what}: the output cannot be judged: {note}",
                {"exit_code": rc, "parse_error": note},
                excerpt(test.text),
            )
        said = _said(test.text)
        return RunVerdict(
            Status.ERROR,
            f"{what}: no nccl-tests output, exit {rc}" + (f": {said}" if said else ""),
            {"exit_code": rc, "parse_error": note},
            excerpt(test.text),
        )
    observed = _observed(run, rc)
    tail = excerpt(test.text[-4000:]) if len(test.text) > 4000 else test.text
    mixed = _mixed_versions(run)  # the stale-image signature, when the ranks say so
    wrong = [(r.size, sum(m.wrong or 0 for m in (r.out_of_place, r.in_place) if m is not None)) for r in run.rows]
    wrong = [(size, n) for size, n in wrong if n > 0]
    corrupt = ""  # data corruption is a finding even in a run that stopped
    if wrong:
        sizes = f"{human(wrong[0][0])}..{human(wrong[-1][0])}" if len(wrong) > 1 else human(wrong[0][0])
        corrupt = f"data corruption: {sum(n for _, n in wrong)} wrong elements in {len(wrong)} sizes ({sizes})"
        observed["wrong"] = [[s, n] for s, n in wrong]
    elif (run.out_of_bounds or 0) > 0:
        corrupt = f"data corruption: {run.out_of_bounds} out-of-bounds values"
    also = f"; {corrupt}" if corrupt else ""
    if killed:
        stage = run.stage
        failed = next((f for f in run.failures if f.kind != "launcher"), None)
        also += f"; first failure: {failed}" if failed else ""
        # the table header is printed after the communicators are made: a run killed after it hung
        # in the first collective, whether or not NCCL_DEBUG printed the 'NCCL version' line
        if stage is Stage.SWEEP or stage is Stage.DONE or (stage is Stage.INIT and run.columns):
            where = "after the summary (teardown)" if stage is Stage.DONE else run.stopped_at(failures=False)
            return RunVerdict(
                Status.FAIL,
                f"{what}: a collective hung {where}; killed after {limit} s{also}{mixed}",
                observed,
                tail,
                hang="collective",
            )
        debug = (env or {}).get("NCCL_DEBUG", nccltest.DEFAULT_NCCL_DEBUG).upper()
        why = _HANG_STAGE[stage]
        if stage is Stage.DEVICES and debug not in nccltest.PRINTS_VERSION:
            why = "after the rank list, before the first result row (NCCL init or the first collective)"
        # the versions go before the first "; ": they are the finding a summary (brief) must keep
        versions = f" — and {mixed[2:]}" if mixed else ""
        return RunVerdict(
            Status.FAIL, f"{what}: hung {why}{versions}; killed after {limit} s{also}", observed, tail, hang="init"
        )
    stopped = ("" if run.stage is Stage.DONE else f"; {run.stopped_at(failures=False)}") + mixed
    if corrupt:
        more = f"; {len(run.failures)} failure lines" if run.failures else ""
        return RunVerdict(
            Status.FAIL, f"{what}: {corrupt}" + (f"; exited {rc}" if rc else "") + more + stopped, observed, tail
        )
    if run.failures:
        first = next((f for f in run.failures if f.kind != "launcher"), run.failures[0])
        where = f" on {first.host}" if first.host else ""
        loc = f" ({first.location})" if first.location else ""
        others = len(run.failures) - 1
        return RunVerdict(
            Status.FAIL,
            f"{what}: {first.kind} failure{where}: {first.message}{loc}"
            + (f" (+{others} more failure lines)" if others else "")
            + stopped,
            observed,
            tail,
        )
    if rc != 0:
        return RunVerdict(Status.FAIL, f"{what}: exited {rc}{stopped}", observed, tail)
    if run.stage is not Stage.DONE:
        return RunVerdict(
            Status.ERROR,
            f"{what}: the output stopped early ({run.stopped_at(failures=False)}) though the test exited 0",
            observed,
            tail,
        )
    if expected_ranks is not None and run.devices and len(run.devices) != expected_ranks:
        return RunVerdict(
            Status.FAIL, f"{what}: {len(run.devices)} ranks in the output, expected {expected_ranks}", observed, tail
        )
    plateau = [r for r in run.rows if r.size >= want.plateau_min_bytes]
    speeds = [b for r in plateau if (b := _best_busbw(r)) is not None]
    avg = f"avg busbw {fmt(run.avg_busbw_gbs)} GB/s" if run.avg_busbw_gbs is not None else "no average"
    ranks = f"{len(run.devices)} ranks" if run.devices else "ranks not listed"
    unchecked = want.check and run.params is not None and run.params.validation is False
    if not speeds:
        if floor is None:
            status = Status.WARN if unchecked else Status.PASS
            return RunVerdict(
                status,
                f"{what}: completed, {ranks}, {avg}; no row at or above "
                f"{human(want.plateau_min_bytes)} (bandwidth not judged)",
                observed,
            )
        biggest = human(run.rows[-1].size) if run.rows else "none"
        return RunVerdict(
            Status.ERROR,
            f"{what}: no result row at or above {human(want.plateau_min_bytes)} to judge (largest: {biggest})",
            observed,
            tail,
        )
    low = min(speeds)
    observed["busbw_plateau_gbs"] = low
    if floor is None:
        v = Verdict(Status.PASS, f"busbw {fmt(low)} GB/s (not judged: no busbw_gbps)")
    else:
        v = floor.judge(low, what="busbw", unit="GB/s")
    status = v.status if not (unchecked or mixed) else worst([v.status, Status.WARN])
    message = (
        f"{what}: {v.message} at >= {human(want.plateau_min_bytes)} (slowest of {len(speeds)} "
        f"sizes), {avg}, {ranks}"
        + (f", NCCL {run.nccl_version}" if run.nccl_version else "")
        + ("; results NOT validated (validation: 0)" if unchecked else "")
        + mixed
    )
    return RunVerdict(status, message, observed, tail if status is not Status.PASS else "", busbw=low)


def _read(text: str, json_section) -> tuple[NcclTestRun | None, ParseError | None]:
    """The JSON report when it is complete, else the text; or why neither could be read."""
    if json_section is not None and json_section.text.strip():
        try:
            run = parse_nccl_tests_json(json_section.text)
            if run.rows:
                return _with_text_facts(run, text), None
        except ParseError:
            pass  # a JSON cut by a killed writer: the text still says where
    try:
        return parse_nccl_tests(text), None
    except ParseError as e:
        return None, e


def _with_text_facts(run: NcclTestRun, text: str) -> NcclTestRun:
    """The JSON report has no failure lines or NCCL log, and lists one device per process (not per
    GPU: util.cu records the first rank line of each process): the text's are kept."""
    try:
        from_text = parse_nccl_tests(text)
    except ParseError:
        return run
    return dataclasses.replace(
        run,
        failures=run.failures or from_text.failures,
        log=run.log or from_text.log,
        nccl_version=run.nccl_version or from_text.nccl_version,
        devices=from_text.devices if len(from_text.devices) > len(run.devices) else run.devices,
    )


def _mixed_versions(run: NcclTestRun) -> str:
    """ "; ranks run different NCCL versions: 2.21.5 on node3, 2.29.2 on node[1-2,4]" or ""."""
    if len(run.nccl_versions) < 2:
        return ""
    hosts = dict(run.nccl_version_hosts)
    parts = [
        f"{v} on {fold(hosts[v])}" if hosts.get(v) else v
        for v in sorted(run.nccl_versions, key=lambda v: (len(hosts.get(v, ())), v))
    ]  # fewest hosts first
    return "; ranks run different NCCL versions: " + ", ".join(parts)


def _best_busbw(row) -> float | None:
    values = [m.busbw_gbs for m in (row.out_of_place, row.in_place) if m is not None and m.busbw_gbs is not None]
    return max(values) if values else None


def _observed(run: NcclTestRun, rc: int | None) -> dict:
    hosts: dict[str, list[int]] = {}
    for d in run.devices:
        hosts.setdefault(d.host, []).append(d.rank)
    return {
        "exit_code": rc,
        "stage": run.stage.value,
        "nccl_version": run.nccl_version,
        "nccl_versions": {v: list(h) for v, h in run.nccl_version_hosts} or list(run.nccl_versions),
        "avg_busbw_gbs": run.avg_busbw_gbs,
        "rows": len(run.rows),
        "source": "json" if run.from_json else "text",
        "ranks": [
            {"rank": d.rank, "host": d.host, "gpu": d.device, "bus_id": d.bus_id, "model": d.model}
            for d in run.devices[:1024]
        ],
        "hosts": {h: _ranges(r) for h, r in hosts.items()},
    }


def _ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 3, 8] -> '0-3,8'."""
    out, start = [], None
    for i, r in enumerate(sorted(ranks)):
        if start is None:
            start = prev = r
        elif r == prev + 1:
            prev = r
        else:
            out.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = r
        if i == len(ranks) - 1:
            out.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(out)


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _said(text: str) -> str:
    """The first line that says something: not blank, not a banner rule ('-----')."""
    return next((ln.strip() for ln in text.splitlines() if any(ch.isalnum() for ch in ln)), "")


def subject(collective: str, variant: str) -> str:
    words = nccltest.VARIANT_WORDS[variant]
    return f"{collective} ({words})" if words else collective


# ---------------------------------------------------------------- nccl.allreduce_single


def _single_name(collective: str, variant: str) -> str:
    return f"nccl_{collective}" + ("" if variant == "default" else f"_{variant}")


def single_probes(want: NcclSingle) -> list[Probe]:
    return [
        nccltest.single_node(
            _single_name(c, v),
            want.sweep(c),
            want.gpus,
            want.test_env(v),
            want.test_timeout_s,
            want.binary_dir,
            want.json_report,
        )
        for v in want.variants
        for c in want.collectives
    ]


@check("nccl.allreduce_single", probes=single_probes, params=NcclSingle)
def allreduce_single(out: Captures, want: NcclSingle) -> Verdicts:
    """nccl-tests on every node at once, one process driving all its GPUs (-g): bus bandwidth at
    the plateau sizes against busbw_gbps, data corruption (#wrong), hangs classified by where they stopped.

    Variants network_only / nvlink_only tell a slow NVLink from a slow NIC."""
    for variant in want.variants:
        for collective in want.collectives:
            capture = out[_single_name(collective, variant)]
            what = subject(collective, variant)
            floor = want.floor(variant)
            t = judge_output(
                capture.stdout, want, what, expected_ranks=want.gpus, floor=floor, env=want.test_env(variant)
            )
            yield want.ran_without(
                t.verdict(what, {"busbw_gbps": floor.model_dump() if floor else None, "gpus": want.gpus})
            )


# ---------------------------------------------------------------- nccl.allreduce_multi

_TOOLS = r"""
for t in "$@"; do
  if p=$(command -v "$t" 2>/dev/null); then echo "@@nodecheck have $t $p"; else echo "@@nodecheck missing $t"; fi
done
"""


def multi_probes(want: NcclMulti) -> list[Probe]:
    """Before the test: which nodes have the binaries (a node without them is named, not part of the run)."""
    tools = [nccltest.tool_path(c, want.binary_dir) for c in want.collectives] + [want.launcher]
    return [Probe("nccl_tools", ("sh", "-c", _TOOLS, "sh", *tools), timeout_s=15)]


@dataclass(frozen=True)
class PairTest:
    """One 2-node test of the localization."""

    round: int
    nodes: tuple[str, str]
    status: Status
    busbw_gbs: float | None
    hang: str | None
    message: str

    def as_json(self) -> dict:
        return {
            "round": self.round,
            "nodes": list(self.nodes),
            "status": self.status.value,
            "busbw_gbs": self.busbw_gbs,
            "hang": self.hang,
            "message": self.message,
        }


@dataclass
class Localization:
    """The 2-node tests that followed a failed multi-node test, and whom they blame."""

    pairs: list[PairTest]
    bad_nodes: list[str]
    bad_links: list[tuple[str, str]]
    unresolved: list[str]


@dataclass
class MultiTest:
    """One multi-node test: a collective in one variant across the usable nodes."""

    test: str  # "all_reduce (network only)"
    nodes: str  # folded: "node[1-4]"
    ranks: int
    status: Status
    busbw_gbs: float | None
    message: str
    hang: str | None
    localization: Localization | None = None  # set when it failed and 2-node tests ran

    def as_json(self) -> dict:
        out = {
            "test": self.test,
            "nodes": self.nodes,
            "ranks": self.ranks,
            "status": self.status.value,
            "busbw_gbs": self.busbw_gbs,
            "message": self.message,
            "hang": self.hang,
        }
        if self.localization is not None:
            loc = self.localization
            out.update(
                {
                    "pairs": [t.as_json() for t in loc.pairs],
                    "bad_nodes": list(loc.bad_nodes),
                    "bad_links": [list(p) for p in loc.bad_links],
                    "unresolved": list(loc.unresolved),
                }
            )
        return out


@dataclass
class MultiReport:
    """The JSON report's nccl.allreduce_multi block."""

    env_not_passed: Mapping[str, str]  # names only: what the tests ran without, and why
    tests: list[MultiTest] = field(default_factory=list)

    def as_json(self, incomplete: Sequence[str]) -> dict:
        return {
            **({"env_not_passed": dict(self.env_not_passed)} if self.env_not_passed else {}),
            **({"incomplete": list(incomplete)} if incomplete else {}),
            "tests": [t.as_json() for t in self.tests],
        }


@check("nccl.allreduce_multi", probes=multi_probes, params=NcclMulti, scope="active")
def allreduce_multi(ctx: ActiveContext, want: NcclMulti) -> Iterator[Grouped]:
    """One nccl-tests run across the run's nodes through mpirun or srun, judged like the
    single-node test; when it fails, hangs or is slow, 2-node tests name the node that drags every
    pair down (or the link).

    The report maps every rank to its host and GPU."""
    usable = []
    for node in [n for n in ctx.order if n in ctx.nodes]:
        gone = missing_tools(ctx.captures[node]["nccl_tools"].stdout)
        if gone:
            yield (
                (node,),
                Verdict(
                    Status.ERROR,
                    f"not in the test: {', '.join(gone)} not found on this node",
                    observed={"missing": gone},
                ),
            )
        elif not nccltest.HOST.match(node):
            yield (
                (node,),
                Verdict(
                    Status.ERROR,
                    f"not in the test: the node name {node!r} cannot be passed to {want.launcher} as a host name",
                ),
            )
        else:
            usable.append(node)
    launch = want.launch_node
    if launch is not None:
        if launch not in usable:
            for node in usable:
                yield (
                    (node,),
                    Verdict(
                        Status.ERROR, f"launch_node {launch} is not among the usable nodes ({fold(usable) or 'none'})"
                    ),
                )
            return
        usable.remove(launch)
        usable.insert(0, launch)
    if len(usable) < 2:
        for node in usable:
            yield (
                (node,),
                Verdict(Status.ERROR, f"a multi-node test needs at least 2 usable nodes, found {len(usable)}"),
            )
        return
    # names only: what the test ran without, and why not its values
    report = MultiReport(nccltest.left_behind(want.env, want.job_env))
    ctx.report(report)
    for variant in want.variants:
        for collective in want.collectives:
            for group, verdict in _one_collective(ctx, want, usable, collective, variant, report.tests):
                yield group, want.ran_without(verdict)


def _one_collective(
    ctx: ActiveContext, want: NcclMulti, nodes: list[str], collective: str, variant: Variant, runs: list[MultiTest]
) -> Iterator[Grouped]:
    what = subject(collective, variant)
    env = want.test_env(variant)
    limit = want.test_timeout_s
    ranks = len(nodes) * want.ranks_per_node * want.gpus_per_rank
    needs = nccltest.probe_timeout_s(limit, want.json_report) + AFTER_RESERVE_S
    if ctx.left() < needs:
        why = f"not run: {ctx.left():.0f} s left before the deadline, the test may take {needs:.0f} s"
        ctx.incomplete(f"{what}: {why}")
        yield tuple(nodes), Verdict(Status.SKIPPED, f"{what}: {why}", what)
        return
    probe = nccltest.multi_node(
        f"nccl_{collective}_{variant}_{len(nodes)}nodes",
        want.launcher,
        nodes,
        want.ranks_per_node,
        want.gpus_per_rank,
        want.sweep(collective),
        env,
        limit,
        want.binary_dir,
        want.launcher_args,
        want.json_report,
    )
    capture = ctx.run(nodes[0], probe)
    full = _judge_capture(capture, want, what, ranks, want.floor(variant), env)
    runs.append(MultiTest(what, fold(nodes), ranks, full.status, full.busbw, redact_text(full.message), full.hang))
    scale = f"{len(nodes)} nodes ({fold(nodes)}), {ranks} ranks"
    if full.status in (Status.PASS, Status.WARN):
        yield (
            tuple(nodes),
            Verdict(
                full.status,
                f"{full.message.replace(what + ': ', what + ' across ' + scale + ': ', 1)}",
                what,
                full.observed,
            ),
        )
        return
    if full.status is not Status.FAIL or not want.localize or len(nodes) < 3:
        why = (
            ""
            if full.status is not Status.FAIL
            else ("; localize is off" if not want.localize else "; 2 nodes: a pair test cannot tell which")
        )
        yield (
            tuple(nodes),
            Verdict(
                full.status, f"{full.message} ({scale}){why}", what, full.observed, excerpt=full.excerpt, cut=full.cut
            ),
        )
        return
    yield from _localize(ctx, want, nodes, collective, variant, what, env, full, runs[-1])


def _judge_capture(
    capture: Capture, want: NcclMulti, what: str, ranks: int, floor: Floor | None, env: Mapping[str, str]
) -> RunVerdict:
    if capture.outcome is not Outcome.EXITED:
        status = {
            Outcome.TIMEOUT: Status.TIMEOUT,
            Outcome.UNREACHABLE: Status.UNREACHABLE,
            Outcome.SKIPPED: Status.SKIPPED,
        }.get(capture.outcome, Status.ERROR)
        return RunVerdict(
            status,
            f"{what}: launcher on {capture.node} {capture.outcome.value}: {capture.detail}",
            excerpt=excerpt(capture.stdout + capture.stderr),
            cut=capture.cut,
        )
    if capture.exit_code != 0:  # the wrapper itself failed (a tool missing: 127)
        first = _first_line(capture.stderr) or _first_line(capture.stdout)
        return RunVerdict(
            Status.ERROR,
            f"{what}: could not start on {capture.node} (exit {capture.exit_code}): {first}",
            {"exit_code": capture.exit_code},
            excerpt(capture.stderr + capture.stdout),
        )
    return judge_output(capture.stdout, want, what, ranks, floor, env)


def _localize(
    ctx: ActiveContext,
    want: NcclMulti,
    nodes: list[str],
    collective: str,
    variant: Variant,
    what: str,
    env: Mapping[str, str],
    full: RunVerdict,
    run: MultiTest,
) -> Iterator[Grouped]:
    """2-node tests in rounds of disjoint pairs (the ib.pairs planner): ring, then suspects
    re-paired with nodes that passed."""
    floor = want.pair_floor(variant)
    pair_want = want.model_copy(
        update={
            "test_timeout_s": want.pair_timeout_s or want.test_timeout_s,
            "max_bytes": want.pair_max_bytes or want.max_bytes,
        }
    )
    ranks = 2 * want.ranks_per_node * want.gpus_per_rank
    tests: list[PairTest] = []
    verdict_of: dict[planner.Pair, RunVerdict] = {}
    unjudged: dict[planner.Pair, RunVerdict] = {}  # errored, unreachable, cut: no evidence either way
    cut: list[str] = []
    tag = secrets.token_hex(3)

    def run_pair(rnd: int, slot: int, pair: planner.Pair) -> RunVerdict:
        hosts = [pair.a, pair.b]
        probe = nccltest.multi_node(
            f"nccl_{collective}_{variant}_pair_r{rnd}_{pair.a}_{pair.b}_{tag}",
            want.launcher,
            hosts,
            want.ranks_per_node,
            want.gpus_per_rank,
            pair_want.sweep(collective),
            env,
            pair_want.test_timeout_s,
            want.binary_dir,
            want.launcher_args,
            want.json_report,
        )
        return _judge_capture(ctx.run(pair.a, probe), pair_want, f"{what} {pair.a}+{pair.b}", ranks, floor, env)

    def round_not_run(rnd: planner.Round, left: float, needs: float) -> None:
        cut.append(f"{what}: pair round {rnd.index + 1} not run: {left:.0f} s left, it needs {needs:.0f} s")

    def judge_pair(rnd: planner.Round, pair: planner.Pair, t: RunVerdict) -> bool | None:
        tests.append(PairTest(rnd.index + 1, (pair.a, pair.b), t.status, t.busbw, t.hang, t.message))
        if t.status in (Status.SKIPPED, Status.ERROR, Status.UNREACHABLE, Status.TIMEOUT):
            unjudged[pair] = t  # could not test: no evidence either way
            return None
        verdict_of[pair] = t
        return t.status in (Status.PASS, Status.WARN)

    _, blame = ctx.pair_rounds(
        nodes,
        run_pair,
        judge_pair,
        wave_s=nccltest.probe_timeout_s(pair_want.test_timeout_s, want.json_report),
        not_run=round_not_run,
        pairing=want.pairing,
        max_rounds=want.max_rounds,
    )
    run.localization = Localization(
        tests, sorted(blame.bad_nodes), [(p.a, p.b) for p in blame.bad_links], sorted(blame.unresolved)
    )
    for why in cut:
        ctx.incomplete(why)
    full_words = full.brief
    scale = f"{len(nodes)}-node test"
    bound = f" (expected >= {fmt(floor.fail_below)} GB/s)" if floor is not None else ""
    warn_bound = f" (warn below {fmt(floor.warn_below)} GB/s)" if floor is not None and floor.warn_below else ""
    whole = want.floor(variant)
    full_bound = f", expected >= {fmt(whole.fail_below)} GB/s" if whole is not None and full.busbw is not None else ""
    blamed_nodes = set(blame.bad_nodes)
    blamed_links = set(blame.bad_links)

    def mine(node: str, ok: bool, open_only: bool = False) -> list[tuple[str, RunVerdict]]:
        """(partner, test) of node's judged pair tests that passed (ok) or failed; open_only: the
        failures not already blamed on the partner or on the link."""
        return [
            (p.other(node), t)
            for p, t in sorted(verdict_of.items())
            if node in (p.a, p.b)
            and (t.status in (Status.PASS, Status.WARN)) == ok
            and not (open_only and (p.other(node) in blamed_nodes or p in blamed_links))
        ]

    def listed(found: list[tuple[str, RunVerdict]], limit: str = bound) -> str:
        return "; ".join(f"{who}: {t.brief}" for who, t in found) + (
            limit if any(t.busbw is not None for _, t in found) else ""
        )

    for node, evidence in blame.bad_nodes.items():
        first = next((verdict_of[p] for p in evidence.failed if p in verdict_of), full)
        failed, vouching = len(evidence.failed), len(evidence.good_partners)
        partners = (
            f"{failed} partners that pass with others"
            if failed == vouching
            else f"all {failed} partners, {vouching} of which pass with others"
        )
        yield (
            (node,),
            Verdict(
                Status.FAIL,
                f"{what}: bad node: the {scale} failed ({full_words}{full_bound}); "
                f"it fails with {partners}: {listed(mine(node, ok=False))}",
                what,
                {
                    "full_test": full.observed,
                    "evidence": evidence.message,
                    "vouching_partners": list(evidence.good_partners),
                },
                excerpt=first.excerpt or full.excerpt,
            ),
        )
    for pair, evidence in blame.bad_links.items():
        t = verdict_of.get(pair, full)
        yield (
            (pair.a, pair.b),
            Verdict(
                Status.FAIL,
                f"{what}: bad pair {pair.a}+{pair.b}: both pass with other "
                f"partners, not with each other: {t.brief}{bound if t.busbw is not None else ''}",
                what,
                {"evidence": evidence.message},
                excerpt=t.excerpt,
            ),
        )
    for node, evidence in blame.unresolved.items():
        open_failures = mine(node, ok=False, open_only=True)
        if not open_failures:  # it failed only with blamed nodes: nothing against it
            yield (
                (node,),
                Verdict(
                    Status.ERROR,
                    f"{what}: not judged: the {scale} failed and {evidence.message}",
                    what,
                    {"evidence": evidence.message},
                ),
            )
            continue
        yield (
            (node,),
            Verdict(
                Status.FAIL,
                f"{what}: failed its pair tests, not enough good partners to tell which side: {listed(open_failures)}",
                what,
                {"evidence": evidence.message},
            ),
        )
    flagged = set(blame.bad_nodes) | set(blame.unresolved) | {n for p in blame.bad_links for n in (p.a, p.b)}
    tested = {n for p in verdict_of for n in (p.a, p.b)}
    rest = [n for n in nodes if n not in flagged]
    unjudged_note = ""
    if unjudged:
        pair, t = next(iter(sorted(unjudged.items())))
        unjudged_note = (
            f"; {len(unjudged)} 2-node test{'s' if len(unjudged) > 1 else ''} could not be judged "
            f"({pair.a}+{pair.b}: {t.brief})"
        )
    if not flagged:
        status = Status.FAIL if not cut else Status.ERROR
        if verdict_of:
            found = (
                "every 2-node test " + ("that ran " if cut or unjudged else "") + "passes: a problem that "
                "shows only at this scale (topology, a switch, NCCL settings), not one node"
            )
        else:
            found = "no 2-node test gave a result"
        yield (
            tuple(nodes),
            Verdict(
                status,
                f"{full.message} ({len(nodes)} nodes); {found}{unjudged_note}",
                what,
                {"full_test": full.observed, "pair_tests": len(tests)},
                excerpt=full.excerpt,
            ),
        )
        return
    blamed = fold(sorted(blamed_nodes | {n for p in blamed_links for n in (p.a, p.b)})) or fold(
        sorted(blame.unresolved)
    )
    good = [n for n in rest if n in tested]
    slow = {n: [(who, t) for who, t in mine(n, ok=True) if t.status is Status.WARN] for n in good}
    if passing := [n for n in good if not slow[n]]:
        yield (
            tuple(passing),
            Verdict(
                Status.PASS,
                f"{what}: the {scale} failed; this node's 2-node tests pass (blamed: {blamed})",
                what,
                {"full_test_status": full.status.value},
            ),
        )
    for node in (n for n in good if slow[n]):  # a warning in its own pair tests is not hidden
        yield (
            (node,),
            Verdict(
                Status.WARN,
                f"{what}: the {scale} failed (blamed: {blamed}); this node's 2-node "
                f"tests pass, slow with {listed(slow[node], warn_bound)}",
                what,
                {"full_test_status": full.status.value},
            ),
        )
    untested = [n for n in rest if n not in tested]
    if untested:
        errored: dict[str, RunVerdict] = {}
        for pair, t in sorted(unjudged.items()):
            errored.setdefault(pair.a, t)
            errored.setdefault(pair.b, t)
        for node in untested:
            why = f": {errored[node].message}" if node in errored else (f": {cut[0]}" if cut else "")
            yield (
                (node,),
                Verdict(
                    Status.SKIPPED if cut and node not in errored else Status.ERROR,
                    f"{what}: the {scale} failed and this node's 2-node tests "
                    + ("gave no result" if node in errored else "did not run")
                    + why,
                    what,
                ),
            )

"""Judging nccl-tests runs, pure: one run's output against the sweep's thresholds (RunVerdict: bus
bandwidth at the plateau, data corruption, failures, and a hang classified by the stage its output
reached), and the verdicts of a localization (2-node tests after a failed multi-node test, whom the
pair planner of nodecheck/judging/pair_plan.py blames), with the report records they fill.

nodecheck/checks/nccl_allreduce.py runs the tests and applies these; the output is read by
nodecheck/parsers/nccl_tests.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from nodecheck.core.errors import ParseError
from nodecheck.core.hostlist import fold
from nodecheck.core.model import Cut, Status, Verdict, excerpt, worst
from nodecheck.core.thresholds import Floor, fmt
from nodecheck.judging.pair_plan import Blame, Pair
from nodecheck.parsers.nccl_tests import NoNcclTestsOutput, parse_nccl_tests
from nodecheck.parsers.nccl_tests_facts import NcclTestRun, Stage
from nodecheck.parsers.nccl_tests_json import parse_nccl_tests_json
from nodecheck.parsers.sections import split_sections

Grouped = tuple[tuple[str, ...], Verdict]

# NCCL prints "NCCL version X" at communicator init (init.cc showVersion: the plain line from rank 0
# with NCCL_DEBUG=VERSION or WARN, an INFO line from every rank with INFO; nothing when unset): the
# line that tells a run that hung before NCCL init from one that hung inside it
PRINTS_VERSION = ("VERSION", "WARN", "INFO", "TRACE")
# the NCCL_DEBUG of a run judged without its environment: the probes' default
# (nodecheck/probes/nccl_tests.py DEFAULT_NCCL_DEBUG; a test keeps the two equal)
ASSUMED_NCCL_DEBUG = "VERSION"


class SweepLimits(Protocol):
    """What judging a run reads of a sweep's parameters (checks/nccl_allreduce.py's NcclSweep)."""

    @property
    def busbw_gbps(self) -> Floor | None: ...
    @property
    def test_timeout_s(self) -> float: ...
    @property
    def plateau_min_bytes(self) -> int: ...
    @property
    def check(self) -> bool: ...


def human(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


# ---------------------------------------------------------------- judging one run


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
    want: SweepLimits,
    what: str,
    expected_ranks: int | None = None,
    floor: Floor | None = None,
    env: Mapping[str, str] | None = None,
    expected_hosts: int | None = None,
) -> RunVerdict:
    """A test probe's output (sections `test`, optionally `json`) -> one verdict. Pure.

    `expected_hosts`: the number of nodes a multi-node test was launched on; its rank list must then
    spread evenly over that many hosts, or the run measured less than it claims (see _spread)."""
    sections = split_sections(stdout, "nccl-tests")
    test = sections.get("test")
    if test is None:
        return RunVerdict(
            Status.ERROR, f"{what}: the test never started: {first_line(sections.preamble)}", excerpt=excerpt(stdout)
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
                f"{what}: {first_line(test.text) or 'command not found (exit 127)'}",
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
        debug = (env or {}).get("NCCL_DEBUG", ASSUMED_NCCL_DEBUG).upper()
        why = _HANG_STAGE[stage]
        if stage is Stage.DEVICES and debug not in PRINTS_VERSION:
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
    if expected_hosts is not None and (spread := _spread(run, expected_hosts)):
        return RunVerdict(Status.ERROR, f"{what}: {spread}", observed, tail)
    plateau = [r for r in run.rows if r.size >= want.plateau_min_bytes]
    speeds = [b for r in plateau if (b := _best_busbw(r)) is not None]
    avg = f"avg busbw {fmt(run.avg_busbw_gbs)} GB/s" if run.avg_busbw_gbs is not None else "no average"
    ranks = f"{len(run.devices)} ranks" if run.devices else "ranks not listed"
    if expected_hosts is not None:
        ranks += f" on {expected_hosts} hosts"
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


def _spread(run: NcclTestRun, hosts: int) -> str:
    """Why a multi-node run's rank list does not show `hosts` nodes each running its share ("" when it
    does). A launcher that ignored its host list (or an output crafted to look healthy) can put every
    rank on one host: its bandwidth is NVLink's, and the fabric between the nodes was never tested.
    Hosts are counted by the names the ranks printed (gethostname on each node), not matched against
    the inventory's names, which may be addresses or aliases."""
    if not run.devices:
        return (
            f"the output lists no ranks, so it cannot show that the test ran on its {hosts} nodes; "
            "not judged (nccl-tests prints '#  Rank N ... on HOST' for every rank)"
        )
    per_host: dict[str, int] = {}
    for d in run.devices:
        per_host[d.host] = per_host.get(d.host, 0) + 1
    if len(per_host) != hosts:
        names = fold(per_host) if len(per_host) <= 8 else f"{fold(list(per_host)[:8])}, ..."
        return (
            f"the ranks ran on {len(per_host)} host{'s' if len(per_host) != 1 else ''} ({names}), not on the "
            f"{hosts} nodes of the test: the fabric between them was not tested; not judged (is the launcher "
            "given the node list?)"
        )
    share, uneven = len(run.devices) // hosts, len(set(per_host.values())) > 1
    if uneven or share * hosts != len(run.devices):
        counts = sorted(per_host.items(), key=lambda kv: (-kv[1], kv[0]))
        said = ", ".join(f"{n} on {h}" if i else f"{n} ranks on {h}" for i, (h, n) in enumerate(counts[:4]))
        return f"the ranks are not spread evenly: {said}, expected {share} on each; not judged"
    return ""


def read_run(stdout: str) -> NcclTestRun | None:
    """A test probe's output (sections `test`, `json`; or plain nccl-tests output) read as the judge
    reads it (the JSON report when complete, else the text); None when neither can be read."""
    sections = split_sections(stdout, "nccl-tests")
    test = sections.get("test")
    return _read(test.text if test is not None else stdout, sections.get("json"))[0]


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


def first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _said(text: str) -> str:
    """The first line that says something: not blank, not a banner rule ('-----')."""
    return next((ln.strip() for ln in text.splitlines() if any(ch.isalnum() for ch in ln)), "")


# ---------------------------------------------------------------- localization (nccl.allreduce_multi)


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


def judge_localization(
    what: str,
    nodes: Sequence[str],
    full: RunVerdict,
    floor: Floor | None,
    whole: Floor | None,
    blame: Blame,
    verdict_of: Mapping[Pair, RunVerdict],
    unjudged: Mapping[Pair, RunVerdict],
    cut: Sequence[str],
    pair_tests: int,
) -> Iterator[Grouped]:
    """The verdicts of a localization: the failed multi-node test `full` over `nodes`, the 2-node tests
    judged (verdict_of) or not (unjudged) and whom the pair planner blames. floor: the pair tests'
    threshold, whole: the multi-node test's; cut: the pair rounds the deadline left out."""
    full_words = full.brief
    scale = f"{len(nodes)}-node test"
    bound = f" (expected >= {fmt(floor.fail_below)} GB/s)" if floor is not None else ""
    warn_bound = f" (warn below {fmt(floor.warn_below)} GB/s)" if floor is not None and floor.warn_below else ""
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
                {"full_test": full.observed, "pair_tests": pair_tests},
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

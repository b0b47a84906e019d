"""The Report aggregate: results of one run, per-node gate statuses, exit code; pure data."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from operator import itemgetter

from nodecheck.core.model import SEVERITY, Capture, CheckResult, Status, worst

# 2: cross-node results carry group/group_size; 3: each distinct command line once, in "argvs", and
# evidence and captures name theirs by index (a probe's script was repeated in every entry: 73 % of
# a 1,000-node report)
REPORT_VERSION = 3

# Nagios-compatible, as gcm: monitoring and schedulers read these.
EXIT_PASS, EXIT_WARN, EXIT_FAIL, EXIT_UNKNOWN, EXIT_BAD_INPUT = 0, 1, 2, 3, 64


def exit_code_for(status: Status) -> int:
    if status is Status.PASS:
        return EXIT_PASS
    if status is Status.WARN:
        return EXIT_WARN
    if status is Status.FAIL:
        return EXIT_FAIL
    return EXIT_UNKNOWN  # could not judge: never reported as healthy


@dataclass(frozen=True)
class Report:
    run_id: str  # "20261129T101500Z_default"
    playbook: str
    playbook_path: str
    playbook_sha256: str
    inventory: str | None  # None with --local
    started: datetime
    finished: datetime
    deadline_s: float
    complete: bool  # False: the deadline (or a signal) cut or skipped something
    nodes: tuple[tuple[str, str], ...]  # (name, address), inventory order
    results: tuple[CheckResult, ...]
    captures: tuple[Capture, ...] = ()
    nodecheck_version: str = ""
    incomplete_reason: str = ""  # "the run deadline was reached", "stopped by a signal"
    excluded: tuple[str, ...] = ()  # inventory nodes the playbook's select left out
    playbook_includes: tuple[tuple[str, str], ...] = ()  # (path, sha256) of its pins files
    # what checks keep beyond verdicts, by check name: the pair-bandwidth matrix, the IB counter
    # snapshot the next sweep computes deltas against; plain JSON data
    extras: dict = field(default_factory=dict, compare=False, hash=False)

    def results_for(self, node: str) -> list[CheckResult]:
        return self._by_node.get(node, [])

    def node_status(self, node: str) -> Status:
        """A node with no result is ERROR, never PASS (worst([]) is ERROR)."""
        return self._status.get(node, Status.ERROR)

    @cached_property
    def _by_node(self) -> dict[str, list[CheckResult]]:
        """Results indexed once: reports of thousands of nodes must not be quadratic to render."""
        index: dict[str, list[CheckResult]] = defaultdict(list)
        for r in self.results:
            for node in r.nodes:
                index[node].append(r)
        return dict(index)

    @cached_property
    def _status(self) -> dict[str, Status]:
        return {node: worst(r.verdict.status for r in results) for node, results in self._by_node.items()}

    @property
    def node_names(self) -> list[str]:
        return [name for name, _ in self.nodes]

    @cached_property
    def status(self) -> Status:
        return worst(self.node_status(n) for n in self.node_names)

    @property
    def exit_code(self) -> int:
        code = exit_code_for(self.status)
        # a run cut short (the deadline, a signal) did not check everything it planned: even when
        # every result that came back is healthy, it is no clean bill of health (a safety net: the
        # checks themselves already mark what they could not finish)
        if not self.complete and code in (EXIT_PASS, EXIT_WARN):
            return EXIT_UNKNOWN
        return code

    def summary(self) -> dict[str, int]:
        """How many nodes ended in each status, in severity order, zeros left out."""
        counts = Counter(self.node_status(n) for n in self.node_names)
        return {s.value: counts[s] for s in SEVERITY if counts[s]}


def exit_code_with(report: Report, problems: Sequence[str]) -> int:
    """A command's exit after its run: the report's, but never 0 or 1 when something around the run
    went wrong (its report or metrics file not written, the sweep history not read or recorded): a
    lost report is no clean bill of health. 2 and 3 stand."""
    code = report.exit_code
    return EXIT_UNKNOWN if problems and code in (EXIT_PASS, EXIT_WARN) else code


def most_severe_first(results: Iterable[CheckResult], order: Sequence[str] = ()) -> list[CheckResult]:
    """Results in the order a node's reasons are read (the table's "unhealthy nodes", report.html):
    FAIL, then TIMEOUT and UNREACHABLE alike (neither answered), then ERROR, SKIPPED, WARN, PASS
    (Status.rank). Within one severity every check once before any check again (three services
    FAILs must not push time.sync's FAIL out of a cut line), then in the playbook's `order` of check
    names, else in the run's order (the sort is stable). A line cut at its length loses the least
    severe, never a FAIL for an ERROR."""
    position = {name: i for i, name in enumerate(order)}
    seen: Counter[tuple[str, int]] = Counter()
    keyed = []
    for r in results:
        severity = _reason_rank(r.verdict.status)
        keyed.append(((-severity, seen[(r.check, severity)], position.get(r.check, len(position))), r))
        seen[(r.check, severity)] += 1
    return [r for _, r in sorted(keyed, key=itemgetter(0))]


def _reason_rank(status: Status) -> int:
    # Status.rank puts UNREACHABLE above TIMEOUT for worst(); as a reason neither is graver
    return Status.TIMEOUT.rank if status is Status.UNREACHABLE else status.rank


def capture_relpath(node: str, probe: str, stream: str = "stdout") -> str:
    """Where a probe's raw output lives inside the report directory."""
    suffix = ".txt" if stream == "stdout" else ".stderr.txt"
    return f"captures/{_safe(node)}/{_safe(probe)}{suffix}"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "_"

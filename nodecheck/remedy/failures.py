"""A report's failures per node, and what a step may act on: pure.

Only the results that would drain the node count (nodecheck.gate.decide.draining: a FAIL, or a
TIMEOUT of the node's own making where the run drains on timeouts); an ERROR, a SKIPPED or a
TIMEOUT nodecheck cut short says nothing about what to repair.

A GPU to reset comes from the failing verdict: its subject ("GPU3", as gpu.health names GPUs) or
the Xid's PCI address. Both are read off tool output, so each is taken only in a strict shape:
whatever else the output said never reaches an action.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nodecheck.core.model import Status
from nodecheck.gate.decide import draining
from nodecheck.remedy.model import Failure
from nodecheck.report import Report

_GPU_INDEX = re.compile(r"GPU(\d{1,3})")
# an Xid's address as the kernel logs it (domain:bus:device) or a full bus id (with .function)
_PCI = re.compile(r"(?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)")


def failures(report: Report, statuses: frozenset[Status]) -> dict[str, tuple[Failure, ...]]:
    """Per node with a draining result, each of them in report order (a pair result counts on each
    of its nodes)."""
    out: dict[str, list[Failure]] = {}
    for node in report.node_names:
        for r in report.results_for(node):
            if not draining(r, statuses):
                continue
            v = r.verdict
            capture = next((e.capture_path for e in r.evidence if e.node == node), "")
            out.setdefault(node, []).append(Failure(node, r.check, v.subject, v.message, dict(v.observed), capture))
    return {node: tuple(fs) for node, fs in out.items()}


def unjudged(report: Report, statuses: frozenset[Status]) -> dict[str, str]:
    """Per node with no draining result but some result that is not healthy: why (the worst one).
    Such a node is neither repaired nor returned: nothing says what is wrong, nor that nothing is."""
    out: dict[str, str] = {}
    for node in report.node_names:
        results = report.results_for(node)
        if any(draining(r, statuses) for r in results):
            continue
        bad = [r for r in results if not r.verdict.status.healthy]
        if not results:
            out[node] = "no result: the node was not checked"
        elif bad:
            worst = max(bad, key=lambda r: r.verdict.status.rank)
            out[node] = f"{worst.check} {worst.verdict.status.value}: {worst.verdict.message}"
    return out


def gpu_target(failure: Failure) -> str:
    """The GPU a failure is about, as `nvidia-smi -i` takes it ("3", or a PCI bus id), or "" when it
    names none (a node-wide failure: gpu.count, a missing driver)."""
    m = _GPU_INDEX.fullmatch(failure.subject)
    if m:
        return str(int(m.group(1)))
    pci = failure.observed.get("pci")
    for candidate in (pci if isinstance(pci, str) else "", failure.subject):
        m = _PCI.fullmatch(candidate)
        if m:
            return m.group(1).lower()
    return ""


def node_said(fs: Sequence[Failure], max_items: int = 3) -> str:
    """The failures of a node in one short phrase."""
    said = "; ".join(f.said for f in fs[:max_items])
    return said + (f" (+{len(fs) - max_items} more)" if len(fs) > max_items else "")

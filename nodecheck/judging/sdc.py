"""Silent-data-corruption screening: GPUs that computed the same deterministic workload must agree bit
for bit. Pure: checksums in, who disagrees out.

Only like is compared with like: the GPU model (name, memory, compute capability), the software that
computed it (the GPU library and its version, cuBLAS, the CUDA runtime and driver) and the workload
(dtype, size, steps, seed) form the group key; across keys checksums legitimately differ. Within a
group the expected checksum is the pinned reference for that key where one is given (`reference:`),
else the one a strict majority of the group computed. A GPU is a suspect when its checksum differs,
when its two runs inside the probe differed (repeat_equal false), or when its result holds NaN or Inf.
A suspect is run again once (the check does that): the same wrong answer again is persistent (FAIL),
the expected one is transient (WARN), so that a cosmic-ray flip does not drain a node but a bad SM does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nodecheck.core.model import Status, Verdict


@dataclass(frozen=True)
class Checksum:
    node: str
    gpu: int
    group: str
    checksum: str
    repeat_equal: bool = True
    finite: bool = True

    @property
    def subject(self) -> str:
        return f"GPU{self.gpu}"


@dataclass(frozen=True)
class Expected:
    """What a group's GPUs should have computed, and how it is known."""

    group: str
    checksum: str | None  # None: no reference and no strict majority
    members: int
    agreeing: int
    how: str  # "reference", "majority", "none"
    counts: Mapping[str, int]


def short(checksum: str | None) -> str:
    return checksum[:16] if checksum else "none"


def expected(sums: Sequence[Checksum], reference: Mapping[str, str]) -> dict[str, Expected]:
    """Per group: the pinned reference, else a strict majority's checksum (more than half of the
    group's GPUs, at least two), else none."""
    groups: dict[str, list[Checksum]] = {}
    for s in sums:
        groups.setdefault(s.group, []).append(s)
    out: dict[str, Expected] = {}
    for group, members in groups.items():
        counts = Counter(m.checksum for m in members)
        if group in reference:
            want = reference[group]
            out[group] = Expected(group, want, len(members), counts.get(want, 0), "reference", dict(counts))
            continue
        top, n = counts.most_common(1)[0]
        if n >= 2 and n * 2 > len(members):
            out[group] = Expected(group, top, len(members), n, "majority", dict(counts))
        else:
            out[group] = Expected(group, None, len(members), n, "none", dict(counts))
    return out


def suspect(s: Checksum, want: Expected) -> bool:
    """Needs a second run: differs from what is expected, or was not repeatable or finite on its own."""
    return not s.finite or not s.repeat_equal or (want.checksum is not None and s.checksum != want.checksum)


def verdict(s: Checksum, want: Expected, rerun: Checksum | None, rerun_error: str = "") -> Verdict:
    """The verdict on one GPU, given its group's expectation and, for a suspect, its second run."""
    observed: dict[str, object] = {
        "checksum": s.checksum,
        "repeat_equal": s.repeat_equal,
        "finite": s.finite,
        "group": s.group,
        "expected_from": want.how,
        "group_gpus": want.members,
    }
    expected_ = {"checksum": want.checksum}
    if want.checksum is None and s.finite and s.repeat_equal:
        why = (
            "the only GPU of its kind in this run"
            if want.members == 1
            else f"no strict majority among its {want.members} peers' checksums ({len(want.counts)} distinct)"
        )
        return Verdict(
            Status.SKIPPED if want.members == 1 else Status.ERROR,
            f"{s.subject}: checksum {short(s.checksum)} not compared: {why}, and no reference pinned for "
            f"{s.group!r} (pin one with `reference:`)",
            s.subject,
            observed,
            expected_,
        )
    if not suspect(s, want):
        return Verdict(
            Status.PASS,
            f"{s.subject}: checksum {short(s.checksum)} agrees with "
            + ("the reference" if want.how == "reference" else f"{want.agreeing - 1} peer GPU(s)"),
            s.subject,
            observed,
            expected_,
        )
    what = _what_was_wrong(s, want)
    if rerun is None:
        return Verdict(
            Status.FAIL,
            f"{s.subject}: silent data corruption suspect: {what}; the re-run did not complete"
            + (f" ({rerun_error})" if rerun_error else ""),
            s.subject,
            observed,
            expected_,
        )
    observed["rerun_checksum"] = rerun.checksum
    observed["rerun_repeat_equal"] = rerun.repeat_equal
    if not suspect(rerun, want):
        return Verdict(
            Status.WARN,
            f"{s.subject}: transient mismatch: {what}; the re-run computed {short(rerun.checksum)}, as expected "
            "(watch this GPU: a repeat is a fault)",
            s.subject,
            {**observed, "persistent": False},
            expected_,
        )
    return Verdict(
        Status.FAIL,
        f"{s.subject}: silent data corruption suspect: {what}; persistent: the re-run computed "
        f"{short(rerun.checksum)}"
        + ("" if rerun.finite else " (NaN/Inf again)")
        + ("" if rerun.repeat_equal else " (its two runs differed again)"),
        s.subject,
        {**observed, "persistent": True},
        expected_,
    )


def _what_was_wrong(s: Checksum, want: Expected) -> str:
    if not s.finite:
        return f"its result holds NaN or Inf (checksum {short(s.checksum)})"
    if want.checksum is not None and s.checksum != want.checksum:
        source = (
            f"the pinned reference {short(want.checksum)}"
            if want.how == "reference"
            else f"its {want.agreeing} peers' {short(want.checksum)}"
        )
        return f"checksum {short(s.checksum)} differs from {source} ({want.group})"
    return f"two runs of the same workload on it differed (checksum {short(s.checksum)})"

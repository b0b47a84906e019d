"""nvlink.errors: NVLink error counters judged on their increase over the run's window.

The counters are read twice, like ib.counters: by the GPU probe with the other probes, and by the
same probe again after the active checks ("gpu.after"; NCCL tests load the links in between). Only
the increase is judged (judging/nvlink_rules.py, after DCGM's NVLink health watch: replay and
recovery errors fail on any increase, CRC errors warn on any and fail at 100/s). The second read is
kept in the report (observed.snapshot), so the next sweep compares against it (report/diff.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from pydantic import BaseModel, ConfigDict, Field, field_validator

from nodecheck.checks.gpu import GPU, parse_gpu_probe
from nodecheck.checks.ib_counters import RatePerHour
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status, Verdict
from nodecheck.core.registry import Captures, check
from nodecheck.judging import nvlink_rules as R
from nodecheck.judging.counter_rules import RATE, RateLimit
from nodecheck.parsers.gpu import Gpu, GpuFacts

# the GPU probe again, under its own name: probes are deduplicated by name, and the runner runs
# `after` probes once the active checks are done
GPU_AFTER = replace(GPU, name="gpu.after")


class NvlinkErrors(BaseModel):
    """Limits for the rated NVLink counters and the window they need."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rates: dict[str, RatePerHour] = Field(
        {},
        description="per rated counter (crc_flit, crc_data, ecc_data) {warn_per_hour, fail_per_hour} (or "
        "_per_second), over the defaults: warn on any increase, fail at >= 100/s (DCGM's NVLink health "
        "watch); replay and recovery fail on any increase",
    )
    min_window_s: float = Field(
        R.DEFAULT_MIN_WINDOW_S,
        gt=0,
        le=86400,
        allow_inf_nan=False,
        description="a rated counter that rose over a shorter window warns instead of failing (DCGM's health "
        "watch rates over one minute)",
    )

    @field_validator("rates")
    @classmethod
    def _rated(cls, value: dict) -> dict:
        rated = [n for n, c in R.COUNTERS.items() if c.kind == RATE]
        for name in value:
            if name not in rated:
                raise ValueError(f"{name!r} is not a rated NVLink counter; one of {', '.join(rated)}")
        return value


@check("nvlink.errors", probes=[GPU], after=[GPU_AFTER], params=NvlinkErrors)
def errors(out: Captures, want: NvlinkErrors) -> Iterator[Verdict]:
    """NVLink error counters did not rise over the run: replay and recovery errors fail on any
    increase, CRC errors warn on any and fail at 100/s (DCGM's NVLink health watch)."""
    first = _facts(out[GPU.name].stdout, "first")
    second = _facts(out[GPU_AFTER.name].stdout, "second")
    if isinstance(first, Verdict) or isinstance(second, Verdict):
        yield from (v for v in (first, second) if isinstance(v, Verdict))
        return
    if not first.gpus and not second.gpus:
        source = "NVML" if second.source == "nvml" else "nvidia-smi"
        yield Verdict(Status.FAIL, f"no GPU found ({source}); nvlink.errors expects GPUs", observed={"gpus": 0})
        return
    window = _window(first, second)
    if window is None:
        yield Verdict(
            Status.ERROR,
            "the GPU probe did not report when it read (clock/uptime): the counters' window is unknown",
            observed={"clock": [first.clock, second.clock], "uptime": [first.uptime_s, second.uptime_s]},
        )
        return
    rebooted = _rebooted(first, second)
    limits = {**R.DEFAULT_RATE_LIMITS}
    limits.update({n: RateLimit(r.per_hour("warn"), r.per_hour("fail"), "playbook") for n, r in want.rates.items()})
    old = {_key(g): g for g in first.gpus}
    new = {_key(g): g for g in second.gpus}
    judged = 0
    for key in list(new) + [k for k in old if k not in new]:
        if key not in old or key not in new:
            gpu = new.get(key) or old[key]
            when = "after" if key in new else "before"
            yield Verdict(
                Status.ERROR,
                f"{gpu.label} ({key}): seen only {when} the run's load: the GPU appeared or vanished during the run",
                gpu.label,
            )
            continue
        verdicts = list(_judge_gpu(old[key], new[key], second, window, rebooted, limits, want))
        judged += any(v.status is not Status.ERROR for v in verdicts)
        yield from verdicts
    if not judged and all(g.nvlinks == () for g in second.gpus):
        yield Verdict(Status.PASS, "no GPU lists an NVLink (PCIe GPUs): no NVLink counter to judge")


def _facts(text: str, which: str) -> GpuFacts | Verdict:
    try:
        return parse_gpu_probe(text)
    except ParseError as e:
        return Verdict(Status.ERROR, f"cannot read the {which} GPU read: {e.reason}", excerpt=e.excerpt)


def _key(gpu: Gpu) -> str:
    return gpu.uuid or gpu.pci_bus_id or gpu.label


def _window(first: GpuFacts, second: GpuFacts) -> float | None:
    """Seconds between the reads by the node's uptime (a clock step cannot stretch it), else its clock."""
    for a, b in ((first.uptime_s, second.uptime_s), (first.clock, second.clock)):
        if a is not None and b is not None and b >= a:
            return max(b - a, 0.001)  # two reads in the same millisecond: no zero division
    return None


def _rebooted(first: GpuFacts, second: GpuFacts) -> bool:
    if first.boot_id and second.boot_id and first.boot_id != second.boot_id:
        return True
    return first.uptime_s is not None and second.uptime_s is not None and second.uptime_s < first.uptime_s


def _judge_gpu(
    old: Gpu, new: Gpu, facts: GpuFacts, window: float, rebooted: bool, limits: dict, want: NvlinkErrors
) -> Iterator[Verdict]:
    g = new.label
    source = "NVML" if facts.source == "nvml" else "nvidia-smi"
    if new.nvlinks is None or old.nvlinks is None:
        yield Verdict(Status.ERROR, f"{g}: NVLinks not reported by {source}: error counters not read", g)
        return
    if not new.nvlinks:
        return
    before = {link.link: link for link in old.nvlinks}
    links: dict[str, dict[str, int]] = {}
    totals: dict[str, int] = {}
    for link in new.nvlinks:
        if link.errors is not None:
            links[str(link.link)] = dict(link.errors)
            for name, value in link.errors:
                totals[name] = totals.get(name, 0) + value
    snapshot = {
        "source": facts.source,
        "clock": facts.clock,
        "uptime": facts.uptime_s,
        "boot_id": facts.boot_id,
        "counters": totals,  # summed over the GPU's links: what the sweep history keeps
        "links": links,
    }
    seen: dict = {"window_s": round(window, 1), "snapshot": snapshot}
    unread, partial, reset_links, bad = [], [], [], []
    compared = 0
    for link in new.nvlinks:
        was = before.get(link.link)
        if link.errors is None or was is None or was.errors is None:
            if link.active is not False:
                unread.append(link.link)
            continue
        a, b = dict(was.errors), dict(link.errors)
        missing = [n for n in R.REQUIRED if n not in a or n not in b]
        if missing:
            partial.append(f"{link.link} ({', '.join(missing)})")
        reset = rebooted or any(b[n] < a[n] for n in b if n in a)
        if reset:
            reset_links.append(link.link)
        for f in R.judge_link(a, b, window, reset=reset, limits=limits, min_window_s=want.min_window_s):
            compared += 1
            if f.status != "pass":
                bad.append((link.link, f))
    for number, f in bad:
        yield Verdict(
            Status(f.status),
            f"{g} link {number}: {f.message} ({R.COUNTERS[f.counter].words})",
            g,
            {
                "link": number,
                "counter": f.counter,
                "increase": f.increase,
                "per_hour": f.per_hour,
                "window_s": round(window, 1),
                "snapshot": snapshot,
            },
            {"limit_per_hour": f.limit_per_hour} if f.limit_per_hour is not None else {},
        )
    if unread:
        # counters not read are not zero; all unread is an ERROR, some a WARN next to what was judged
        status = Status.ERROR if not compared else Status.WARN
        yield Verdict(
            status,
            f"{g}: NVLink error counters not read ({source}) on link {', '.join(map(str, unread))}",
            g,
            {"unread_links": unread, **seen},
        )
    if partial:
        yield Verdict(
            Status.WARN,
            f"{g}: counters not reported by {source} on link {'; '.join(partial)}: not judged there",
            g,
            {"partial": partial, **seen},
        )
    if reset_links:
        why = "the node rebooted" if rebooted else "a counter went down: reset (GPU reset, nvidia-smi nvlink -r)"
        yield Verdict(
            Status.WARN,
            f"{g}: NVLink counters were reset during the {window:.1f} s window on link "
            f"{', '.join(map(str, reset_links))} ({why}); increases counted from the reset, lower bounds",
            g,
            seen,
        )
    if not bad and compared:
        links_judged = len(new.nvlinks) - len(unread)
        yield Verdict(
            Status.PASS,
            f"{g}: no NVLink error counter rose in {window:.1f} s on {links_judged} links ({source})",
            g,
            seen,
        )

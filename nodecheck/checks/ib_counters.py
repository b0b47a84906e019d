"""ib.counters: IB port error counters judged on their increase over the run's window.

The counters are read twice: with the other probes, and again after the active checks (pair tests
load the links in between). Only the increase is judged (judging/counter_rules.py: a link down or buffer overrun
fails on any increase, bit-error counters by rate, congestion is reported); an absolute value fails
only where the playbook sets max_absolute, since PAM4 links always show some bit errors.
The second read is kept in the report (observed.snapshot), so a later sweep can start from it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nodecheck.checks.params import DeviceName
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe, Status, Verdict, excerpt
from nodecheck.core.registry import Captures, check
from nodecheck.judging import counter_rules as C
from nodecheck.parsers.perfquery import PortCounters, counters_from_sysfs, parse_perfquery
from nodecheck.parsers.sections import Sections, split_sections
from nodecheck.parsers.sysfs import SHELL_FUNCTION, parse_sysfs_dump

# Per port: perfquery -x (64-bit counters; the error counters too where the HCA has
# AdditionalPortCountersExtended), basic perfquery when -x has no error counters, and the sysfs
# counters always (cheap: no fork per file). Ethernet (RoCE) ports have no PMA: sysfs only.
_SCRIPT = (
    SHELL_FUNCTION
    + r"""
echo "@@nodecheck clock $(date +%s.%N)"
IFS=' ' read -r up _ < /proc/uptime 2>/dev/null && echo "@@nodecheck uptime $up"
IFS= read -r boot < /proc/sys/kernel/random/boot_id 2>/dev/null && echo "@@nodecheck boot_id $boot"
found=0
for p in /sys/class/infiniband/*/ports/*; do
  [ -d "$p" ] || continue
  found=1
  ca=${p%/ports/*}; ca=${ca##*/}; port=${p##*/}
  IFS= read -r layer < "$p/link_layer" 2>/dev/null || layer=
  echo "@@nodecheck port $ca $port $layer"
  if [ "$layer" != Ethernet ] && command -v perfquery >/dev/null 2>&1; then
    out=$(perfquery -x -C "$ca" -P "$port" 2>&1); rc=$?
    printf '@@nodecheck begin x:%s:%s\n%s\n@@nodecheck end x:%s:%s rc=%s\n' "$ca" "$port" "$out" "$ca" "$port" "$rc"
    case "$out" in *SymbolErrorCounter*) ;; *)
      out=$(perfquery -C "$ca" -P "$port" 2>&1); rc=$?
      printf '@@nodecheck begin basic:%s:%s\n%s\n@@nodecheck end basic:%s:%s rc=%s\n' "$ca" "$port" "$out" "$ca" "$port" "$rc";;
    esac
  fi
  echo "@@nodecheck begin sysfs:$ca:$port"
  sysfs_dump "$p"/counters/*
  echo "@@nodecheck end sysfs:$ca:$port rc=0"
done
if [ "$found" = 0 ]; then
  echo "@@nodecheck port - - "
  out=$(perfquery -x 2>&1); rc=$?
  printf '@@nodecheck begin x:-:-\n%s\n@@nodecheck end x:-:- rc=%s\n' "$out" "$rc"
  case "$out" in *SymbolErrorCounter*) ;; *)
    out=$(perfquery 2>&1); rc=$?
    printf '@@nodecheck begin basic:-:-\n%s\n@@nodecheck end basic:-:- rc=%s\n' "$out" "$rc";;
  esac
fi
"""  # noqa: E501 - shell script text: wrapping its long lines would change the script
)
COUNTERS_BEFORE = Probe("ib_counters", ("sh", "-c", _SCRIPT), timeout_s=30)
COUNTERS_AFTER = Probe("ib_counters.after", ("sh", "-c", _SCRIPT), timeout_s=30)
_PORT = re.compile(r"^@@nodecheck port (\S+) (\S+) ?(.*)$", re.M)


class RatePerHour(BaseModel):
    """Limits for one rate counter, per hour or per second (not both for one bound)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    warn_per_hour: float | None = Field(None, ge=0, allow_inf_nan=False)
    fail_per_hour: float | None = Field(None, ge=0, allow_inf_nan=False)
    warn_per_second: float | None = Field(None, ge=0, allow_inf_nan=False)
    fail_per_second: float | None = Field(None, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_unit(self) -> RatePerHour:
        for bound in ("warn", "fail"):
            if getattr(self, f"{bound}_per_hour") is not None and getattr(self, f"{bound}_per_second") is not None:
                raise ValueError(f"give {bound}_per_hour or {bound}_per_second, not both")
        return self

    def per_hour(self, bound: str) -> float | None:
        hour, second = getattr(self, f"{bound}_per_hour"), getattr(self, f"{bound}_per_second")
        return hour if hour is not None else (None if second is None else second * 3600)


class IbCounters(BaseModel):
    """Which ports are judged and the limits for rate counters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    devices: list[DeviceName] | None = Field(None, min_length=1, description="CAs to judge; unset: every CA")
    link_layer: Literal["InfiniBand", "Ethernet", "any"] = Field(
        "InfiniBand", description="which ports are judged (Ethernet = RoCE, from sysfs only)"
    )
    rates: dict[str, RatePerHour] = Field(
        {},
        description="per rate counter {warn_per_hour, fail_per_hour} (or _per_second), over the defaults "
        "(SymbolErrorCounter, LinkErrorRecoveryCounter, PortRcvErrors, PortXmitDiscards, "
        "PortRcvRemotePhysicalErrors)",
    )
    min_window_s: float = Field(
        C.DEFAULT_MIN_WINDOW_S,
        gt=0,
        le=86400,
        allow_inf_nan=False,
        description="a rate counter that rose over a shorter window warns instead of being rated",
    )
    max_absolute: dict[str, int] = Field(
        {},
        description="fail when a counter's value exceeds this, whatever the window (default none: "
        "absolute values alone never fail)",
    )

    @field_validator("rates")
    @classmethod
    def _rated(cls, value: dict) -> dict:
        for name in value:
            if C.COUNTERS.get(name) is None or C.COUNTERS[name].kind != C.RATE:
                raise ValueError(
                    f"{name!r} is not a rate counter; one of "
                    + ", ".join(n for n, i in C.COUNTERS.items() if i.kind == C.RATE)
                )
        return value

    @field_validator("max_absolute")
    @classmethod
    def _known(cls, value: dict) -> dict:
        for name, n in value.items():
            if name not in C.COUNTERS or C.COUNTERS[name].kind == C.CONGESTION:
                raise ValueError(f"{name!r}: not a judged counter (PortXmitWait is congestion, never judged)")
            if n < 0:
                raise ValueError(f"{name}: must be >= 0")
        return value


@check("ib.counters", probes=[COUNTERS_BEFORE], after=[COUNTERS_AFTER], params=IbCounters)
def counters(out: Captures, want: IbCounters) -> Iterator[Verdict]:
    """IB error counters did not rise over the run: a link down or buffer overrun fails, bit errors
    by rate; congestion (PortXmitWait) is reported, not judged."""
    first, second = out[COUNTERS_BEFORE.name].stdout, out[COUNTERS_AFTER.name].stdout
    before, after = split_sections(first, "ib_counters"), split_sections(second, "ib_counters")
    window = _window(before, after)
    # every port either read saw: one that vanished during the run is not silently dropped
    first_ports, second_ports = _ports(first), _ports(second)
    ports = {**second_ports, **{k: v for k, v in first_ports.items() if k not in second_ports}}
    judged = [
        (ca, port)
        for (ca, port), layer in ports.items()
        if (want.devices is None or ca in want.devices or ca == "-")
        and (want.link_layer == "any" or layer in (want.link_layer, ""))
    ]
    for name in want.devices or ():
        if not any(ca == name for ca, _ in ports):
            yield Verdict(
                Status.ERROR,
                f"{name}: no such CA in /sys/class/infiniband (listed in devices)",
                name,
                {"cas": sorted({ca for ca, _ in ports})},
            )
    if not judged:
        if not want.devices:
            yield Verdict(Status.ERROR, "no IB port to read counters from", excerpt=excerpt(second))
        return
    limits = {name: C.RateLimit(r.per_hour("warn"), r.per_hour("fail"), "playbook") for name, r in want.rates.items()}
    for ca, port in judged:
        if (ca, port) not in first_ports or (ca, port) not in second_ports:
            when = "before" if (ca, port) in first_ports else "after"
            yield Verdict(
                Status.ERROR,
                f"{ca}/{port}: present only {when} the run's load: the port appeared or vanished during the run",
                f"{ca}/{port}",
            )
            continue
        yield from _judge_port(ca, port, before, after, window, limits, want, _rebooted(before, after))


def _ports(text: str) -> dict[tuple[str, str], str]:
    return {(ca, port): layer for ca, port, layer in _PORT.findall(text)}


def _rebooted(before: Sections, after: Sections) -> bool:
    """Another boot between the reads: a new boot id, or an uptime that went down."""
    ids = before.facts.get("boot_id"), after.facts.get("boot_id")
    if all(ids) and ids[0] != ids[1]:
        return True
    try:
        return float(after.facts["uptime"]) < float(before.facts["uptime"])
    except (KeyError, ValueError):
        return False


def _window(before: Sections, after: Sections) -> float:
    """Seconds between the two reads by the node's uptime (a clock step cannot stretch it), else
    by its wall clock (no /proc/uptime, or a reboot in between)."""
    for key in ("uptime", "clock"):
        try:
            window = float(after.facts[key]) - float(before.facts[key])
        except (KeyError, ValueError):
            continue
        if window >= 0:
            return max(window, 0.001)  # two reads in the same millisecond: no zero division
    raise ParseError("ib_counters", "no usable node clock in the counter reads", "")


JUDGED = tuple(n for n, info in C.COUNTERS.items() if info.kind in (C.FAIL_ON_INCREASE, C.RATE))


def _judge_port(
    ca: str, port: str, before: Sections, after: Sections, window: float, limits: dict, want: IbCounters, rebooted: bool
) -> Iterator[Verdict]:
    where = f"{ca}/{port}" if ca != "-" else "local port"
    try:
        old, new, source = port_reads(ca, port, before, after)
    except ParseError as e:
        yield Verdict(Status.ERROR, f"{where}: cannot read counters: {e.reason}", where, excerpt=e.excerpt)
        return
    deltas = C.delta(old, new, window, reset=rebooted)
    findings = C.judge_deltas(deltas, limits, min_window_s=want.min_window_s, max_absolute=want.max_absolute)
    snapshot = {
        "source": source,
        "clock": after.facts.get("clock"),
        "uptime": after.facts.get("uptime"),
        "boot_id": after.facts.get("boot_id"),
        "counters": dict(new.counters),
    }
    seen = {"window_s": round(window, 1), "snapshot": snapshot}
    bad = [f for f in findings if f.status != "pass"]
    for f in bad:
        yield Verdict(
            Status(f.status),
            f"{where}: {f.message}",
            where,
            {
                "counter": f.counter,
                "increase": f.increase,
                "window_s": round(window, 1),
                "per_hour": f.per_hour,
                "value": f.value,
                "snapshot": snapshot,
            },
            {"limit_per_hour": f.limit_per_hour} if f.limit_per_hour is not None else {},
            excerpt(new.raw, 1200),
        )
    compared = [n for n in JUDGED if n in old.counters and n in new.counters]
    unread = [n for n in JUDGED if n not in old.counters and n not in new.counters]
    if unread:  # not in either read (no PMA, output cut): not zero
        status = Status.ERROR if not compared else Status.WARN
        yield Verdict(
            status,
            f"{where}: not read ({source}): {', '.join(unread)}",
            where,
            {"unread": unread, **seen},
            excerpt=excerpt(new.raw, 1200),
        )
    if any(d.state == "reset" for d in deltas):
        why = "the node rebooted" if rebooted else "a counter went down: cleared (perfquery -R) or reset"
        yield Verdict(
            Status.WARN,
            f"{where}: counters were reset during the {window:.1f} s window ({why}); "
            "increases are counted from the reset, lower bounds",
            where,
            seen,
        )
    if not bad and compared:
        notes = [f.message for f in findings if f.kind == C.CONGESTION]
        yield Verdict(
            Status.PASS,
            f"{where}: no error counter rose in {window:.1f} s ({source})" + (f"; {'; '.join(notes)}" if notes else ""),
            where,
            seen,
        )


def port_reads(ca: str, port: str, before: Sections, after: Sections) -> tuple[PortCounters, PortCounters, str]:
    """The two reads of one port from the same source: perfquery -x with error counters, basic
    perfquery, then sysfs; ParseError when no source was read twice. (report.html's every-port
    table pairs them the same way.)"""
    problems = []
    for kind, label in (("x", "perfquery -x"), ("basic", "perfquery"), ("sysfs", "sysfs counters")):
        reads = [_read(s, kind, ca, port) for s in (before, after)]
        first, second = reads
        if isinstance(first, PortCounters) and isinstance(second, PortCounters):
            if kind == "x" and "SymbolErrorCounter" not in second.counters:
                continue  # -x without error counters: the basic read has them
            return first, second, label
        problems += [r for r in reads if isinstance(r, str)]
    raise ParseError("ib_counters", "; ".join(dict.fromkeys(problems)) or "no counter source was read", after.preamble)


def _read(sections: Sections, kind: str, ca: str, port: str) -> PortCounters | str | None:
    section = sections.get(f"{kind}:{ca}:{port}")
    if section is None:
        return None
    try:
        if kind == "sysfs":
            found = counters_from_sysfs(parse_sysfs_dump(section.text, "sysfs"))
        else:
            found = parse_perfquery(section.text, None if ca == "-" else ca)
    except ParseError as e:
        return f"{kind}: {e.reason}"
    mine = [p for p in found if port == "-" or p.port == int(port)]
    if len(mine) != 1:
        return f"{kind}: port {port} not in the output"
    return mine[0]

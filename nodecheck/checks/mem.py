"""The node's memory: total (a missing DIMM), available, hugepages, swap, and ECC errors from EDAC."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status, Verdict, excerpt
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Ceiling, Exact, Floor, fmt
from nodecheck.parsers.edac import TOOL as EDAC_TOOL
from nodecheck.parsers.edac import Controller, Edac, Module, parse_edac
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.meminfo import KIB_PER_GIB, TOOL, MemInfo, parse_meminfo
from nodecheck.parsers.sections import Sections
from nodecheck.parsers.uptime import parse_uptime
from nodecheck.probes.memory import MEMORY, memory_sections
from nodecheck.probes.versions import ok_text

DAY_S = 86400.0
_WALKED = re.compile(r"files=(\d{1,9})", re.ASCII)  # the probe's end-of-walk line


def yaml_on_off(value: Any) -> Any:
    # YAML 1.1 reads a bare `on`/`off` as true/false: `swap: off` must mean "off", not a type error
    if value is True:
        return "on"
    if value is False:
        return "off"
    return value


class MemParams(BaseModel):
    """What mem expects of a node's memory; every unset expectation is reported, not judged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    total_gib: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="expected MemTotal in GiB as a healthy node of this model reports it (not the DIMM sum: "
        "firmware and kernel keep 1-2 %; a DGX H100 with 2 TiB of DIMMs reports ~2015 GiB)",
    )
    total_tolerance_pct: float = Field(
        1.5,
        ge=0,
        le=50,
        allow_inf_nan=False,
        # one DIMM of 32 is 3.1 % of the total, of 16 is 6.25 %: 1.5 % catches one of 32 and lets the
        # kernel's own reservations (crashkernel, a driver version) move MemTotal by a few GiB
        description="how far MemTotal may be from total_gib, in percent, either way (one DIMM of 32 is 3.1 %)",
    )
    total_floor_gib: Floor | None = Field(None, description="MemTotal in GiB as a band, instead of or with total_gib")
    # 10 %: the node_exporter mixin's NodeMemoryHighUtilization alert fires above 90 % used; 5 % left
    # before a job starts means a leftover process holds the node
    available_pct: Floor | None = Field(
        Floor(fail_below=5, warn_below=10),
        description="MemAvailable as a percent of the memory outside the hugepage pool; null: not judged",
    )
    available_gib: Floor | None = Field(None, description="MemAvailable in GiB")
    hugepages_total: int | None = Field(
        None, ge=0, strict=True, description="HugePages_Total (default-size pages) must be exactly this"
    )
    hugepages_free: Floor | None = Field(None, description="HugePages_Free, in pages")
    hugepage_size_kb: int | None = Field(
        None, gt=0, strict=True, description="Hugepagesize in kB (2048, or 1048576 for 1 GiB pages)"
    )
    swap: Annotated[Literal["on", "off", "any"], BeforeValidator(yaml_on_off)] = Field(
        "any", description="on: swap must be configured; off: SwapTotal must be 0; any: reported"
    )
    ecc: Annotated[Literal["required", "if_present", "off"], BeforeValidator(yaml_on_off)] = Field(
        "if_present",
        description="EDAC memory error counters: required (no EDAC driver warns), if_present (without EDAC: "
        "SKIPPED, not judged) or off (not read)",
    )
    # mcelog.conf's defaults (andikleen/mcelog): [dimm] ce-error-threshold = 10 / 24h ("reasonable for
    # server quality DIMMs") and [socket] mem-ce-error-threshold = 100 / 24h
    ce_per_day: Ceiling = Field(
        Ceiling(fail_above=100, warn_above=10),
        description="corrected ECC errors per DIMM (per controller without DIMM counters) per day, since boot "
        "or the counters' reset; a window shorter than a day counts as a day",
    )
    dimms: int | None = Field(
        None, ge=1, strict=True, description="DIMMs EDAC must list with a size (32 on a DGX H100); unset: reported"
    )


@check("mem", probes=[MEMORY], params=MemParams)
def mem(out: Captures, want: MemParams) -> Iterator[Verdict]:
    """Memory: MemTotal within tolerance of the expected (a missing DIMM), MemAvailable, hugepages and
    swap as configured, and ECC errors from the EDAC counters: any uncorrectable error fails naming the
    DIMM, corrected errors are judged as a rate per day."""
    sections = memory_sections(out)
    info = parse_meminfo(ok_text(sections, "meminfo", TOOL))
    yield from _total(info, want)
    yield from _available(info, want)
    yield from _hugepages(info, want)
    yield from _swap(info, want)
    corrupted = info.get("HardwareCorrupted")
    if corrupted:  # kB of pages the kernel took out of use after uncorrectable errors
        yield Verdict(
            Status.WARN,
            f"HardwareCorrupted {corrupted} kB: pages poisoned by memory errors, expected 0",
            "HardwareCorrupted",
            {"hardware_corrupted_kb": corrupted},
            {"hardware_corrupted_kb": 0},
        )
    if want.ecc != "off":
        try:
            yield from _ecc(sections, want)
        except ParseError as e:  # the memory verdicts above still stand
            yield Verdict(Status.ERROR, f"cannot read {e.tool} output: {e.reason}", "ECC", excerpt=e.excerpt)


def _gib(kb: int) -> float:
    return round(kb / KIB_PER_GIB, 1)


def _total(info: MemInfo, want: MemParams) -> Iterator[Verdict]:
    total = _gib(info.total_kb)
    observed = {"mem_total_gib": total, "mem_total_kb": info.total_kb}
    if want.total_gib is not None:
        off = (info.total_kb / KIB_PER_GIB - want.total_gib) / want.total_gib * 100
        expected = {"mem_total_gib": want.total_gib, "tolerance_pct": want.total_tolerance_pct}
        band = f"{fmt(want.total_gib)} GiB ± {fmt(want.total_tolerance_pct)}%"
        if abs(off) > want.total_tolerance_pct:
            why = " (one DIMM of 32 is -3.1%, of 16 -6.25%)" if off < 0 else " (more than this model has)"
            yield Verdict(
                Status.FAIL,
                f"MemTotal {fmt(total)} GiB ({off:+.1f}%), expected {band}{why}",
                "MemTotal",
                observed,
                expected,
            )
        else:
            yield Verdict(Status.PASS, f"MemTotal {fmt(total)} GiB ({band})", "MemTotal", observed, expected)
    if want.total_floor_gib is not None:
        yield want.total_floor_gib.judge(total, what="MemTotal", unit="GiB", subject="MemTotal")
    if want.total_gib is None and want.total_floor_gib is None:
        yield Verdict(Status.PASS, f"MemTotal {fmt(total)} GiB (no expected total: not judged)", "MemTotal", observed)


def _available(info: MemInfo, want: MemParams) -> Iterator[Verdict]:
    if want.available_pct is None and want.available_gib is None:
        return
    available = info.available_kb
    how = ""
    if available is None:  # kernels before 3.14: the kernel's own estimate is missing, this is a rougher one
        available = sum(info.get(k) or 0 for k in ("MemFree", "Buffers", "Cached"))
        how = ", estimated as MemFree+Buffers+Cached (no MemAvailable before Linux 3.14)"
    usable = info.total_kb - info.hugetlb_kb
    pool = f" outside the {fmt(_gib(info.hugetlb_kb))} GiB hugepage pool" if info.hugetlb_kb else ""
    if want.available_pct is not None:
        if usable <= 0:
            yield Verdict(Status.ERROR, f"hugepage pool {_gib(info.hugetlb_kb)} GiB >= MemTotal", "MemAvailable")
        else:
            pct = round(available / usable * 100, 1)
            verdict = want.available_pct.judge(pct, what="MemAvailable", unit="%", subject="MemAvailable")
            detail = f" ({fmt(_gib(available))} of {fmt(_gib(usable))} GiB{pool}{how})"
            yield replace(verdict, message=verdict.message + detail, observed={**verdict.observed, "kb": available})
    if want.available_gib is not None:
        verdict = want.available_gib.judge(_gib(available), what="MemAvailable", unit="GiB", subject="MemAvailable")
        yield replace(verdict, message=verdict.message + how)


def _hugepages(info: MemInfo, want: MemParams) -> Iterator[Verdict]:
    asked = (
        ("HugePages_Total", want.hugepages_total, "pages"),
        ("Hugepagesize", want.hugepage_size_kb, "kB"),
    )
    for field, expected, unit in asked:
        if expected is None:
            continue
        value = info.get(field)
        if value is None:
            yield Verdict(Status.ERROR, f"no {field} in /proc/meminfo (no hugetlbfs in this kernel)", field)
        else:
            yield Exact(value=expected).judge(value, what=field, unit=unit, subject=field)
    if want.hugepages_free is not None:
        free = info.get("HugePages_Free")
        if free is None:
            yield Verdict(Status.ERROR, "no HugePages_Free in /proc/meminfo (no hugetlbfs in this kernel)", "HugePages")
        else:
            yield want.hugepages_free.judge(free, what="HugePages_Free", unit="pages", subject="HugePages_Free")


def _swap(info: MemInfo, want: MemParams) -> Iterator[Verdict]:
    total, free = info.get("SwapTotal"), info.get("SwapFree")
    if total is None:
        if want.swap != "any":
            yield Verdict(Status.ERROR, "no SwapTotal in /proc/meminfo", "swap")
        return
    used = total - (free if free is not None else total)
    state = f"swap on: {fmt(_gib(total))} GiB, {fmt(_gib(used))} GiB used" if total else "swap off (SwapTotal 0)"
    observed = {"swap_total_kb": total, "swap_used_kb": used}
    if want.swap == "any":
        yield Verdict(Status.PASS, f"{state} (not judged)", "swap", observed)
    elif (total > 0) == (want.swap == "on"):
        yield Verdict(Status.PASS, state, "swap", observed, {"swap": want.swap})
    else:
        yield Verdict(Status.FAIL, f"{state}, expected swap {want.swap}", "swap", observed, {"swap": want.swap})


def _ecc(sections: Sections, want: MemParams) -> Iterator[Verdict]:
    if sections.facts.get("edac") == "absent" or sections.get("edac") is None:
        yield _not_loaded("EDAC not loaded (no /sys/devices/system/edac/mc)", want)
        return
    text = ok_text(sections, "edac", EDAC_TOOL)
    if whole := _not_whole(text, sections.facts.get("edac-walked")):
        yield Verdict(Status.ERROR, whole, "ECC", excerpt=excerpt(text))
        return
    edac = parse_edac(text)
    if not edac.controllers:
        yield _not_loaded("EDAC loaded but no memory controller registered (no EDAC driver for this platform)", want)
        return
    if (cut := sections.facts.get("edac-truncated")) is not None:
        yield Verdict(Status.ERROR, f"EDAC listing stopped early ({cut}): the rest was not read", "ECC")
    if edac.unreadable:
        paths = ", ".join(f"{p} ({why})" for p, why in edac.unreadable[:5])
        more = f" and {len(edac.unreadable) - 5} more" if len(edac.unreadable) > 5 else ""
        yield Verdict(Status.ERROR, f"EDAC files not read: {paths}{more}", "ECC")
    uptime_s = parse_uptime(ok_text(sections, "uptime", "/proc/uptime"))
    bad = [*_uncorrectable(edac), *_corrected(edac, uptime_s, want)]
    yield from bad
    yield from _dimm_count(edac, want)
    if not any(v.status is not Status.PASS for v in bad):
        yield _ecc_summary(edac, uptime_s, want)


def _not_whole(text: str, walked: str | None) -> str | None:
    """Why the EDAC listing is not the one the probe's walk printed (its line count), or None."""
    match = _WALKED.fullmatch(walked or "")
    if match is None:
        return "EDAC listing without the probe's end-of-walk line: not known to be whole; ECC errors not judged"
    arrived = len(split_lines(text))
    if arrived != int(match.group(1)):
        listed = match.group(1)
        return f"EDAC listing incomplete: the probe listed {listed} files, {arrived} arrived: ECC errors not judged"
    return None


def _not_loaded(why: str, want: MemParams) -> Verdict:
    if want.ecc == "required":
        return Verdict(Status.WARN, f"{why}: ECC errors not checked, expected EDAC (ecc: required)", "ECC")
    # not judged is not a pass: a node whose ECC errors nobody read must not read "all passed"
    return Verdict(
        Status.SKIPPED, f"{why}: ECC errors not checked (ecc: off where this platform has no EDAC driver)", "ECC"
    )


def _uncorrectable(edac: Edac) -> Iterator[Verdict]:
    for c in edac.controllers:
        on_modules = [m for m in c.modules if m.ue]
        for m in on_modules:
            yield Verdict(
                Status.FAIL,
                f"{m.ue} uncorrectable memory error(s) on DIMM {m.name} of {c.title}, expected 0",
                m.name,
                {"ue_count": m.ue, "controller": c.title},
                {"ue_count": 0},
            )
        unplaced = max((c.ue or 0) - sum(m.ue or 0 for m in on_modules), 0) + (c.ue_noinfo or 0)
        if unplaced:
            yield Verdict(
                Status.FAIL,
                f"{unplaced} uncorrectable memory error(s) on {c.title} (no DIMM named), expected 0",
                c.title,
                {"ue_count": c.ue, "ue_noinfo_count": c.ue_noinfo},
                {"ue_count": 0},
            )


def _window_s(c: Controller, uptime_s: float) -> float:
    """Seconds the counters cover: since boot, or since they were reset (seconds_since_reset)."""
    if c.seconds_since_reset is not None and c.seconds_since_reset < uptime_s:
        return float(c.seconds_since_reset)
    return uptime_s


def _corrected(edac: Edac, uptime_s: float, want: MemParams) -> Iterator[Verdict]:
    for c in edac.controllers:
        window = _window_s(c, uptime_s)
        days = max(window, DAY_S) / DAY_S  # one corrected error minutes after boot is not 100 a day
        counted: list[tuple[str, int]] = [(m.name, m.ce) for m in c.modules if m.ce is not None]
        if not counted and c.ce is not None:  # no per-DIMM counters: the controller's
            counted = [(c.title, c.ce)]
        if c.ce_noinfo:
            counted.append((f"{c.title} (no DIMM named)", c.ce_noinfo))
        for name, count in counted:
            if not count:
                continue
            rate = round(count / days, 2)
            verdict = want.ce_per_day.judge(rate, what="corrected ECC errors", unit="per day", subject=name)
            if verdict.status is Status.PASS:
                continue
            yield replace(
                verdict,
                message=f"{name}: {count} corrected ECC errors in {window / 3600:.1f} h = "
                + verdict.message.removeprefix("corrected ECC errors "),
                observed={"ce_count": count, "window_h": round(window / 3600, 1), "ce_per_day": rate},
            )


def _dimm_count(edac: Edac, want: MemParams) -> Iterator[Verdict]:
    if want.dimms is None:
        return
    dimms = [m for m in edac.modules if m.kind == "dimm"]
    if not dimms:
        yield Verdict(
            Status.ERROR, "EDAC lists no dimmN directories (ranks or csrows only): DIMMs not counted", "DIMMs"
        )
        return
    populated = [m for m in dimms if m.size_mb is None or m.size_mb > 0]
    verdict = Exact(value=want.dimms).judge(len(populated), what="EDAC DIMMs", subject="DIMMs")
    if verdict.status is Status.FAIL:
        verdict = replace(verdict, excerpt=excerpt("\n".join(_module_line(m) for m in dimms)))
    yield verdict


def _module_line(m: Module) -> str:
    size = f"{m.size_mb} MB" if m.size_mb is not None else "size not read"
    return f"{m.name}: {size}"


def _ecc_summary(edac: Edac, uptime_s: float, want: MemParams) -> Verdict:
    dimms = len([m for m in edac.modules if m.kind != "csrow"])
    ce = sum(
        sum(m.ce or 0 for m in c.modules) if any(m.ce is not None for m in c.modules) else (c.ce or 0)
        for c in edac.controllers
    )
    ce += sum(c.ce_noinfo or 0 for c in edac.controllers)
    hours = min(_window_s(c, uptime_s) for c in edac.controllers) / 3600
    modules = f", {dimms} DIMMs/ranks" if dimms else ""
    limit = want.ce_per_day.warn_above if want.ce_per_day.warn_above is not None else want.ce_per_day.fail_above
    return Verdict(
        Status.PASS,
        f"ECC: {len(edac.controllers)} memory controllers{modules}: 0 uncorrectable, {ce} corrected in "
        f"{hours:.1f} h (<= {fmt(limit)} per DIMM per day)",
        "ECC",
        {"controllers": len(edac.controllers), "modules": dimms, "ue_count": 0, "ce_count": ce},
        {"ue_count": 0, "ce_per_day_max": limit},
    )

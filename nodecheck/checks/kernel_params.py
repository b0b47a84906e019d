"""kernel.params: sysctl values and kernel command-line options as the playbook expects them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status, Verdict, quote
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Ceiling, Floor, OneOf
from nodecheck.parsers.cmdline import Cmdline
from nodecheck.parsers.sysctl import KEY, path_of, shown
from nodecheck.probes.kernel_state import CMDLINE, read_cmdline, read_sysctls, sysctl_probe

# name[=value] without spaces or quotes: "iommu=pt", "intel_iommu=on", "nokaslr", "nouveau.modeset"
_OPTION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(=[^\s\"]*)?", re.ASCII)
_INTEGER = re.compile(r"-?\d+", re.ASCII)


def _key(key: str) -> str:
    if not KEY.fullmatch(key):
        raise ValueError(
            f"{key!r} is not a sysctl key like vm.max_map_count (dotted names of letters, digits, _ and -)"
        )
    return key


def _option(option: str) -> str:
    if not _OPTION.fullmatch(option):
        raise ValueError(f"{option!r} is not a kernel command-line option like iommu=pt or nokaslr")
    return option


SysctlKey = Annotated[str, AfterValidator(_key)]
Option = Annotated[str, AfterValidator(_option)]
# a value as `sysctl` shows it ("1", "4096 131072 6291456"), or a band on a single-number value
Expected = int | str | Floor | Ceiling | OneOf


class KernelParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sysctl: dict[SysctlKey, Expected] = Field(
        default_factory=dict,
        description="sysctl key -> expected value (compared as text, fields one space apart) or a band "
        "(fail_below / fail_above / values); a key the kernel does not have is an ERROR",
    )
    cmdline_present: list[Option] = Field(
        default_factory=list,
        description="kernel command-line options that must be there: name=value (the last occurrence "
        "counts, as for most parameters) or a bare name",
    )
    cmdline_absent: list[Option] = Field(
        default_factory=list,
        description="options that must not be there: name=value, or a bare name for any value",
    )


def probes(want: KernelParams):
    found = []
    if want.cmdline_present or want.cmdline_absent:
        found.append(CMDLINE)
    if want.sysctl:
        found.append(sysctl_probe(list(want.sysctl)))
    return found


@check("kernel.params", probes=probes, params=KernelParams)
def params(out: Captures, want: KernelParams) -> Iterator[Verdict]:
    """sysctl values (read from /proc/sys) and kernel command-line options (/proc/cmdline, split as
    the kernel splits it) are as the playbook expects: iommu=pt, vm.max_map_count, net.core.rmem_max.

    A sysctl key the kernel does not have is an ERROR naming it (a typo, or a module not loaded),
    never a pass; a value is compared as `sysctl` shows it, or against a band when it is one number.
    With nothing asked (no sysctl:, cmdline_present: or cmdline_absent:) the check is an ERROR saying so."""
    if not (want.sysctl or want.cmdline_present or want.cmdline_absent):
        yield Verdict(
            Status.ERROR, "nothing to judge: give sysctl:, cmdline_present: or cmdline_absent: in the playbook"
        )
        return
    if want.sysctl:
        values = read_sysctls(out, sysctl_probe(list(want.sysctl)), list(want.sysctl))
        for key, expected in want.sysctl.items():
            got = values[key]
            if got.text is None:
                yield Verdict(
                    Status.ERROR, f"{key}: cannot read {path_of(key)}: {got.why}", key, expected={key: _plain(expected)}
                )
                continue
            yield _sysctl(key, shown(got.text), expected)
    if want.cmdline_present or want.cmdline_absent:
        try:
            parsed = read_cmdline(out)
        except ParseError as e:
            yield Verdict(
                Status.ERROR, f"cannot read the kernel command line: {e.reason}", "cmdline", excerpt=e.excerpt
            )
            return
        for option in want.cmdline_present:
            yield _present(option, parsed)
        for option in want.cmdline_absent:
            yield _absent(option, parsed)


def _plain(expected: Expected) -> object:
    return expected.model_dump() if isinstance(expected, (Floor, Ceiling, OneOf)) else expected


def _sysctl(key: str, value: str, expected: Expected) -> Verdict:
    if isinstance(expected, (Floor, Ceiling, OneOf)):
        if not _INTEGER.fullmatch(value):
            return Verdict(
                Status.ERROR,
                f"{key} = {quote(value)}: not one number, so the band cannot judge it; give the value as text",
                key,
                {key: value},
                {key: _plain(expected)},
            )
        return _band(key, int(value), expected)
    want = shown(str(expected))
    if value == want:
        return Verdict(Status.PASS, f"{key} = {value}", key, {key: value}, {key: want})
    return Verdict(Status.FAIL, f"{key} = {value}, expected {want}", key, {key: value}, {key: want})


def _band(key: str, value: int, band: Floor | Ceiling | OneOf) -> Verdict:
    """A one-number sysctl against a band, its bounds written as the integers sysctl values are."""
    observed, expected = {key: value}, {key: _plain(band)}
    if isinstance(band, OneOf):
        allowed = ", ".join(_number(v) for v in band.values)
        if value in band.values:
            return Verdict(Status.PASS, f"{key} = {value} (one of {allowed})", key, observed, expected)
        return Verdict(Status.FAIL, f"{key} = {value}, expected one of {allowed}", key, observed, expected)
    if isinstance(band, Floor):
        fail, warn, sign = value < band.fail_below, band.warn_below is not None and value < band.warn_below, ">="
        bounds = (band.fail_below, band.warn_below)
    else:
        fail, warn, sign = value > band.fail_above, band.warn_above is not None and value > band.warn_above, "<="
        bounds = (band.fail_above, band.warn_above)
    if fail:
        return Verdict(Status.FAIL, f"{key} = {value}, expected {sign} {_number(bounds[0])}", key, observed, expected)
    if warn:
        return Verdict(Status.WARN, f"{key} = {value}, expected {sign} {_number(bounds[1])}", key, observed, expected)
    limit = bounds[1] if bounds[1] is not None else bounds[0]
    return Verdict(Status.PASS, f"{key} = {value} ({sign} {_number(limit)})", key, observed, expected)


def _number(value: object) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _split(option: str) -> tuple[str, str | None]:
    name, sep, value = option.partition("=")
    return name, (value if sep else None)


def _present(option: str, parsed: Cmdline) -> Verdict:
    name, value = _split(option)
    last = parsed.last(name)
    expected = {"present": option}
    if last is None:
        return Verdict(
            Status.FAIL, f"{option} not on the kernel command line, expected it there", name, {name: None}, expected
        )
    if value is not None and last.value != value:
        return Verdict(
            Status.FAIL,
            f"kernel command line has {last.text()}, expected {option}",
            name,
            {name: last.value},
            expected,
        )
    return Verdict(Status.PASS, f"{last.text()} on the kernel command line", name, {name: last.value}, expected)


def _absent(option: str, parsed: Cmdline) -> Verdict:
    name, value = _split(option)
    key = name.replace("-", "_")
    found = [p for p in parsed.params if p.key == key and (value is None or p.value == value)]
    expected = {"absent": option}
    if found:
        return Verdict(
            Status.FAIL,
            f"kernel command line has {found[-1].text()}, expected no {option}",
            name,
            {name: found[-1].value},
            expected,
        )
    return Verdict(Status.PASS, f"no {option} on the kernel command line", name, {name: None}, expected)

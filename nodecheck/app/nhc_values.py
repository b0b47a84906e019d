"""Values as NHC reads them: its getopts, sizes, counts, percentages, numbers and plain match
strings, each refused in the operator's words when NHC would not read it."""

from __future__ import annotations

import re

from nodecheck.app.nhc_model import KIB, Refused


def getopts(args: list[str], spec: str, check: str) -> tuple[list[tuple[str, str]], list[str]]:
    """bash getopts over `args` with NHC's option string (":0rE:F:..."): (options in order, operands)."""
    takes = {spec[i] for i in range(len(spec) - 1) if spec[i + 1] == ":" and spec[i] != ":"}
    known = set(spec.replace(":", ""))
    options: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        j = 1
        while j < len(arg):
            flag = arg[j]
            if flag not in known:
                raise Refused(f"{check}: -{flag} is not an option of {check} (NHC would fail the check)")
            if flag in takes:
                value = arg[j + 1 :]
                if not value:
                    i += 1
                    if i >= len(args):
                        raise Refused(f"{check}: -{flag} needs a value (NHC would fail the check)")
                    value = args[i]
                options.append((flag, value))
                break
            options.append((flag, ""))
            j += 1
        i += 1
    return options, args[i:]


_SIZE = re.compile(r"([0-9]+)([kKmMgGtTpPeE]?)[bB]?")
_UNITS = {"": 0, "k": 0, "m": 1, "g": 2, "t": 3, "p": 4, "e": 5}  # sizes count kB: k is the unit itself


def kib(value: str, check: str) -> int:
    """An NHC size (nhc_common_parse_size): a number of kB, or with a k/M/G/T/P/E suffix (powers of 1024)."""
    match = _SIZE.fullmatch(value)
    if not match:
        raise Refused(f"{check}: {value!r} is not a size NHC reads (a number of kB, or 32GB, 512m, ...)")
    return int(match.group(1)) * KIB ** _UNITS[match.group(2).lower()]


def percent(value: str) -> float | None:
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)%", value)
    return float(match.group(1)) if match else None


def number(value: str, check: str, what: str) -> float:
    if not re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", value):
        raise Refused(f"{check}: {what} {value!r} is not a number")
    return float(value)


def gib(kib_value: int) -> float:
    return round(kib_value / KIB**2, 3)


GLOB_CHARS = set("*?[")

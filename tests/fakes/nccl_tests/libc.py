"""The C library calls whose behaviour the programs' command lines depend on: getopt_long as glibc
does it (nccl-tests), strtol, and nccl-tests' parsesize."""

from __future__ import annotations

import re

from nccl_tests.state import write_err


def getopt_long(prog: str, args: list[str], shortopts: str, longopts: list[tuple[str, bool, str]]):
    """Yield (option char, value) in order; on an error glibc's message goes to stderr and '?' is
    yielded (nccl-tests then prints its usage). Non-options are skipped (glibc permutes them)."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return
        if a.startswith("--"):
            name, eq, val = a[2:].partition("=")
            cands = [lo for lo in longopts if lo[0] == name] or [lo for lo in longopts if lo[0].startswith(name)]
            if not cands:
                write_err(f"{prog}: unrecognized option '{a}'\n")
                yield "?", None
                return
            if len(cands) > 1:
                write_err(
                    f"{prog}: option '{a}' is ambiguous; possibilities:" + "".join(f" '--{c[0]}'" for c in cands) + "\n"
                )
                yield "?", None
                return
            lname, has_arg, ch = cands[0]
            if has_arg and not eq:
                if i + 1 >= len(args):
                    write_err(f"{prog}: option '--{lname}' requires an argument\n")
                    yield "?", None
                    return
                i, val = i + 1, args[i + 1]
            elif not has_arg and eq:
                write_err(f"{prog}: option '--{lname}' doesn't allow an argument\n")
                yield "?", None
                return
            yield ch, (val if has_arg else None)
        elif a.startswith("-") and a != "-":
            j = 1
            while j < len(a):
                c = a[j]
                k = shortopts.find(c)
                if k < 0 or c == ":":
                    write_err(f"{prog}: invalid option -- '{c}'\n")
                    yield "?", None
                    return
                if shortopts[k + 1 : k + 2] == ":":
                    if j + 1 < len(a):
                        val = a[j + 1 :]
                    elif i + 1 < len(args):
                        i, val = i + 1, args[i + 1]
                    else:
                        write_err(f"{prog}: option requires an argument -- '{c}'\n")
                        yield "?", None
                        return
                    yield c, val
                    break
                yield c, None
                j += 1
        i += 1


def strtol(text: str) -> int:
    """C's strtol(s, NULL, 0): optional sign, 0x / 0 prefixes, stops at the first bad digit."""
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text)
    if not m:
        return 0
    digits = m.group(2)
    value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 8) if digits.startswith("0") else int(digits)
    return -value if m.group(1) == "-" else value


def parsesize(text: str) -> float:
    """common.cu parsesize: sscanf("%lf %1s"): a number, then K/M/G (binary); else -1."""
    m = re.match(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(\S?)", text)
    if not m:
        return -1.0
    units = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(m.group(2).lower())
    return -1.0 if units is None else float(m.group(1)) * units

"""What nvidia-smi's printed values mean, in every output form: its "no value" words, its failure lines,
PCI bus ids, values with units and two-valued words; and the checks every form's parser shares."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from nodecheck.core.errors import ParseError
from nodecheck.parsers.counts import TOO_BIG, U64_DIGITS, u64
from nodecheck.parsers.gpu import Gpu
from nodecheck.parsers.lines import split_lines

# nvidia-smi's words for "no value". Any other fully bracketed value ("[Insufficient Permissions]",
# "[GPU requires reset]", "[Not Found]") is also a status, never a reading, so it reads as None too.
_NOT_A_VALUE = frozenset(
    {
        "N/A",
        "[N/A]",
        "Not Supported",
        "[Not Supported]",
        "Unknown Error",
        "[Unknown Error]",
        "Requested functionality has been deprecated",
        "",
    }
)
# Whole-output failures: nvidia-smi printed this instead of (or in the middle of) what was asked.
_FAILURES = re.compile(
    r"Failed to initialize NVML: .*|NVIDIA-SMI has failed because .*|No devices were found"
    r"|Unable to determine the number of GPUs|Unable to determine the device handle for .*"
    r"|Field \".*\" is not a valid field to query\."
)
# PCI bus id as nvidia-smi prints it: an 8-digit domain ("00000000:9B:00.0"), older tools 4 digits.
_BUS_ID = re.compile(r"([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])", re.ASCII)
INTEGER = re.compile(r"\d+", re.ASCII)
# a value read with its unit: "35 C", "745 MiB", "250.00 W", "16x", "95 %" (nvidia-smi puts a space,
# except "16x"); CSV without `nounits` carries the same units
WITH_UNIT = re.compile(r"(-?\d+(?:\.\d+)?) ?(?:MiB|W|C|%|MHz|x|bank\(s\))?", re.ASCII)


def available(value: str | None) -> str | None:
    """The printed value, or None for nvidia-smi's "not available" words."""
    if value is None:
        return None
    value = value.strip()
    if value in _NOT_A_VALUE or (value.startswith("[") and value.endswith("]")):
        return None
    return value


def check_failure(tool: str, text: str) -> None:
    """Raise ParseError on nvidia-smi's own failure lines ("Failed to initialize NVML: ...")."""
    for line in split_lines(text):
        if _FAILURES.fullmatch(line.strip()):
            raise ParseError(tool, line.strip(), text)


def normalise_bus_id(value: str) -> str:
    """ "00000000:9B:00.0" → "0000:9b:00.0": nvidia-smi's 8-digit domain to sysfs's 4 digits, lower case."""
    match = _BUS_ID.fullmatch(value.strip())
    if not match:
        raise ValueError(f"not a PCI bus id: {value!r}")
    domain, bus, device, function = match.groups()
    return f"{domain[-4:]}:{bus}:{device}.{function}".lower()


def read_flag(value: str) -> bool:
    """nvidia-smi's two-valued words: Enabled/Disabled (modes), Yes/No (pending), Active/Not Active."""
    if value in ("Enabled", "Yes", "Active"):
        return True
    if value in ("Disabled", "No", "Not Active"):
        return False
    raise ValueError(value)


def read_float(value: str) -> float:
    match = WITH_UNIT.fullmatch(value.strip())
    if not match:
        raise ValueError(value)
    whole = match[1].lstrip("-").split(".")[0]
    if len(whole) > U64_DIGITS:  # 400 digits read as inf: a floor would pass it
        raise ValueError(f"a number of {len(whole)} digits (at most {U64_DIGITS})")
    return float(match[1])


def read_count(value: str) -> int:
    match = WITH_UNIT.fullmatch(value.strip())
    if not match or not INTEGER.fullmatch(match[1]):
        raise ValueError(value)
    number = u64(match[1])  # a 400-digit count is no count (float() of it overflows in a judge)
    if number is None:
        raise ValueError(f"{value[:40]!r} is not a count ({TOO_BIG})")
    return number


def expect_unique_indexes(tool: str, gpus: Sequence[Gpu], text: str) -> None:
    # one run never prints a GPU twice; two outputs run together would be judged twice
    expect_unique(tool, (f"GPU{gpu.index}" for gpu in gpus), text)


def expect_unique(tool: str, names: Iterable[str], text: str) -> None:
    """ParseError naming the first name seen twice (a set: a count() per name is quadratic)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ParseError(tool, f"{name} appears twice", text)
        seen.add(name)


def grouped(pairs: Iterable[tuple]) -> dict:
    """{key: [values in order]} from (key, value) pairs: one pass, not one scan per key."""
    groups: dict = {}
    for key, value in pairs:
        groups.setdefault(key, []).append(value)
    return groups

"""Property 2: no parser takes super-linear time. Each is timed on a pathological input of size n
and 4n, built from a real output it reads: a long run of spaces where a key meets its value (a lazy
group next to `\\s*`), the output's lines repeated (a `list.count` or duplicate scan per line), a
line of many short tokens, one long line with no separator. Linear time gives t(4n) ~ 4 t(n);
quadratic 16 t(n). The bound t(4n) < 8 t(n) + 0.5 s leaves room for a loaded 2-core machine, and
each time is the fastest of up to 3 runs."""

from __future__ import annotations

import re

import pytest

from nodecheck.core.errors import ParseError
from tests.fuzz.bounded import run_bounded
from tests.fuzz.targets import TARGETS, Target

N = 50_000  # characters: a quadratic parser's t(n) is then >= 0.1 s
SLACK_S = 0.5
FIRST_LIMIT_S = 5.0  # t(n) alone over this is not linear on 50 KB either


def _texts(target: Target) -> list[str]:
    """Every seed, as text: a failure line, a header or a table row each sit in some seed only."""
    return [s.decode("latin-1") if target.binary else s for s in target.seeds[:SEEDS]]


def _parse_each(target: Target):
    def parse(inputs) -> None:
        for data in inputs:
            try:
                target.parse(data)
            except ParseError:
                pass

    return parse


def _key_line(text: str) -> int:
    """The first line where a name meets a number (`Rate: 400`, `# nThread 1`, `0, 81559 MiB`)."""
    lines = text.split("\n")
    return next((i for i, line in enumerate(lines) if re.search(r"\S.*?\d", line)), 0)


def spaces_in_key_line(text: str, n: int) -> str:
    lines = text.split("\n")
    i = _key_line(text)
    line = lines[i]
    digit = re.search(r"\d", line)
    at = digit.start() if digit else len(line) // 2
    lines[i] = line[:at] + " " * n + line[at:]
    return "\n".join(lines)


def repeated_lines(text: str, n: int) -> str:
    lines = [line for line in text.split("\n") if line.strip()] or ["x"]
    out, size, i = [], 0, 0
    while size < n:
        out.append(lines[i % len(lines)])
        size += len(out[-1]) + 1
        i += 1
    return "\n".join(out) + "\n"


def repeated_key_line(text: str, n: int) -> str:
    """The key line again and again, after the output's first lines (a header it needs)."""
    lines = text.split("\n")
    i = _key_line(text)
    key = lines[i] + "\n"
    return "\n".join(lines[:i]) + "\n" + key * max(1, n // len(key)) + "\n".join(lines[i + 1 :])


def many_tokens(text: str, n: int) -> str:
    lines = text.split("\n")
    i = _key_line(text)
    lines.insert(i + 1, lines[i][:20] + " 1" * (n // 2))
    return "\n".join(lines)


def one_long_line(text: str, n: int) -> str:
    lines = text.split("\n")
    i = _key_line(text)
    lines[i] = lines[i][:40] + ("a:" * (n // 2))
    return "\n".join(lines)


def spaces_in_every_line(text: str, n: int) -> str:
    """n spaces shared out over every line, before its first digit: a per-line quadratic scan is
    still quadratic in n (k lines of n/k: n^2/k), wherever the line is that has it."""
    lines = text.split("\n")
    per = max(1, n // max(1, sum(1 for line in lines if line.strip())))
    for i, line in enumerate(lines):
        if line.strip():
            digit = re.search(r"\d", line)
            at = digit.start() if digit else len(line) // 2
            lines[i] = line[:at] + " " * per + line[at:]
    return "\n".join(lines)


# spaces_in_every_line covers a long run of spaces in any one line (spaces_in_key_line, kept for a
# local run, was redundant with it at twice the CI time, as was many_tokens with one_long_line)
PATHOLOGIES = (spaces_in_every_line, repeated_lines, repeated_key_line, one_long_line)
SEEDS = 8  # per target: the first 8 of its seeds (CI time)


@pytest.mark.parametrize("pathology", PATHOLOGIES, ids=[p.__name__ for p in PATHOLOGIES])
@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_time_grows_linearly(target: Target, pathology):
    seeds = _texts(target)
    small, large = [pathology(s, N) for s in seeds], [pathology(s, 4 * N) for s in seeds]
    if target.binary:
        small = [s.encode("latin-1", "replace") for s in small]
        large = [s.encode("latin-1", "replace") for s in large]
    parse = _parse_each(target)
    first = run_bounded(parse, small, FIRST_LIMIT_S, runs=3)
    assert not first.error, f"{target.name} (owner {target.owner}) on {pathology.__name__}: {first.error}"
    assert first.seconds is not None, (
        f"{target.name} (owner {target.owner}): over {FIRST_LIMIT_S} s on {N} characters a seed ({pathology.__name__})"
    )
    bound = 8 * first.seconds + SLACK_S
    # the wall-clock kill is generous (a loaded machine may give the child a fraction of a core):
    # what is judged is the CPU time the child reports against the bound
    second = run_bounded(parse, large, 10 * bound + 10, runs=3, enough_s=bound)
    assert second.seconds is not None and second.seconds < bound, (
        f"{target.name} (owner {target.owner}) on {pathology.__name__}: t(n={N}) = "
        f"{first.seconds:.3f} s, t(4n) = {'killed' if second.seconds is None else f'{second.seconds:.3f} s'}, "
        f"bound {bound:.2f} s: super-linear"
    )

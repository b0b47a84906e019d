"""Property 1: a parser given a mutated real output, or no output of its tool at all, returns facts
or raises ParseError (the runner's ERROR); nothing else. Any other exception reaches the runner as an
"internal error", loses the parser's reason and, outside a judge, a whole command's report."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodecheck.core.errors import ParseError
from tests.fuzz.bounded import run_bounded
from tests.fuzz.mutations import FUZZ, mutated, wholly_odd
from tests.fuzz.targets import TARGETS, Target

IDS = [t.name for t in TARGETS]
TEN_MB = 10 * 1024 * 1024


def parses_or_refuses(target: Target, data) -> None:
    try:
        target.parse(data)
    except ParseError:
        pass
    except Exception as e:
        shown = repr(data) if len(data) <= 3000 else f"{data[:3000]!r}… ({len(data)} long)"
        raise AssertionError(
            f"{target.name} (owner {target.owner}) raised {type(e).__name__}: {e}\ninput: {shown}"
        ) from e


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@FUZZ
@given(data=st.data())
def test_mutated_corpus_is_parsed_or_refused(target: Target, data: st.DataObject):
    parses_or_refuses(target, data.draw(mutated(target.seeds), label="input"))


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@FUZZ
@given(data=st.data())
def test_output_of_nothing_of_the_tool_is_parsed_or_refused(target: Target, data: st.DataObject):
    parses_or_refuses(target, data.draw(wholly_odd(target.binary), label="input"))


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_a_10_mb_line_is_refused_or_read_in_bounded_time(target: Target):
    """One fixed example per parser (not per hypothesis example: CI time): a 10 MB line of words,
    runs of spaces, digits and separators in the middle of a real output."""
    seed = target.seeds[0]
    middle = seed.find(b"\n" if target.binary else "\n", len(seed) // 2) + 1
    line = ("x" * 60 + " " * 60 + "1" * 8 + ": ") * (TEN_MB // 130)
    data = seed[:middle] + (line.encode() if target.binary else line) + seed[middle:]
    run = run_bounded(target.parse, data, limit_s=15)
    assert run.seconds is not None, f"{target.name} (owner {target.owner}): over 15 s on a 10 MB line"
    assert not run.error, f"{target.name} (owner {target.owner}) on a 10 MB line: {run.error}"

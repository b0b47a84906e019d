"""An imported NHC glob (check_cmd_output -m '*gpu*ok*ready*') matches a whole output line as bash's
[[ line == glob ]] does, in time linear in the output (issue 32, 1.8): translated naively, each `*` is
a [^\\n]* that backtracks into the others, and 13 KB of output took 29.5 s against a 10 s deadline."""

from __future__ import annotations

import fnmatch
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodecheck.app.nhc_model import block_of
from nodecheck.app.nhc_translate import translate
from nodecheck.parsers.nhc_conf import parse_nhc_conf
from tests.growth import assert_linear


def glob_match(glob: str, tag: str = "1") -> str:
    conf = f"* || check_cmd_output -m '{glob}' nvidia-smi\n"
    result = translate(parse_nhc_conf(conf), "nhc.conf")
    assert result.untranslated == [], result.untranslated
    return block_of(result, "command.nhc_1_nvidia-smi")["match"]


def search(pattern: str):
    return re.compile(pattern, re.MULTILINE).search


@pytest.mark.growth
def test_a_glob_with_many_stars_is_matched_in_linear_time():
    """Growth, not seconds (tests/growth.py): a line 4x as long costs under 8x (the naive translation: ~64x)."""
    line = lambda n: "gpu ok " * n + "\n"  # noqa: E731 - never "ready": every split is tried
    assert_linear(search(glob_match("*gpu*ok*ready*")), line, 400)


@pytest.mark.growth
def test_a_glob_that_does_not_end_in_a_star_stays_linear_too():
    text = lambda n: ("gpu ok " * n + "\n") * 4  # noqa: E731
    assert_linear(search(glob_match("*gpu*ok?ready")), text, 400)


def test_two_globs_on_one_check_both_must_match_and_stay_linear():
    conf = "* || check_cmd_output -m '*gpu*ok*' -m '*link*up*' nvidia-smi\n"
    block = block_of(translate(parse_nhc_conf(conf), "nhc.conf"), "command.nhc_1_nvidia-smi")
    both = re.compile(block["match"], re.MULTILINE)
    assert both.search("gpu0 ok\nlink 1 up\n") and not both.search("gpu0 ok\nlink 1 down\n")


_GLOB_CHARS = st.sampled_from(["a", "b", "*", "?", "[ab]", "[!a]", "[*]", " "])


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(_GLOB_CHARS, min_size=1, max_size=8),
    lines=st.lists(st.text(alphabet="ab c*", max_size=12), min_size=1, max_size=4),
)
def test_the_translation_matches_a_line_exactly_as_the_glob_does(parts, lines):
    glob = "".join(parts)
    pattern = glob_match(glob)
    expected = any(fnmatch.fnmatchcase(line, glob) for line in lines)
    assert bool(re.search(pattern, "\n".join(lines) + "\n", re.MULTILINE)) is expected, (glob, lines, pattern)

"""An imported NHC glob (check_cmd_output -m '*gpu*ok*ready*') matches a whole output line as bash's
[[ line == glob ]] does, in time linear in the output (issue 32, 1.8): translated naively, each `*` is
a [^\\n]* that backtracks into the others, and 13 KB of output took 29.5 s against a 10 s deadline."""

from __future__ import annotations

import fnmatch
import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from nodecheck.app.nhc_model import block_of
from nodecheck.app.nhc_translate import translate
from nodecheck.parsers.nhc_conf import parse_nhc_conf


def glob_match(glob: str, tag: str = "1") -> str:
    conf = f"* || check_cmd_output -m '{glob}' nvidia-smi\n"
    result = translate(parse_nhc_conf(conf), "nhc.conf")
    assert result.untranslated == [], result.untranslated
    return block_of(result, "command.nhc_1_nvidia-smi")["match"]


def seconds(pattern: str, text: str) -> float:
    compiled = re.compile(pattern, re.MULTILINE)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        compiled.search(text)
        best = min(best, time.perf_counter() - start)
    return best


def test_a_glob_with_many_stars_is_matched_in_linear_time():
    """Growth, not seconds: a line 4x as long costs under 8x (the naive translation: ~64x)."""
    pattern = glob_match("*gpu*ok*ready*")
    line = lambda n: "gpu ok " * n + "\n"  # noqa: E731 - never "ready": every split is tried
    small, large = seconds(pattern, line(400)), seconds(pattern, line(1600))
    assert large < 8 * max(small, 1e-3), f"{small:.4f} s at n, {large:.4f} s at 4n"


def test_a_glob_that_does_not_end_in_a_star_stays_linear_too():
    pattern = glob_match("*gpu*ok?ready")
    text = lambda n: ("gpu ok " * n + "\n") * 4  # noqa: E731
    small, large = seconds(pattern, text(400)), seconds(pattern, text(1600))
    assert large < 8 * max(small, 1e-3), f"{small:.4f} s at n, {large:.4f} s at 4n"


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

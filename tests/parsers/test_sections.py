"""split_sections: named sections, their exit codes and fact lines, split at "\n" only (issue 17)."""

from __future__ import annotations

import pytest

from nodecheck.parsers.sections import split_sections


def test_sections_facts_and_exit_codes():
    out = split_sections(
        "@@nodecheck runtime docker\n@@nodecheck begin a\nx\ny\n@@nodecheck end a rc=3\n@@nodecheck begin b\nz"
    )
    assert (out.facts, out.get("a").text, out.get("a").rc) == ({"runtime": "docker"}, "x\ny\n", 3)
    assert (out.get("b").text, out.get("b").rc) == ("z\n", None)  # cut off: no end marker


@pytest.mark.parametrize("breaker", ["\x0c", "\x1c", "\x1e", "\x85", "\u2028", "\u2029"], ids=ascii)
def test_a_splitlines_break_inside_a_line_stays_in_that_line(breaker):
    # str.splitlines broke here: a dmesg line holding \x1c became two, one of them without its stamp
    text = f"@@nodecheck begin dmesg\n[ 1.0] a{breaker}b\n@@nodecheck end dmesg rc=0\n"
    assert split_sections(text).get("dmesg").text == f"[ 1.0] a{breaker}b\n"


def test_crlf_output_reads_as_lines():
    out = split_sections("@@nodecheck begin a\r\nx\r\n@@nodecheck end a rc=0\r\n@@nodecheck k v\r\n")
    assert (out.get("a").text, out.get("a").rc, out.facts) == ("x\n", 0, {"k": "v"})


def test_an_exit_status_of_5000_digits_is_no_end_marker():
    # int() of 5000 digits raised ValueError from every probe's parser; no shell prints such a status,
    # so the line is the section's text and the section is cut (rc None), not a crash
    out = split_sections("@@nodecheck begin a\nx\n@@nodecheck end a rc=" + "9" * 5000 + "\n")
    assert out.sections["a"].rc is None

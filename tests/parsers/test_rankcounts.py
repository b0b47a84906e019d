"""Per-rank work counts: JSON object, JSON array, CSV with and without a header; garbage refused."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.rankcounts import parse_rank_counts
from tests.helpers import data


def test_incident_counts_json():
    counts = parse_rank_counts(data("job/constructed-incident-counts.json"))
    assert len(counts) == 16
    assert (counts[0], counts[1], counts[3], counts[11], sum(counts.values())) == (30871, 30850, 30835, 30888, 493780)


@pytest.mark.parametrize(
    "text, fmt, expected",
    [
        ("[30871, 30850]", "auto", {0: 30871, 1: 30850}),
        ('{"1": 5, "0": 7}', "json", {0: 7, 1: 5}),
        ("rank,count\n0,30871\n1,30850\n", "auto", {0: 30871, 1: 30850}),
        ("0, 30871\n\n1 ,30850\n", "csv", {0: 30871, 1: 30850}),
        ("rank,blocks\r\n1,0\r\n0,2\r\n", "auto", {0: 2, 1: 0}),
    ],
)
def test_accepted_shapes(text, fmt, expected):
    assert parse_rank_counts(text, fmt) == expected
    assert list(parse_rank_counts(text, fmt)) == sorted(expected)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty: no rank counts"),
        ("{}", "no rank counts in it"),
        ('{"0": 1, "0": 2}', "rank '0' appears twice"),
        ('{"0": 1, " 0": 2}', "rank 0 appears twice"),
        ("[1, -2]", "rank 1: count -2 is negative"),
        ("[1.5]", "rank 0: count 1.5 is not an integer"),
        ("[true]", "rank 0: count True is not an integer"),
        ('{"r0": 1}', "rank 'r0' is not a rank (0, 1, 2, ...)"),
        ('{"01": 1}', "rank '01' is not a rank (0, 1, 2, ...)"),
        ('"30871"', "line 1: expected rank,count, got 1 fields: '30871'"),
        ("true", "line 1: expected rank,count, got 1 fields: 'true'"),
        ('{"0": 1', "not JSON: Expecting ',' delimiter at line 1 column 8"),
        ("0,1\n0,2\n", "line 2: rank 0 appears twice"),
        ("0,1,2\n", "line 1: expected rank,count, got 3 fields: '0,1,2'"),
        ("rank,count\n0,x\n", "line 2: rank 0: count 'x' is not an integer"),
        ("0,-3\n", "line 1: rank 0: count -3 is negative"),
        ("<html>oops</html>\n", "line 1: expected rank,count, got 1 fields: '<html>oops</html>'"),
    ],
)
def test_garbage_is_refused(text, reason):
    with pytest.raises(ParseError) as e:
        parse_rank_counts(text)
    assert e.value.reason == reason


def test_json_scalar_with_json_format():
    with pytest.raises(ParseError) as e:
        parse_rank_counts('"30871"', "json")
    assert e.value.reason == 'expected a JSON object {"rank": count} or an array, got str'


# --- issue 17: crashes and bounded messages on a counts command's odd output --------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0,5\r1,6\r", {0: 5, 1: 6}),  # a bare \r raised csv.Error
        ("rank,count\r\n0,5\r\n1,6\r\n", {0: 5, 1: 6}),
    ],
)
def test_carriage_returns_end_lines(text, expected):
    assert parse_rank_counts(text) == expected


@pytest.mark.parametrize(
    "text, reason",
    [
        ('0,5\n1,"6\r7"\n', "line 2: not rank,count CSV (unexpected end of data): '1,\"6'"),
        (
            "0," + "1" * 200_000 + "\n",
            "line 1: not rank,count CSV (field larger than field limit (131072)): '0,1111111111...1111111111111'",
        ),
        ('0,"5\n', "line 1: not rank,count CSV (unexpected end of data): '0,\"5'"),
        ("0,5\x0c1,6\n", "line 1: expected rank,count, got 3 fields: '0,5\\x0c1,6'"),
    ],
)
def test_odd_csv_is_a_parse_error_never_a_crash(text, reason):
    with pytest.raises(ParseError) as caught:
        parse_rank_counts(text, "csv")
    assert caught.value.reason == reason
    assert len(caught.value.reason) < 300


@pytest.mark.parametrize(
    "text, reason",
    [
        ("[" * 100_000, "not rank counts: JSON nested too deeply"),
        ('{"0": ' + "[" * 500 + "]" * 500 + "}", "rank 0: count [[[[[[[...]]]]]]] is not an integer"),
        (
            "[" + ", ".join(['"' + "x" * 100_000 + '"'] * 3) + "]",
            "rank 0: count 'xxxxxxxxxxxx...xxxxxxxxxxxxx' is not an integer",
        ),
    ],
)
def test_odd_json_is_a_parse_error_with_a_bounded_message(text, reason):
    with pytest.raises(ParseError) as caught:
        parse_rank_counts(text)
    assert len(caught.value.reason) < 300
    assert caught.value.reason == reason

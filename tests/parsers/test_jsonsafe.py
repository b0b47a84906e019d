"""Tool JSON read with the limits a judge needs (inputs found by tests/fuzz)."""

from __future__ import annotations

import json

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers import jsonsafe
from nodecheck.parsers.nccl_tests_json import parse_nccl_tests_json
from tests.helpers import data


@pytest.mark.parametrize(
    "text, why",
    [
        ("NaN", "non-finite number NaN"),
        ("[-Infinity]", "non-finite number -Infinity"),
        ("1e999", "out of range"),
        ("1" * 31, "integer of 31 digits"),
        ("-" + "9" * 5000, "integer of 5001 digits"),
    ],
)
def test_what_a_judge_cannot_use_is_refused(text, why):
    with pytest.raises(jsonsafe.JsonRefused, match=why):
        jsonsafe.loads(text)


def test_callers_that_check_each_number_may_take_nan_but_never_a_huge_integer():
    assert jsonsafe.loads("[NaN, 1e999]", finite_numbers=False)[1] == float("inf")
    with pytest.raises(jsonsafe.JsonRefused):
        jsonsafe.loads("9" * 400, finite_numbers=False)
    assert jsonsafe.loads('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}


def test_a_size_printed_as_nan_in_the_nccl_tests_report_is_a_parse_error_not_a_crash():
    doc = json.loads(data("nccl-tests/constructed-all_reduce_perf-2node-json-v2-complete.json"))
    doc["results"][0]["size"] = float("nan")
    with pytest.raises(ParseError, match="JSON report"):
        parse_nccl_tests_json(json.dumps(doc))


def test_a_size_of_400_digits_in_the_nccl_tests_report_is_a_parse_error_not_a_crash():
    text = data("nccl-tests/constructed-all_reduce_perf-2node-json-v2-complete.json")
    text = text.replace('"maximum_bytes":134217728', '"maximum_bytes":' + "9" * 400, 1)
    with pytest.raises(ParseError, match="integer of 400 digits"):
        parse_nccl_tests_json(text)

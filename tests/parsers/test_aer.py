"""aer_dev_{correctable,nonfatal,fatal}: per-type counts and the kernel's total, on every recording."""

from __future__ import annotations

import re

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.aer import parse_aer
from tests.helpers import data, data_files

# per file: (kind, total, types listed, the first type's count)
EXPECTED = {
    "sysfs_aer/procfs-fixture-0000-00-1f-6-aer_dev_correctable-counts.txt": ("correctable", 9, 8, ("RxErr", 1)),
    "sysfs_aer/procfs-fixture-0000-00-1f-6-aer_dev_fatal-counts.txt": ("fatal", 28, 18, ("Undefined", 10)),
    "sysfs_aer/procfs-fixture-0000-00-1f-6-aer_dev_nonfatal-counts.txt": ("nonfatal", 48, 18, ("Undefined", 30)),
    "sysfs_aer/procfs-fixture-0000-01-00-0-aer_dev_correctable-zero.txt": ("correctable", 0, 8, ("RxErr", 0)),
    "sysfs_aer/procfs-fixture-0000-01-00-0-aer_dev_fatal-zero.txt": ("fatal", 0, 18, ("Undefined", 0)),
    "sysfs_aer/procfs-fixture-0000-01-00-0-aer_dev_nonfatal-zero.txt": ("nonfatal", 0, 18, ("Undefined", 0)),
}


@pytest.mark.parametrize("path", data_files("sysfs_aer"))
def test_every_recording(path):
    kind, total, types, first = EXPECTED[path]
    parsed = parse_aer(data(path), kind)
    assert (parsed.total, len(parsed.counts), parsed.counts[0]) == (total, types, first)


def test_nonzero_names_the_error_types():
    parsed = parse_aer(data("sysfs_aer/procfs-fixture-0000-00-1f-6-aer_dev_correctable-counts.txt"), "correctable")
    assert parsed.nonzero()[:3] == ["RxErr 1", "BadTLP 2", "BadDLLP 3"]


@pytest.mark.parametrize(
    "text, said", [("RxErr 0\n", "no TOTAL_ERR_COR line"), ("RxErr zero\nTOTAL_ERR_COR 0\n", "line 1 is not")]
)
def test_garbage_is_a_parse_error(text, said):
    with pytest.raises(ParseError, match=said):
        parse_aer(text, "correctable")


@pytest.mark.parametrize(
    "value, said",
    [
        ("²", "'²' is not a count (at most 2^64-1)"),  # str.isdigit() took it, int() raised ValueError
        ("9" * 5000, "(5000 characters) is not a count (at most 2^64-1)"),  # int() raised ValueError
        ("9" * 400, "(400 characters) is not a count (at most 2^64-1)"),  # read as 10**400 errors
    ],
    ids=["superscript", "5000 digits", "400 digits"],
)
def test_a_count_no_kernel_prints_is_a_parse_error(value, said):
    with pytest.raises(ParseError, match=re.escape(said)):
        parse_aer(f"RxErr {value}\nTOTAL_ERR_COR 0\n", "correctable")

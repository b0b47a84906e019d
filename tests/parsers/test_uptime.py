import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.uptime import parse_uptime


@pytest.mark.parametrize(
    ("text", "seconds"), [("18481.75 19829.75\n", 18481.75), ("350735.47 234388.90", 350735.47), ("12\n", 12.0)]
)
def test_seconds_since_boot(text, seconds):
    assert parse_uptime(text) == seconds


@pytest.mark.parametrize("text", ["", "up 3 days\n", "-1 2\n", "1e400 1\n"])
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_uptime(text)


def test_node_clock_reads_each_part_and_none_for_what_it_cannot():
    from nodecheck.parsers.uptime import node_clock

    boot = "2f4e9a1c-7b3d-4e8a-9c51-0d6e2f8a1b01"
    assert node_clock("1764662400.250000000\n", "18481.75 19829.75\n", boot + "\n") == (1764662400.25, 18481.75, boot)
    # busybox date prints %N as is; a garbled uptime or boot id is not guessed at
    assert node_clock("1764662400.%N\n", "up 5 days\n", "not-a-uuid\n") == (1764662400.0, None, None)
    assert node_clock(None, None, None) == (None, None, None)


@pytest.mark.parametrize("seconds", ["9" * 13, "9" * 300, "9" * 5000], ids=["13 digits", "300 digits", "5000 digits"])
def test_an_uptime_no_kernel_prints_is_a_parse_error(seconds):
    # 1e300 s was read as an uptime: placing a log line at now - 1e300 s overflows datetime
    with pytest.raises(ParseError):
        parse_uptime(f"{seconds}.50 100.00\n")


def test_a_clock_of_400_digits_is_not_read_as_inf():
    from nodecheck.parsers.uptime import node_clock

    # float() of 400 digits is inf: a rate between two reads divided by it
    assert node_clock("9" * 400 + ".25\n", "12.5 1.0\n", None) == (None, 12.5, None)

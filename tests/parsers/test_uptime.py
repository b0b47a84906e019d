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

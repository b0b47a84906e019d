"""ntpq -pn: every recording read to its system peer and that peer's offset."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.chrony import DaemonDown
from nodecheck.parsers.ntpq import NtpPeers, parse_ntpq_peers
from tests.helpers import data, data_files

# file -> (peers, system peer, its offset in ms)
EXPECTED = {
    "check-linux-by-ssh-16-system-peer-minus-122ms.txt": (3, "ns1.admincmd.co", -122.38),
    "jc-31-no-system-peer-offset-5602175ms.txt": (4, None, None),
    "perfsonar-toolkit-259-zg1-system-peer.txt": (3, "zg1.ntp.CARNet.", 0.011),
    "pp-puppet-621-apple-system-peer-26ms.txt": (6, "time.euro.apple", -26.064),
}


@pytest.mark.parametrize("path", data_files("ntpq"))
def test_every_recording_reads_to_its_system_peer(path):
    parsed = parse_ntpq_peers(data(path))
    assert isinstance(parsed, NtpPeers)
    count, remote, offset = EXPECTED[path.split("/", 1)[1]]
    peer = parsed.system_peer
    assert len(parsed.peers) == count
    assert (peer.remote, peer.offset_ms) == (remote, offset) if peer else (remote, offset) == (None, None)


def test_peer_columns_and_the_unsynchronised_fleet_offset():
    peers = parse_ntpq_peers(data("ntpq/jc-31-no-system-peer-offset-5602175ms.txt"))
    assert isinstance(peers, NtpPeers)
    first = peers.peers[0]
    assert (first.tally, first.refid, first.stratum, first.reach, first.offset_ms) == (
        "",
        "204.9.54.119",
        2,
        "1",
        5602175.0,
    )


def test_a_long_remote_on_its_own_line_joins_its_columns():
    text = (
        "     remote           refid      st t when poll reach   delay   offset  jitter\n"
        "==============================================================================\n"
        "*2001:db8::123:4567\n"
        "                 .GPS.            1 u   12   64  377    0.254   -0.031   0.017\n"
    )
    peers = parse_ntpq_peers(text)
    assert isinstance(peers, NtpPeers) and peers.system_peer is not None
    assert (peers.system_peer.remote, peers.system_peer.offset_ms) == ("2001:db8::123:4567", -0.031)


def test_a_daemon_that_does_not_answer_is_said_so():
    assert parse_ntpq_peers("ntpq: read: Connection refused\n") == DaemonDown("ntpq", "ntpq: read: Connection refused")
    assert parse_ntpq_peers("No association ID's returned\n") == NtpPeers(())


@pytest.mark.parametrize(
    "text",
    [
        "",
        "     remote           refid      st t when poll reach   delay   offset  jitter\n",
        data("ntpq/perfsonar-toolkit-259-zg1-system-peer.txt").replace("0.417", "fast"),
        data("ntpq/perfsonar-toolkit-259-zg1-system-peer.txt") + "*2001:db8::1\n",
    ],
)
def test_garbage_and_truncated_output_raise(text):
    with pytest.raises(ParseError):
        parse_ntpq_peers(text)


# -- issue 32 section 3: bounded numbers, no peer line, two system peers ------------------------------

PERFSONAR = data("ntpq/perfsonar-toolkit-259-zg1-system-peer.txt")


@pytest.mark.parametrize(
    "old, new",
    [
        ("0.011", "1" + "0" * 400),  # float() -> inf: an offset no clock has
        ("0.011", "nan"),
        ("0.011", "inf"),
        ("0.011", "1_0"),  # float() reads underscores
        ("0.417", "1e309"),
        ("  2 u  117", "  ٢ u  117"),  # Arabic-Indic 2: int() reads it, ntpq never prints it
        ("  2 u  117", " " + "9" * 5000 + " u  117"),
    ],
)
def test_a_number_ntpq_never_prints_is_a_parse_error(old, new):
    assert old in PERFSONAR
    with pytest.raises(ParseError):
        parse_ntpq_peers(PERFSONAR.replace(old, new, 1))


def test_a_header_without_a_peer_line_is_cut_off():
    header = "".join(PERFSONAR.splitlines(keepends=True)[:2])
    with pytest.raises(ParseError, match="no peer line"):
        parse_ntpq_peers(header)


def test_two_system_peers_are_refused():
    with pytest.raises(ParseError, match="two system peers"):
        parse_ntpq_peers(PERFSONAR.replace("+zg2", "*zg2"))

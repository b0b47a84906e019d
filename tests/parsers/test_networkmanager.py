"""nmcli terse device states and NetworkManager.conf unmanaged-devices, on inputs built from the man pages.

There is no nmcli or NetworkManager.conf recording in the corpus. The inputs below follow nmcli(1)
(terse mode escapes ':' and '\\' with '\\') and NetworkManager.conf(5) ("Device List Format").
"""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.networkmanager import (
    is_unmanaged,
    parse_nmcli_devices,
    specs_not_by_name,
    unmanaged_devices,
)
from tests.growth import assert_linear

# `nmcli -t -f DEVICE,TYPE,STATE device` on a RoCE node (constructed)
NMCLI = (
    "ens7f0np0:ethernet:connected\n"
    "ens7f1np1:ethernet:unmanaged\n"
    "ibp0s1\\:1:infiniband:disconnected\n"  # ':' in a name comes escaped
    "odd\\\\name:ethernet:unavailable\n"  # and so does '\'
    "docker0:bridge:connected (externally)\n"
    "lo:loopback:unmanaged\n"
)

# /etc/NetworkManager/conf.d/99-rdma.conf (constructed from NetworkManager.conf(5) examples)
CONF = """# keep NetworkManager off the RoCE ports
[main]
plugins=keyfile

[keyfile]
unmanaged-devices=interface-name:ens7*;mac:00:22:68:1c:59:b1, interface-name:=ib[0]

[device]
wifi.scan-rand-mac-address=no
"""


def test_nmcli_devices():
    assert parse_nmcli_devices(NMCLI) == {
        "ens7f0np0": "connected",
        "ens7f1np1": "unmanaged",
        "ibp0s1:1": "disconnected",
        "odd\\name": "unavailable",
        "docker0": "connected (externally)",
        "lo": "unmanaged",
    }


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        ("Error: NetworkManager is not running.\n", "nmcli failed: 'Error: NetworkManager is not running.'"),
        ("DEVICE  TYPE      STATE      CONNECTION\n", "expected DEVICE:TYPE:STATE"),  # not terse
        ("eth0:ethernet:connected:Wired connection 1\n", "expected DEVICE:TYPE:STATE"),  # 4 fields
        ("eth0:ethernet:connected\neth0:ethernet:connected\n", "listed twice"),
    ],
)
def test_nmcli_garbage(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse_nmcli_devices(text)


def test_unmanaged_devices_specs():
    assert unmanaged_devices(CONF) == ["interface-name:ens7*", "mac:00:22:68:1c:59:b1", "interface-name:=ib[0]"]


def test_conf_d_files_override_and_extend_in_load_order():
    later = "[keyfile]\nunmanaged-devices+=interface-name:ens10*\nunmanaged-devices-=mac:00:22:68:1c:59:b1\n"
    replacing = "[keyfile]\nunmanaged-devices=interface-name:eth\\,x\\s\n"
    assert unmanaged_devices(CONF, later) == ["interface-name:ens7*", "interface-name:=ib[0]", "interface-name:ens10*"]
    assert unmanaged_devices(CONF, later, replacing) == ["interface-name:eth,x "]
    assert unmanaged_devices("[main]\nplugins=keyfile\n") == []


def test_not_a_key_file_is_a_parse_error():
    with pytest.raises(ParseError, match="not a key file: line 1: a key before any \\[group\\]"):
        unmanaged_devices("unmanaged-devices=interface-name:eth1\n")


@pytest.mark.parametrize(
    "netdev, expected",
    [
        ("ens7f0np0", True),
        ("ens7f1np1", True),  # interface-name:ens7* globs
        ("ens10f0np0", False),
        ("ib[0]", True),
        ("ib0", False),  # interface-name:= is literal
    ],
)
def test_is_unmanaged_by_name(netdev, expected):
    assert is_unmanaged(netdev, unmanaged_devices(CONF)) is expected


@pytest.mark.parametrize(
    "specs, netdev, expected",
    [
        (["interface-name:ens*", "except:interface-name:ens7f1np1"], "ens7f0np0", True),
        (["interface-name:ens*", "except:interface-name:ens7f1np1"], "ens7f1np1", False),
        (["except:interface-name:eth0"], "ens7f0np0", True),  # only negatives: as if "*" were listed
        (["except:interface-name:eth0"], "eth0", False),
        (["*"], "ens7f0np0", True),
        (["eth1"], "eth1", True),
        (["eth1"], "eth10", False),  # a bare IFNAME: literal
        (["interface-name:~ens?f0np0"], "ens7f0np0", True),
        (["interface-name:ens[7]f0np0"], "ens7f0np0", False),  # no character classes in NM globs
        (["mac:00:22:68:1c:59:b1", "type:ethernet"], "ens7f0np0", False),
        ([], "ens7f0np0", False),
    ],
)
def test_is_unmanaged_spec_forms(specs, netdev, expected):
    assert is_unmanaged(netdev, specs) is expected


def test_specs_not_decidable_by_name():
    assert specs_not_by_name(
        [
            "interface-name:ens*",
            "mac:00:22:68:1c:59:b1",
            "type:ethernet",
            "00:1E:65:30:D1:C4",
            "except:driver:mlx5_core",
            "eth1",
            "*",
        ]
    ) == ["mac:00:22:68:1c:59:b1", "type:ethernet", "00:1E:65:30:D1:C4", "except:driver:mlx5_core"]


@pytest.mark.growth
def test_a_key_holding_a_long_run_of_spaces_is_read_in_linear_time():
    """configparser's option regex (a lazy `.*?` before `\\s*=`) took 3 s on a key with 20k spaces
    inside and 67 s on 80k (issue 17, found by tests/fuzz); GKeyFile's own rules are read by line."""
    conf = lambda n: "[device]\nwifi.scan-rand-mac-" + " " * n + "address=no\n[keyfile]\nunmanaged-devices=ib0\n"  # noqa: E731
    assert unmanaged_devices(conf(200_000)) == ["ib0"]
    assert_linear(unmanaged_devices, conf, 50_000)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("unmanaged-devices=interface-name:eth1\n", "line 1: a key before any \\[group\\]"),
        ("[keyfile]\nunmanaged-devices\n", "line 2: not a key=value line: 'unmanaged-devices'"),
        ("[keyfile\nunmanaged-devices=x\n", "line 1: not a \\[group\\] line: '\\[keyfile'"),
    ],
)
def test_what_glib_refuses_is_a_parse_error_naming_the_line(text, reason):
    with pytest.raises(ParseError, match=reason):
        unmanaged_devices(text)


def test_keyfile_rules_comments_spaces_around_the_sign_and_the_last_value_wins():
    conf = (
        "  # a comment\n[keyfile]\n  unmanaged-devices = interface-name:a \n"
        "[main]\nunmanaged-devices=interface-name:not-keyfile\n[keyfile]\nunmanaged-devices=interface-name:b\n"
    )
    assert unmanaged_devices(conf) == ["interface-name:b"]
    assert unmanaged_devices("[keyfile]\r\nunmanaged-devices=interface-name:c\r\n") == ["interface-name:c"]


def test_nmcli_messages_quote_a_bounded_excerpt():
    with pytest.raises(ParseError) as error:
        parse_nmcli_devices("x" * 100_000 + "\n")
    assert len(error.value.reason) < 200 and "(100000 characters)" in error.value.reason
    assert error.value.reason == f"expected DEVICE:TYPE:STATE, got '{'x' * 60}'… (100000 characters)"

"""Inventory loading: the documented shape works; every mistake names file:line and the fix."""
import textwrap

import pytest

from nodecheck.errors import ConfigError
from nodecheck.inventory import load_inventory, select

ISSUE_SHAPE = """\
defaults:                      # optional; applies to every node
  user: root
  port: 22
  identity_file: ~/.ssh/id_ed25519
  known_hosts: ~/.ssh/known_hosts
  ssh_config: ~/.ssh/config
  labels: [gpu]
nodes:
  gpu[001-008]:
    address: 10.1.0.[1-8]
    labels: [h100, ndr]
  gpu009: {address: 10.1.0.9, port: 2222}
"""


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """A HOME holding the files the documented shape names (~/.ssh/id_ed25519, ~/.ssh/config)."""
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "id_ed25519").write_text("key")
    (ssh / "config").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def write(tmp_path, text, name="hosts.yml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_the_documented_shape_expands_to_nine_nodes(tmp_path, home):
    nodes = load_inventory(write(tmp_path, ISSUE_SHAPE))
    assert [n.name for n in nodes] == [f"gpu00{i}" for i in range(1, 10)]
    assert [n.address for n in nodes] == [f"10.1.0.{i}" for i in range(1, 10)]
    first, last = nodes[0], nodes[-1]
    assert (first.port, first.user, last.port) == (22, "root", 2222)
    assert first.labels == {"gpu", "h100", "ndr"} and last.labels == {"gpu"}
    assert first.identity_file == str(home / ".ssh/id_ed25519")


def test_a_node_without_address_is_dialled_by_name_and_relative_paths_follow_the_file(tmp_path):
    nodes = load_inventory(write(tmp_path, """\
        defaults: {known_hosts: keys/known_hosts}
        nodes:
          login1:
        """))
    assert [(n.name, n.address, n.port) for n in nodes] == [("login1", "login1", 22)]
    assert nodes[0].known_hosts == str(tmp_path / "keys/known_hosts")


@pytest.mark.parametrize("text, line, fragment, hint", [
    ("nodes:\n  gpu[001-004]:\n    adress: 10.0.0.1\n", 3, "unknown key 'nodes.gpu[001-004].adress'", "did you mean 'address'"),
    ("nodes:\n  gpu[001-004]:\n    address: 10.0.0.[1-3]\n", 3, "names 4 nodes but address '10.0.0.[1-3]' expands to 3", "same length"),
    ("nodes:\n  gpu[001-004]:\n  gpu003: {}\n", 3, "duplicate node 'gpu003' (already defined at line 2)", "one entry"),
    ("nodes:\n  gpu[001-:\n", 2, "bad hostlist 'gpu[001-'", "hostlist syntax"),
    ("nodes:\n  gpu1: {port: abc}\n", 2, "nodes.gpu1.port", ""),
    ("nodes:\n  gpu1: {port: 70000}\n", 2, "less than or equal to 65535", ""),
    ("nodes:\n  gpu1: {port: 22\n", 3, "malformed YAML", "indentation"),
    ("nodes:\n  gpu1:\n  gpu1:\n", 3, "duplicate key 'gpu1' (first at line 2)", "merge"),
    ("nodez:\n  gpu1:\n", 1, "unknown key 'nodez'", "did you mean 'nodes'"),
    ("defaults:\n  user: root\n", 1, "missing required key 'nodes'", "add nodes"),
    ("nodes: {}\n", 1, "no nodes in the inventory", "at least one"),
    ("- gpu1\n", 1, "a mapping with a 'nodes:' key", "README"),
    ("defaults:\n  identity_file: /nonexistent/key\nnodes:\n  gpu1:\n", 2,
     "identity_file '/nonexistent/key' does not exist", "relative to the inventory"),
    ("nodes:\n  gpu1:\n    ssh_config: missing_config\n", 3, "ssh_config 'missing_config' does not exist", ""),
])
def test_inventory_errors_name_file_line_and_fix(tmp_path, text, line, fragment, hint):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_inventory(path)
    err = caught.value
    assert (err.file, err.line) == (str(path), line)
    assert fragment in err.message
    assert hint in err.hint
    assert str(err).startswith(f"{path}:{line}: ")


def test_a_missing_inventory_file_is_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_inventory(tmp_path / "nope.yml")


def test_select_restricts_to_a_hostlist_in_inventory_order(tmp_path):
    nodes = load_inventory(write(tmp_path, ISSUE_SHAPE))
    assert [n.name for n in select(nodes, "gpu[009,001-002]")] == ["gpu001", "gpu002", "gpu009"]
    assert select(nodes, None) == nodes


@pytest.mark.parametrize("hostlist, fragment", [("gpu[010-011]", "gpu[010-011] not in the inventory"),
                                                ("gpu[001-", "bad hostlist")])
def test_select_rejects_unknown_nodes_and_bad_hostlists(tmp_path, hostlist, fragment):
    nodes = load_inventory(write(tmp_path, ISSUE_SHAPE))
    with pytest.raises(ConfigError, match=fragment.replace("[", r"\[").replace("]", r"\]")) as caught:
        select(nodes, hostlist)
    assert caught.value.file == "--nodes"


def test_an_ipv6_address_is_one_address_not_a_hostlist(tmp_path):
    nodes = load_inventory(write(tmp_path, "nodes:\n  gpu1: {address: 'fd00::1'}\n"))
    assert nodes[0].address == "fd00::1"

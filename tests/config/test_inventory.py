"""Inventory loading: the documented shape works; every mistake names file:line and the fix."""

import textwrap

import pytest

from nodecheck.config.inventory import load_inventory, select
from nodecheck.core.errors import ConfigError
from nodecheck.core.hostlist import MAX_NODES, size_bound
from tests.growth import assert_linear

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
    nodes = load_inventory(
        write(
            tmp_path,
            """\
        defaults: {known_hosts: keys/known_hosts}
        nodes:
          login1:
        """,
        )
    )
    assert [(n.name, n.address, n.port) for n in nodes] == [("login1", "login1", 22)]
    assert nodes[0].known_hosts == str(tmp_path / "keys/known_hosts")


@pytest.mark.parametrize(
    "text, line, fragment, hint",
    [
        (
            "nodes:\n  gpu[001-004]:\n    adress: 10.0.0.1\n",
            3,
            "unknown key 'nodes.gpu[001-004].adress'",
            "did you mean 'address'",
        ),
        (
            "nodes:\n  gpu[001-004]:\n    address: 10.0.0.[1-3]\n",
            3,
            "names 4 nodes but address '10.0.0.[1-3]' expands to 3",
            "same length",
        ),
        (
            "nodes:\n  gpu[001-004]:\n  gpu003: {}\n",
            3,
            "duplicate node 'gpu003' (already defined at line 2)",
            "one entry",
        ),
        ("nodes:\n  gpu[001-:\n", 2, "bad hostlist 'gpu[001-'", "hostlist syntax"),
        ("nodes:\n  gpu1: {port: abc}\n", 2, "nodes.gpu1.port", ""),
        ("nodes:\n  gpu1: {port: 70000}\n", 2, "less than or equal to 65535", ""),
        ("nodes:\n  gpu1: {port: 22\n", 3, "malformed YAML", "indentation"),
        ("nodes:\n  gpu1:\n  gpu1:\n", 3, "duplicate key 'gpu1' (first at line 2)", "merge"),
        ("nodez:\n  gpu1:\n", 1, "unknown key 'nodez'", "did you mean 'nodes'"),
        ("defaults:\n  user: root\n", 1, "missing required key 'nodes'", "add nodes"),
        ("nodes: {}\n", 1, "no nodes in the inventory", "at least one"),
        ("- gpu1\n", 1, "a mapping with a 'nodes:' key", "README"),
        (
            "defaults:\n  identity_file: /nonexistent/key\nnodes:\n  gpu1:\n",
            2,
            "identity_file '/nonexistent/key' does not exist",
            "relative to the inventory",
        ),
        ("nodes:\n  gpu1:\n    ssh_config: missing_config\n", 3, "ssh_config 'missing_config' does not exist", ""),
        # a bare key YAML reads as a number, a boolean or null would be silently renamed
        ("nodes:\n  123: {}\n", 2, "key '123' is read by YAML as a number", 'quote it: "123":'),
        ("nodes:\n  gpu1: {}\n  ~: {}\n", 3, "key '~' is read by YAML as null", "quote it"),
        ("nodes:\n  yes: {}\n", 2, "key 'yes' is read by YAML as a boolean", "quote it"),
        ("nodes:\n  [gpu1, gpu2]: {}\n", 2, "a list cannot be a key", "quote it"),
        ("nodes:\n  gpu1: {port: true}\n", 2, "nodes.gpu1.port: Input should be a valid integer, got True", ""),
        ("defaults: {port: true}\nnodes:\n  gpu1:\n", 1, "defaults.port", ""),
        ("nodes:\n  gpu1: {address: ''}\n", 2, "empty hostlist ''", "at least one"),
        # hostlists are bounded before ClusterShell materialises them
        ("nodes:\n  gpu[1-100000000]: {}\n", 2, "names 100,000,000 nodes, more than 100,000", "typo"),
        (
            "nodes:\n  gpu1:\n    address: 10.0.[0-255].[0-255],10.1.[0-255].[0-255]\n",
            3,
            "address hostlist '10.0.[0-255].[0-255],10.1.[0-255].[0-255]' names 131,072 nodes",
            "typo",
        ),
        ("nodes:\n  a[1-60000]: {}\n  b[1-60000]: {}\n", 3, "the inventory names more than 100,000 nodes", "split"),
        # one machine under two names would be checked twice and reported twice
        (
            "nodes:\n  node1: {address: 10.0.0.1}\n  node2: {address: 10.0.0.1}\n",
            3,
            "node 'node2' dials 10.0.0.1:22, as node 'node1' (line 2) does",
            "one machine, one entry",
        ),
        ("nodes:\n  node1: {}\n  node2: {address: node1}\n", 3, "as node 'node1' (line 2) does", ""),
        ("nodes:\n  a: {address: 'fd00::1'}\n  b: {address: 'FD00:0::1'}\n", 3, "as node 'a' (line 2)", ""),
        (
            "defaults: {port: 2222}\nnodes:\n  gpu[1-2]: {address: '10.0.0.[1-2]'}\n  x: {address: 10.0.0.2}\n",
            4,
            "node 'x' dials 10.0.0.2:2222, as node 'gpu2' (line 3) does",
            "",
        ),
    ],
)
def test_inventory_errors_name_file_line_and_fix(tmp_path, text, line, fragment, hint):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_inventory(path)
    err = caught.value
    assert (err.file, err.line) == (str(path), line)
    assert fragment in err.message
    assert hint in err.hint
    assert str(err).startswith(f"{path}:{line}: ")


def test_an_empty_inventory_file_says_so(tmp_path):
    path = write(tmp_path, "# nodes to come\n")
    with pytest.raises(ConfigError) as caught:
        load_inventory(path)
    assert str(caught.value).startswith(f"{path}: empty file: an inventory is a mapping with a 'nodes:' key")


def test_a_quoted_numeric_node_name_is_fine(tmp_path):
    nodes = load_inventory(write(tmp_path, 'nodes:\n  "123": {address: 10.0.0.1}\n'))
    assert [(n.name, n.address) for n in nodes] == [("123", "10.0.0.1")]


def test_one_address_on_two_ports_is_two_machines(tmp_path):
    nodes = load_inventory(
        write(
            tmp_path,
            """\
        nodes:
          vm1: {address: 10.0.0.1, port: 2201}
          vm2: {address: 10.0.0.1, port: 2202}
        """,
        )
    )
    assert [(n.name, n.port) for n in nodes] == [("vm1", 2201), ("vm2", 2202)]


def test_exactly_max_nodes_load(tmp_path):
    nodes = load_inventory(write(tmp_path, f"nodes:\n  gpu[1-{MAX_NODES}]: {{}}\n"))
    assert len(nodes) == MAX_NODES


def test_a_group_name_is_a_name_not_a_command(tmp_path, monkeypatch):
    """ClusterShell would resolve @name by running the upcalls of a groups.conf."""
    conf = tmp_path / "clustershell"
    conf.mkdir()
    (conf / "groups.conf").write_text(f"[Main]\ndefault: evil\n[evil]\nmap: touch {tmp_path}/ran; echo gpu1\n")
    monkeypatch.setenv("CLUSTERSHELL_CFGDIR", str(conf))
    nodes = load_inventory(write(tmp_path, 'nodes:\n  "@gpus": {address: 10.0.0.1}\n'))
    assert [n.name for n in nodes] == ["@gpus"] and not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    "hostlist, bound",
    [
        ("gpu1", 1),
        ("gpu[001-128]", 128),
        ("gpu[1-4],cpu[1-2]", 6),
        ("rack[1-4]-gpu[01-08]", 32),
        ("gpu[1-10/3]", 4),
        ("gpu[1,3,5-6]", 4),
        ("10.0.0.[1-8]", 8),
        ("gpu[1-3]!gpu2", 4),
        ("gpu[1-100000000]", 100_000_000),
        ("gpu[1-" + "9" * 5000 + "]", 10**15),
    ],
)
def test_size_bound_is_an_upper_bound_from_the_text(hostlist, bound):
    assert size_bound(hostlist) == bound


def test_a_missing_inventory_file_is_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_inventory(tmp_path / "nope.yml")


def test_select_restricts_to_a_hostlist_in_inventory_order(tmp_path):
    nodes = load_inventory(write(tmp_path, ISSUE_SHAPE))
    assert [n.name for n in select(nodes, "gpu[009,001-002]")] == ["gpu001", "gpu002", "gpu009"]
    assert select(nodes, None) == nodes


@pytest.mark.parametrize(
    "hostlist, fragment",
    [
        ("gpu[010-011]", "gpu[010-011] not in the inventory"),
        ("gpu[001-", "bad hostlist"),
        ("gpu[1-100000000]", "names 100,000,000 nodes, more than 100,000"),
    ],
)
def test_select_rejects_unknown_nodes_and_bad_hostlists(tmp_path, hostlist, fragment):
    nodes = load_inventory(write(tmp_path, ISSUE_SHAPE))
    with pytest.raises(ConfigError, match=fragment.replace("[", r"\[").replace("]", r"\]")) as caught:
        select(nodes, hostlist)
    assert caught.value.file == "--nodes"


def test_an_ipv6_address_is_one_address_not_a_hostlist(tmp_path):
    nodes = load_inventory(write(tmp_path, "nodes:\n  gpu1: {address: 'fd00::1'}\n"))
    assert nodes[0].address == "fd00::1"


def test_errors_about_a_huge_hostlist_quote_it_bounded(tmp_path):
    # issue 17: a message quotes a bounded excerpt of the input, not all of it
    # an explicit key ("? KEY"): YAML refuses a plain "KEY: value" key over 1024 characters with its own
    # "malformed YAML" error, which never reaches the hostlist
    path = write(tmp_path, "nodes:\n  ? 'gpu[1-2]" + ",x" * 100_000 + "]'\n  : {}\n")
    with pytest.raises(ConfigError) as caught:
        load_inventory(path)
    assert len(str(caught.value)) < 1000 and caught.value.line == 2
    assert str(caught.value) == (
        f"{path}:2: node name hostlist 'gpu[1-2]" + ",x" * 14 + ",..." + "x," * 18 + "x]' "
        "names 100,002 nodes, more than 100,000; hint: check the range for a typo, "
        "e.g. gpu[001-128]"
    )
    with pytest.raises(ConfigError) as caught:
        select([], "gpu[" + "1," * 100_000 + "x")
    assert len(str(caught.value)) < 1000
    assert str(caught.value) == (
        "--nodes: bad hostlist 'gpu[" + "1," * 16 + "1..." + ",1" * 18 + ",x': missing bracket: "
        '"gpu[' + "1," * 139 + "…; hint: use Slurm hostlist syntax, e.g. gpu[001-004]"
    )


@pytest.mark.growth
@pytest.mark.parametrize(
    "text",
    [lambda n: "gpu[1-2" + ",x" * n + "]", lambda n: "gpu[" + "1," * n + "x", lambda n: "a," * n],
    ids=["range-then-names", "numbers", "names"],
)
def test_size_bound_is_linear_in_the_hostlist(text):
    # issue 17: a lookahead per separator made 20k commas take a second, 200k a minute (at 4n here)
    assert_linear(size_bound, text, 50_000)

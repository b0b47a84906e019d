"""ib.pairs with bw_gbps.relative: each node's best bandwidth per HCA against the other nodes' best on
that HCA, on a scripted cluster (no SSH) whose recordings are a real ib_write_bw one at a set speed."""

from __future__ import annotations

import textwrap

import pytest
from pydantic import ValidationError

from nodecheck.checks.ib_pairs import IbPairs
from nodecheck.config.playbook import load_playbook
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Status
from tests.checks.test_ib_pairs import FAST, ScriptedCluster, run_check

RELATIVE = {"warn_below_pct": 5, "fail_below_pct": 10}


def at(gbps: float) -> str:
    """The real recording (111.71 Gb/s average) with its bandwidth columns set to `gbps`."""
    line = " 65536      20000            111.72             111.71             0.213070"
    assert line in FAST
    return FAST.replace(line, f" 65536      20000            {gbps:.2f}             {gbps:.2f}             0.213070")


class Speeds(ScriptedCluster):
    """Every test runs at the slower of its two ends' speeds (111.71 unless listed)."""

    def __init__(self, speeds: dict[str, float]):
        super().__init__()
        self.speeds = speeds

    def outcome(self, server, client, device):
        return at(min(self.speeds.get(server, 111.71), self.speeds.get(client, 111.71))), 0


def relative_verdicts(verdicts):
    return [(nodes, v) for nodes, v in verdicts if "peers' median" in v.message]


def test_a_node_15_percent_below_its_peers_fails_naming_hca_value_and_median():
    verdicts, extras, _ = run_check(8, Speeds({"node5": 95.0}), bw_gbps={"fail_below": 50, "relative": RELATIVE})
    # the fixed floor passes everyone; the pair blame has nothing to say
    assert extras["bad_nodes"] == [] and extras["unresolved"] == []
    [(nodes, v)] = relative_verdicts(verdicts)
    assert nodes == ("node5",) and v.status is Status.FAIL and v.subject == "mlx5_0"
    assert v.message == (
        "node5 mlx5_0: best bw 95 Gb/s, 15.0% below its peers' median 111.7 Gb/s "
        "(MAD 0 Gb/s, 7 peers, mlx5_0 at 400 Gb/s)"
    )
    assert v.observed["best bw"] == 95.0 and v.observed["peers_median"] == 111.71
    assert v.expected["min"] == pytest.approx(111.71 * 0.9)
    # its ring partners' best is with their other partner: not dragged down by node5
    assert {n[0] for n, v in verdicts if v.status is not Status.PASS} == {"node5"}


def test_a_node_7_percent_below_warns_and_within_the_band_passes():
    verdicts, _, _ = run_check(8, Speeds({"node2": 104.0}), bw_gbps={"fail_below": 50, "relative": RELATIVE})
    [(nodes, v)] = relative_verdicts(verdicts)
    assert nodes == ("node2",) and v.status is Status.WARN and "6.9% below" in v.message
    verdicts, _, _ = run_check(8, Speeds({"node2": 108.0}), bw_gbps={"fail_below": 50, "relative": RELATIVE})
    assert relative_verdicts(verdicts) == []
    assert {v.status for _, v in verdicts} == {Status.PASS}


def test_fewer_peers_than_min_peers_leaves_only_the_fixed_floor():
    # 4 nodes: 3 peers each, min_peers 4
    verdicts, _, _ = run_check(4, Speeds({"node2": 80.0}), bw_gbps={"fail_below": 50, "relative": RELATIVE})
    assert relative_verdicts(verdicts) == []
    assert {v.status for _, v in verdicts} == {Status.PASS}
    # the same with min_peers 3: named
    band = {**RELATIVE, "min_peers": 3}
    verdicts, _, _ = run_check(4, Speeds({"node2": 80.0}), bw_gbps={"fail_below": 50, "relative": band})
    assert [(n, v.status) for n, v in relative_verdicts(verdicts)] == [(("node2",), Status.FAIL)]


def test_no_relative_band_no_relative_verdict():
    verdicts, _, _ = run_check(8, Speeds({"node5": 60.0}), bw_gbps={"fail_below": 50})
    assert relative_verdicts(verdicts) == [] and {v.status for _, v in verdicts} == {Status.PASS}


def test_peers_are_the_nodes_of_the_same_group_label_group():
    # rack r1 (node1-4) runs at 100, rack r2 (node5-8) at 111.71: apart, nobody is below its rack
    # (3 peers, min_peers 3); in one group the whole of r1 would be 10.5 % below
    rack = lambda i: frozenset({f"rack=r{1 if i <= 4 else 2}"})  # noqa: E731
    speeds = Speeds({f"node{i}": 100.0 for i in range(1, 5)})
    band = {**RELATIVE, "min_peers": 3}
    verdicts, _, _ = run_check(
        8, speeds, labels=rack, group_label="rack", steer="intra-group", bw_gbps={"fail_below": 50, "relative": band}
    )
    assert relative_verdicts(verdicts) == []


def test_the_relative_band_also_rides_on_fraction_of_rate():
    verdicts, _, _ = run_check(
        8,
        Speeds({"node5": 95.0}),
        bw_gbps=None,
        fraction_of_rate={"fail_below": 0.1, "relative": RELATIVE},
    )
    [(nodes, v)] = relative_verdicts(verdicts)
    assert nodes == ("node5",) and v.status is Status.FAIL


def write(tmp_path, text):
    p = tmp_path / "book.yml"
    p.write_text(textwrap.dedent(text))
    return p


def test_a_playbook_with_a_relative_band_validates(tmp_path):
    path = write(
        tmp_path,
        """\
        checks:
          ib.pairs:
            bw_gbps: {fail_below: 300, relative: {warn_below_pct: 5, fail_below_pct: 10}}
        """,
    )
    [check] = load_playbook(str(path)).checks
    assert check.params.bw_gbps.relative.fail_below_pct == 10 and check.params.bw_gbps.relative.min_peers == 4


@pytest.mark.parametrize(
    "relative, fragment",
    [
        ("{warn_below_pct: 10, fail_below_pct: 5}", "warn_below_pct (10) must be <= fail_below_pct (5)"),
        ("{}", "relative needs at least one of warn_below_pct, fail_below_pct"),
        ("{fail_below_pct: 150}", "fail_below_pct: Input should be less than 100"),
        ("{fail_below_percent: 10}", "unknown key 'checks.ib.pairs.bw_gbps.relative.fail_below_percent'"),
    ],
)
def test_a_bad_relative_band_is_refused_at_its_line(tmp_path, relative, fragment):
    path = write(tmp_path, f"checks:\n  ib.pairs:\n    bw_gbps: {{fail_below: 300, relative: {relative}}}\n")
    with pytest.raises(ConfigError) as caught:
        load_playbook(str(path))
    assert (caught.value.file, caught.value.line) == (str(path), 3), str(caught.value)
    assert fragment in caught.value.message, caught.value.message


def test_fraction_of_rate_refuses_a_bad_relative_band_too():
    with pytest.raises(ValidationError, match="relative needs at least one of"):
        IbPairs(fraction_of_rate={"fail_below": 0.8, "relative": {}})

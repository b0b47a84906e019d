"""nccl.allreduce_single / nccl.allreduce_multi with busbw_gbps.relative: a node's (or a 2-node
test's) plateau busbw against its peers', on the real a3mega recording with its plateau rows scaled."""

from __future__ import annotations

import textwrap
import threading
import time

import pytest

from nodecheck.checks import nccl_allreduce
from nodecheck.checks.nccl_allreduce import NcclMulti, NcclSingle, judge_single, relative_single
from nodecheck.config.playbook import load_playbook
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Capture, Node, Outcome, Status
from nodecheck.probes import nccl_tests as nccltest
from nodecheck.run.active import CheckContext, CommandRunner
from tests.checks.test_nccl_allreduce import A3MEGA, PAIR_FAIL, TOOLS_OK, ScriptedNccl, wrapped
from tests.helpers import captures, data

RELATIVE = {"warn_below_pct": 5, "fail_below_pct": 10}
PLATEAU = 298.82  # the recording's slowest row at >= 1 GiB (best of out-of-place / in-place)


def scaled(factor: float) -> str:
    """The recording with the busbw of its rows at >= 1 GiB times `factor` (what the judge reads)."""
    out = []
    for line in data(A3MEGA).splitlines(keepends=True):
        cols = line.split()
        if len(cols) == 13 and cols[0].isdigit() and int(cols[0]) >= 1 << 30:
            for i in (7, 11):
                line = line.replace(cols[i], f"{float(cols[i]) * factor:.2f}", 1)
        out.append(line)
    return "".join(out)


# ---------------------------------------------------------------- nccl.allreduce_single


def single(speeds: dict[str, float], n: int = 8, **params) -> dict:
    """Every node's verdicts (node -> [Verdict]) after relative_single; 16 GPUs: the recording's ranks."""
    want = NcclSingle(**{"gpus": 16, "json_report": "off", **params})
    by_node = {}
    for i in range(1, n + 1):
        node = f"gpu{i:03d}"
        out = {}
        for p in nccl_allreduce.single_probes(want):
            out.update(captures(p, wrapped(scaled(speeds.get(node, 1.0)), 0)))
        by_node[node] = list(judge_single(out, want))
    return relative_single(by_node, want)


def test_a_node_15_percent_below_its_peers_fails_with_value_and_median():
    got = single({"gpu005": 0.85}, busbw_gbps={"fail_below": 200, "relative": RELATIVE})
    [v] = got["gpu005"]
    assert v.status is Status.FAIL and v.subject == "all_reduce"
    assert v.message == (
        "all_reduce: busbw 254 GB/s (>= 200 GB/s) at >= 1 GiB (slowest of 4 sizes), avg busbw 70.742 GB/s, "
        "16 ranks; all_reduce: busbw 254 GB/s, 15.0% below its peers' median 298.8 GB/s "
        "(MAD 0 GB/s, 7 peers, all_reduce, 16 GPUs)"
    )
    # the fixed judgment's observed stays (the sweep history reads busbw_plateau_gbs)
    assert v.observed["busbw_plateau_gbs"] == 254.0
    assert v.observed["relative"]["peers_median"] == PLATEAU and v.observed["relative"]["peers"] == 7
    assert v.expected["relative"]["min"] == pytest.approx(PLATEAU * 0.9)
    assert all(vs[0].status is Status.PASS for node, vs in got.items() if node != "gpu005")


def test_within_the_band_passes_and_7_percent_below_warns():
    got = single({"gpu002": 0.97}, busbw_gbps={"fail_below": 200, "relative": RELATIVE})
    assert {vs[0].status for vs in got.values()} == {Status.PASS}
    got = single({"gpu002": 0.93}, busbw_gbps={"fail_below": 200, "relative": RELATIVE})
    assert got["gpu002"][0].status is Status.WARN and "7.0% below its peers' median" in got["gpu002"][0].message


def test_fewer_peers_than_min_peers_leaves_only_the_fixed_floor():
    got = single({"gpu002": 0.5}, n=4, busbw_gbps={"fail_below": 100, "relative": RELATIVE})
    [v] = got["gpu002"]
    assert v.status is Status.PASS and "peers" not in v.message and "relative" not in v.observed


def test_without_relative_nothing_changes():
    got = single({"gpu005": 0.7}, busbw_gbps={"fail_below": 200})
    assert {vs[0].status for vs in got.values()} == {Status.PASS}
    assert "relative" not in got["gpu005"][0].observed


def test_variants_are_judged_apart_by_their_own_band():
    # network_only slower by design; only network_only has a relative band
    want = NcclSingle(
        gpus=16,
        variants=["default", "network_only"],
        busbw_gbps={"fail_below": 100},
        variant_busbw_gbps={"network_only": {"fail_below": 100, "relative": RELATIVE}},
    )
    by_node = {}
    for i in range(1, 9):
        out = {}
        for p in nccl_allreduce.single_probes(want):
            factor = 0.5 if "network_only" in p.name else 1.0
            factor *= 0.8 if i == 3 else 1.0  # gpu003 20 % slow in both
            out.update(captures(p, wrapped(scaled(factor), 0)))
        by_node[f"gpu{i:03d}"] = list(judge_single(out, want))
    got = relative_single(by_node, want)
    [default, network] = got["gpu003"]
    assert default.status is Status.PASS  # default has no relative band
    assert network.status is Status.FAIL and network.subject == "all_reduce (network only)"
    assert "below its peers' median 149.4 GB/s" in network.message
    assert network.observed["relative"] == {
        "busbw": 119.53,
        "peers_median": 149.41,
        "peers_mad": 0.0,
        "peers": 7,
        "below_median_pct": 20.0,
        "group": "all_reduce (network only), 16 GPUs",
    }


# ---------------------------------------------------------------- nccl.allreduce_multi


class PairSpeeds(ScriptedNccl):
    """The full test fails (16 ranks for 32: localized); a pair runs at outcome(a, b): a factor of
    the recording's busbw, or "fail"."""

    def run(self, probe, timeout_s):
        cmd = nccltest.command_words(probe.argv)
        hosts = [h.split(":")[0] for h in cmd[cmd.index("-H") + 1].split(",")]
        self.log.append((probe.name, tuple(hosts), probe.timeout_s))
        what = 1.0 if len(hosts) > 2 else self.outcome(*sorted(hosts))
        text = PAIR_FAIL if what == "fail" else wrapped(scaled(what), 0)
        return Capture(hosts[0], probe.name, probe.argv, Outcome.EXITED, 0, text, "", 0.01)


# what the localization says when every 2-node test passes the fixed floor
SCALE = (
    "every 2-node test passes: a problem that shows only at this scale (topology, a switch, NCCL settings), "
    "not one node"
)


def run_multi(n: int, outcome, **params):
    cluster = PairSpeeds(outcome)
    nodes = {f"node{i}": Node(f"node{i}", f"10.0.0.{i}") for i in range(1, n + 1)}
    tools = {x: {"nccl_tools": Capture(x, "nccl_tools", (), Outcome.EXITED, 0, TOOLS_OK, "", 0.0)} for x in nodes}
    ctx = CheckContext(
        "nccl.allreduce_multi",
        nodes,
        tools,
        CommandRunner(cluster, time.monotonic() + 3600, threading.Event()),
        order=list(nodes),
    )
    want = NcclMulti(**{"json_report": "off", **params})
    return list(nccl_allreduce.allreduce_multi(ctx, want))


def slow_node(node: str, factor: float):
    return lambda a, b: factor if node in (a, b) else 1.0


def relative_ones(grouped):
    return [(nodes, v) for nodes, v in grouped if "peers" in v.message]


def test_a_node_whose_pair_tests_lag_the_others_is_named_not_its_partners():
    band = {"fail_below": 200, "relative": RELATIVE}
    got = run_multi(8, slow_node("node5", 0.85), busbw_gbps=band)
    [(nodes, v)] = relative_ones(got)
    assert nodes == ("node5",) and v.status is Status.FAIL and v.subject == "all_reduce"
    assert v.message == (
        "all_reduce: slow node: below its peers with 2 partners that are not slow with others: "
        "node4+node5: busbw 254 GB/s, 15.0% below its peers' median 298.8 GB/s (MAD 0 GB/s, 7 peers, "
        "all_reduce 2-node tests); node5+node6: busbw 254 GB/s, 15.0% below its peers' median 298.8 GB/s "
        "(MAD 0 GB/s, 7 peers, all_reduce 2-node tests)"
    )
    # the fixed floor's localization is as before: every pair passes it, the full test's failure
    # (16 ranks of 32 in the scripted output) stays on every node
    [(nodes, v)] = [(n, v) for n, v in got if "peers" not in v.message]
    assert len(nodes) == 8 and v.message.endswith(SCALE)


def test_pairs_within_the_band_add_nothing():
    got = run_multi(8, slow_node("node5", 0.97), busbw_gbps={"fail_below": 200, "relative": RELATIVE})
    assert relative_ones(got) == []


def test_fewer_pair_tests_than_min_peers_leave_only_the_fixed_floor():
    # 4 nodes, ring: 4 pair tests, 3 peers each
    got = run_multi(4, slow_node("node2", 0.5), busbw_gbps={"fail_below": 100, "relative": RELATIVE})
    [(nodes, v)] = got
    assert nodes == ("node1", "node2", "node3", "node4") and v.message.endswith(SCALE)


def test_a_bad_nodes_pairs_are_not_compared_its_partners_stay_clean():
    def outcome(a, b):
        return "fail" if "node5" in (a, b) else 1.0

    got = run_multi(8, outcome, busbw_gbps={"fail_below": 200, "relative": RELATIVE})
    assert relative_ones(got) == []
    assert [n for n, v in got if v.status is not Status.PASS] == [("node5",)]


def test_the_pair_floor_carries_the_relative_band_for_the_pair_tests():
    got = run_multi(
        8,
        slow_node("node5", 0.85),
        busbw_gbps={"fail_below": 200},
        pair_busbw_gbps={"fail_below": 200, "relative": {"warn_below_pct": 5}},
    )
    [(nodes, v)] = relative_ones(got)
    assert nodes == ("node5",) and v.status is Status.WARN


# ---------------------------------------------------------------- playbooks


def write(tmp_path, text):
    p = tmp_path / "book.yml"
    p.write_text(textwrap.dedent(text))
    return p


def test_playbooks_with_relative_bands_validate(tmp_path):
    path = write(
        tmp_path,
        """\
        checks:
          nccl.allreduce_single:
            busbw_gbps: {fail_below: 300, relative: {warn_below_pct: 5, fail_below_pct: 10}}
            variant_busbw_gbps:
              network_only: {fail_below: 40, relative: {fail_below_pct: 15, min_peers: 8, mad_k: 2}}
          nccl.allreduce_multi:
            busbw_gbps: {fail_below: 300}
            pair_busbw_gbps: {fail_below: 300, relative: {warn_below_pct: 5, fail_below_pct: 10}}
        """,
    )
    single_check, multi_check = load_playbook(str(path)).checks
    assert single_check.params.floor("network_only").relative.min_peers == 8
    assert multi_check.params.pair_floor("default").relative.fail_below_pct == 10


def test_a_bad_relative_band_is_refused_at_its_line(tmp_path):
    path = write(
        tmp_path,
        """\
        checks:
          nccl.allreduce_single:
            busbw_gbps:
              fail_below: 300
              relative: {warn_below_pct: 20, fail_below_pct: 10}
        """,
    )
    with pytest.raises(ConfigError) as caught:
        load_playbook(str(path))
    assert caught.value.line in (3, 5), str(caught.value)
    assert "warn_below_pct (20) must be <= fail_below_pct (10)" in caught.value.message

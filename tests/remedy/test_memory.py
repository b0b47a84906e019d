"""Remediation's memory (nodecheck.remedy.memory, .past; the gate log's parser): rules over a node's
past hold it for a person rather than acting on it again."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import pytest

from nodecheck.config.remedy import Ladders, MemoryRule, RemedySettings, load_ladders
from nodecheck.gate.command import GateLog
from nodecheck.parsers.gatelog import parse_gate_log, parse_gate_log_line
from nodecheck.remedy.memory import GATE_LOG, SWEEP_HISTORY, held_by
from nodecheck.remedy.model import Past, Rise
from nodecheck.remedy.past import (
    MAX_BYTES,
    GateLogUnreadable,
    HistoryUnreadable,
    drain_starts,
    read_gate_log,
    read_past,
)
from tests.remedy.test_plan import LADDERS_YML, NOW, action, ours, remap
from tests.remedy.test_plan import one as plan_one

DRAINS = MemoryRule(name="drained-often", drains=3, within_h=168)
FLAPS = MemoryRule(name="ib-link-flapping", counter="LinkDownedCounter", rises=3, within_h=24)
BOTH = frozenset({GATE_LOG, SWEEP_HISTORY})


def ago(hours: float) -> datetime:
    return NOW - timedelta(hours=hours)


def line(at: datetime, action: str, node: str, mode: str = "health", **fields: str) -> str:
    extra = "".join(f' {k}="{v}"' for k, v in fields.items())
    return f"{at:%Y-%m-%dT%H:%M:%SZ} nodecheck[{mode}] action={action} node={node}{extra}"


# ---- the gate log's parser ----------------------------------------------------------------------


def test_the_parser_reads_back_the_lines_the_gate_log_writes(tmp_path, capsys):
    log = GateLog(str(tmp_path / "gate.log"), "prolog", job="41")
    log.event("drain", "node2", check="gpu.xid", reason='nodecheck[ab12]: gpu.xid Xid 48 "quoted"\nnext')
    log.event("resume", "node2", reason="")
    log.event("breaker", "-", message="5 of 8 nodes failed")
    read = parse_gate_log((tmp_path / "gate.log").read_text())
    assert [(e.mode, e.action, e.node) for e in read.events] == [
        ("prolog", "drain", "node2"),
        ("prolog", "resume", "node2"),
        ("prolog", "breaker", "-"),
    ]
    assert read.unparsed == 0
    assert all(abs((e.at - datetime.now(timezone.utc)).total_seconds()) < 3600 for e in read.events)


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        "2026-12-07T10:00:00Z nodecheck[health] action=drain",  # no node
        "2026-13-45T10:00:00Z nodecheck[health] action=drain node=n1",  # a stamp's shape, not a time
        "2026-12-07T10:00:00Z other[health] action=drain node=n1",
        "2026-12-07T10:00:00Z nodecheck[health] action=drain node=n1" + " x" * 10_000,  # longer than any we write
    ],
)
def test_a_line_that_is_not_an_event_is_counted_never_guessed_at(text):
    assert parse_gate_log_line(text) is None
    assert parse_gate_log(text + "\n").unparsed == 1


# ---- drains, as the gate log tells them ---------------------------------------------------------


def test_a_drain_counts_once_until_the_node_is_resumed_refreshes_and_still_drained_do_not():
    text = "\n".join(
        [
            line(ago(100), "drain", "n1"),
            line(ago(99), "still-drained", "n1"),
            line(ago(98), "drain", "n1", reason="refreshed: another check"),
            line(ago(50), "resume", "n1"),
            line(ago(40), "would-drain", "n1", mode="prolog"),  # observe: nothing was drained
            line(ago(30), "drain", "n1", mode="sweep"),
            line(ago(29), "drain", "n2"),
            line(ago(20), "resume", "n1"),
            line(ago(2), "still-drained", "n1"),  # drained again, by someone whose log this is not: first seen
        ]
    )
    starts = drain_starts(text, ["n1", "n3"])
    assert starts == {"n1": (ago(100), ago(30), ago(2))}


# ---- the rules ----------------------------------------------------------------------------------


def test_three_drains_within_the_window_match_two_or_an_older_one_do_not():
    three = Past(drains=(ago(160), ago(80), ago(1)), read=BOTH)
    why = held_by(three, [DRAINS], NOW)
    assert why == (
        "drained 3 times within 7 days (2026-11-30 20:00:00Z, 2026-12-04 04:00:00Z, 2026-12-07 11:00:00Z; "
        "memory rule drained-often: 3 or more)"
    )
    assert held_by(Past(drains=(ago(80), ago(1)), read=BOTH), [DRAINS], NOW) == ""
    assert held_by(Past(drains=(ago(170), ago(80), ago(1)), read=BOTH), [DRAINS], NOW) == ""


def test_a_counter_rule_counts_the_sweeps_one_port_rose_in_within_the_window():
    rises = (
        Rise(ago(20), "mlx5_0/1", "LinkDownedCounter"),
        Rise(ago(12), "mlx5_0/1", "LinkDownedCounter"),
        Rise(ago(12), "mlx5_1/1", "LinkDownedCounter"),
        Rise(ago(12), "mlx5_0/1", "SymbolErrorCounter"),
        Rise(ago(1), "mlx5_0/1", "LinkDownedCounter"),
    )
    why = held_by(Past(rises=rises, read=BOTH), [FLAPS], NOW)
    assert why == (
        "port mlx5_0/1: LinkDownedCounter rose in 3 sweeps within 24 h (the last 2026-12-07 11:00:00Z; "
        "memory rule ib-link-flapping: 3 or more)"
    )
    # spread over two ports, or one rise out of the window: no match
    assert held_by(Past(rises=rises[1:], read=BOTH), [FLAPS], NOW) == ""
    older = (Rise(ago(30), "mlx5_0/1", "LinkDownedCounter"), *rises[1:])
    assert held_by(Past(rises=older, read=BOTH), [FLAPS], NOW) == ""


def test_a_rule_whose_source_was_not_read_matches_nothing():
    past = Past(drains=(ago(3), ago(2), ago(1)), read=frozenset({SWEEP_HISTORY}))
    assert held_by(past, [DRAINS], NOW) == ""


# ---- in the plan ----------------------------------------------------------------------------------

MEMORY_YML = LADDERS_YML + "memory:\n  - {name: drained-often, drains: 3, within_h: 168}\n"


@pytest.fixture
def remembering(tmp_path) -> Ladders:
    path = tmp_path / "ladders.yml"
    path.write_text(MEMORY_YML, encoding="utf-8")
    return load_ladders(path, ["gpu.health", "gpu.xid", "services"])


def test_a_node_drained_three_times_in_a_week_is_held_rather_than_reset_again(remembering):
    past = {"n1": Past(drains=(ago(100), ago(50), ago(1)), read=BOTH)}
    p = plan_one([remap("n1")], ours(), ladders_=remembering, past=past)
    assert p.verb == "hold"
    assert p.why.startswith("needs a person: drained 3 times within 7 days")
    assert p.why.endswith(
        "and failing again: gpu.health GPU3: row remap pending (correctable 0, uncorrectable 1); "
        "reset the GPU before the next job"
    )


def test_twice_in_a_week_the_ladder_still_acts(remembering):
    past = {"n1": Past(drains=(ago(50), ago(1)), read=BOTH)}
    p = plan_one([remap("n1")], ours(), ladders_=remembering, past=past)
    assert (p.verb, p.action) == ("act", "reset_gpu GPU3")


def test_memory_never_makes_a_plan_bolder_a_node_the_ladder_holds_keeps_the_ladders_why(remembering):
    past = {"n1": Past(drains=(ago(100), ago(50), ago(1)), read=BOTH)}
    used_up = [action(3, "reset_gpu"), action(2, "reboot")]
    p = plan_one(
        [remap("n1")], ours(), used_up, ladders_=remembering, past=past, settings=RemedySettings(max_actions=5)
    )
    assert p.verb == "hold"
    assert "ladder gpu-remap-pending" in p.why and "drained 3 times" not in p.why


# ---- reading the gate log -------------------------------------------------------------------------


def test_the_gate_log_is_read_bounded_from_its_newest_whole_line(tmp_path):
    path = tmp_path / "gate.log"
    old = line(ago(150), "drain", "n1") + "\n"
    new = line(ago(1), "drain", "n1") + "\n"
    with open(path, "w") as f:
        f.write(old * (MAX_BYTES // len(old) + 10))
        f.write(line(ago(2), "resume", "n1") + "\n" + new)
    os.chmod(path, 0o640)
    text = read_gate_log(str(path))
    assert len(text.encode()) <= MAX_BYTES
    assert text.endswith(new)
    assert parse_gate_log(text).unparsed == 0  # the cut first line was dropped, not parsed


def test_a_missing_gate_log_is_an_empty_past(tmp_path):
    assert read_gate_log(str(tmp_path / "none.log")) == ""


def test_a_gate_log_behind_a_symlink_is_not_followed(tmp_path):
    real = tmp_path / "real.log"
    real.write_text(line(ago(1), "drain", "n1") + "\n")
    (tmp_path / "gate.log").symlink_to(real)
    with pytest.raises(GateLogUnreadable, match="cannot be read"):
        read_gate_log(str(tmp_path / "gate.log"))


def test_a_gate_log_others_could_write_is_not_roots_word(tmp_path):
    path = tmp_path / "gate.log"
    path.write_text(line(ago(1), "drain", "n1") + "\n")
    os.chmod(path, 0o666)
    with pytest.raises(GateLogUnreadable, match=r"not root's word.*writable by group and others"):
        read_gate_log(str(path))


def test_read_past_says_what_it_could_not_read_and_those_rules_match_nothing(tmp_path):
    path = tmp_path / "gate.log"
    path.write_text("".join(line(ago(h), a, "n1") + "\n" for h, a in ((9, "drain"), (8, "resume")) * 3))
    os.chmod(path, 0o662)

    def broken(nodes, counters, since):
        raise HistoryUnreadable("history.sqlite: database disk image is malformed")

    got = read_past(["n1"], [DRAINS, FLAPS], NOW, gate_log=str(path), rises_of=broken)
    assert got.past["n1"] == Past()
    assert len(got.problems) == 2
    assert "not root's word" in got.problems[0]
    assert got.problems[1] == "the sweep history could not be read: history.sqlite: database disk image is malformed"


def test_read_past_asks_the_history_for_the_rules_counters_over_the_longest_window(tmp_path):
    asked = []

    def rises_of(nodes, counters, since):
        asked.append((list(nodes), list(counters), since))
        return {"n1": [Rise(ago(1), "mlx5_0/1", "LinkDownedCounter")]}

    wide = MemoryRule(name="symbols", counter="SymbolErrorCounter", rises=5, within_h=48)
    got = read_past(["n1", "n2"], [FLAPS, wide], NOW, gate_log=None, rises_of=rises_of)
    assert asked == [(["n1", "n2"], ["LinkDownedCounter", "SymbolErrorCounter"], ago(48))]
    assert got.past["n1"].rises == (Rise(ago(1), "mlx5_0/1", "LinkDownedCounter"),)
    assert got.past["n2"] == Past(read=frozenset({SWEEP_HISTORY}))
    assert got.problems == ()

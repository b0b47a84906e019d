"""The sweep history as the remediation memory rules read it (nodecheck.fleet.memory): the sweeps in
which a node's counter rose on one port, from a real SQLite history."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from nodecheck.config.remedy import MemoryRule
from nodecheck.fleet.history import History
from nodecheck.fleet.memory import counter_rises, rises_in
from nodecheck.remedy.memory import held_by
from nodecheck.remedy.past import HistoryUnreadable, read_past
from nodecheck.report.diff import CounterRow
from tests.fleet.test_history import snap_of
from tests.report.test_diff import T0

FLAPS = MemoryRule(name="ib-link-flapping", counter="LinkDownedCounter", rises=3, within_h=24)


def link_downed(node: str, value: int, boot: str = "boot-1", port: str = "mlx5_0/1") -> CounterRow:
    return CounterRow(node, port, "LinkDownedCounter", value, boot, "perfquery -x")


def history_of(tmp_path, per_sweep: list[list[CounterRow]]) -> History:
    """One sweep an hour from T0, each keeping the rows given."""
    h = History.open(tmp_path / "h.sqlite")
    for hour, rows in enumerate(per_sweep):
        h.record(snap_of(f"s{hour}", hour, [], counters=rows, nodes=("node1", "node2")), None, "0.6.0")
    return h


def sweep_end(hour: int):
    return T0 + timedelta(hours=hour, minutes=5)


def test_a_port_whose_link_downed_rose_in_three_sweeps_of_a_day_holds_the_node(tmp_path):
    values = [0, 1, 1, 2, 5]  # rose in sweeps 1, 3 and 4
    with history_of(tmp_path, [[link_downed("node1", v), link_downed("node2", 0)] for v in values]) as h:
        now = sweep_end(4)
        got = read_past(["node1", "node2"], [FLAPS], now, gate_log=None, rises_of=rises_in(h))
    assert [(r.at, r.port) for r in got.past["node1"].rises] == [
        (sweep_end(1), "mlx5_0/1"),
        (sweep_end(3), "mlx5_0/1"),
        (sweep_end(4), "mlx5_0/1"),
    ]
    assert got.past["node2"].rises == ()
    why = held_by(got.past["node1"], [FLAPS], now)
    assert why.startswith("port mlx5_0/1: LinkDownedCounter rose in 3 sweeps within 24 h")
    assert held_by(got.past["node2"], [FLAPS], now) == ""


def test_a_reboot_or_a_cleared_counter_is_not_a_rise_and_the_window_is_kept(tmp_path):
    rows = [
        [link_downed("node1", 4)],
        [link_downed("node1", 0, boot="boot-2")],  # rebooted: counters restart at zero
        [link_downed("node1", 1, boot="boot-2")],  # a rise
        [link_downed("node1", 0, boot="boot-2")],  # cleared (perfquery -R)
        [link_downed("node1", 2, boot="boot-2")],  # a rise
    ]
    with history_of(tmp_path, rows) as h:
        assert [r.at for r in rises_in(h)(["node1"], ["LinkDownedCounter"], T0)["node1"]] == [
            sweep_end(2),
            sweep_end(4),
        ]
        # the window starts after sweep 2: its rise (from sweep 1, before the window) is out
        assert [r.at for r in rises_in(h)(["node1"], ["LinkDownedCounter"], sweep_end(3))["node1"]] == [sweep_end(4)]


def test_the_first_sweep_in_the_window_rises_from_the_one_before_it(tmp_path):
    with history_of(tmp_path, [[link_downed("node1", 0)], [link_downed("node1", 3)]]) as h:
        found = rises_in(h)(["node1"], ["LinkDownedCounter"], sweep_end(1))
    assert [r.at for r in found["node1"]] == [sweep_end(1)]


def test_a_sweep_that_did_not_read_the_node_neither_rises_nor_hides_a_rise():
    sweeps = [
        (sweep_end(0), [link_downed("node1", 0)]),
        (sweep_end(1), [link_downed("node2", 7)]),  # node1 not read this time
        (sweep_end(2), [link_downed("node1", 2)]),
    ]
    found = counter_rises(sweeps, T0)
    assert [(r.at, r.counter) for r in found["node1"]] == [(sweep_end(2), "LinkDownedCounter")]
    assert "node2" not in found


def test_only_the_counters_asked_for_are_read(tmp_path):
    symbol = CounterRow("node1", "mlx5_0/1", "SymbolErrorCounter", 1, "boot-1", "perfquery -x")
    rising = [[link_downed("node1", 0), symbol], [link_downed("node1", 0), replace(symbol, value=9)]]
    with history_of(tmp_path, rising) as h:
        assert rises_in(h)(["node1"], ["LinkDownedCounter"], T0) == {}


def test_a_damaged_history_is_said_never_an_empty_past(tmp_path):
    path = tmp_path / "h.sqlite"
    with history_of(tmp_path, [[link_downed("node1", 0)]]) as h:
        h.conn.execute("DROP TABLE counters")
        with pytest.raises(HistoryUnreadable, match="no such table: counters"):
            rises_in(h)(["node1"], ["LinkDownedCounter"], T0)
    assert path.exists()

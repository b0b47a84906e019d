"""`nodecheck history`: a node's or a check's results per sweep, and with --show the versions, IB
error counters and measurements the sweeps kept, read from a history the store wrote."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from nodecheck import cli
from nodecheck.core.errors import ConfigError
from nodecheck.fleet.history import History
from nodecheck.report import diff as D
from nodecheck.report.diff import CounterRow
from tests.fleet.test_history import recorded
from tests.report.test_diff import T1, current_report, previous_report


def history(tmp_path, capsys, *argv):
    args = cli.build_parser().parse_args(["history", "--history", str(tmp_path / "h.sqlite"), *argv])
    from nodecheck.fleet.history_command import history_command

    code = history_command(args)
    return code, capsys.readouterr().out


def test_history_of_a_node_one_row_per_sweep_with_the_evidence(tmp_path, capsys):
    recorded(tmp_path, previous_report(), current_report())
    code, out = history(tmp_path, capsys, "--node", "node3")
    assert code == 0
    assert out.splitlines() == [
        "history of node node3, last 2 sweeps (oldest first):",
        "started (UTC)         run id                  status       detail" + " " * 73 + "report",
        "--------------------  ----------------------  -----------  " + "-" * 77 + "  ---------",
        "2026-11-29 10:00:00Z  20261129T100000Z_sweep  unreachable  ib.ports unreachable: unreachable: connection "
        "refused by node3:22; gpu.health  reports/x",
        " " * 59 + "unreachable: unreachable: connection refused by node3:22",
        "2026-11-29 11:02:30Z  20261129T110230Z_sweep  fail         cuda.version fail: no CUDA driver"
        + " " * 46
        + "reports/x",
    ]
    code, out = history(tmp_path, capsys, "--node", "node4", "--check", "gpu.health", "--format", "json")
    doc = json.loads(out)
    assert [(s["run_id"], s["status"]) for s in doc["sweeps"]] == [
        ("20261129T100000Z_sweep", "fail"),
        ("20261129T110230Z_sweep", "not checked"),
    ]
    assert doc["sweeps"][0]["results"] == [
        {
            "node": "node4",
            "check": "gpu.health",
            "status": "fail",
            "subject": "GPU3",
            "message": "GPU3: row remap pending",
        }
    ]


def test_history_of_a_check_folds_the_nodes_and_of_everything_counts_them(tmp_path, capsys):
    recorded(tmp_path, previous_report(), current_report())
    _, out = history(tmp_path, capsys, "--check", "ib.ports", "--last", "1")
    assert out.splitlines()[0] == "history of check ib.ports, last 1 sweeps (oldest first):"
    assert out.splitlines()[3].split("  ")[:3] == ["2026-11-29 11:02:30Z", "20261129T110230Z_sweep", "fail"]
    assert "node1 fail: mlx5_5/1: rate 200 Gb/s, expected >= 400 Gb/s; node[2-3,5] pass" in out
    _, out = history(tmp_path, capsys, "--format", "json")
    assert [s["nodes"] for s in json.loads(out)["sweeps"]] == [{"warn": 1, "unreachable": 1, "fail": 2}, {"fail": 4}]


def test_history_without_a_database_or_with_an_unknown_node_is_bad_input(tmp_path, capsys):
    with pytest.raises(ConfigError) as caught:
        history(tmp_path, capsys)
    assert str(caught.value) == (
        f"--history: no sweep history at {tmp_path / 'h.sqlite'}; hint: `nodecheck sweep "
        "INVENTORY --output-dir DIR` writes DIR/history.sqlite (or its --history DB); "
        "point --history at that file"
    )
    recorded(tmp_path, previous_report())
    with pytest.raises(ConfigError) as caught:
        history(tmp_path, capsys, "--node", "nod3")
    assert caught.value.hint == "did you mean 'node3'?" and caught.value.file == "--node"
    assert cli.main(["history", "--history", str(tmp_path / "h.sqlite"), "--check", "ib.port"]) == 64
    assert "did you mean 'ib.ports'?" in capsys.readouterr().err


def test_history_marks_a_sweep_the_deadline_cut(tmp_path, capsys):
    cut = replace(
        current_report(),
        run_id="20261129T120000Z_sweep",
        started=T1 + timedelta(hours=1),
        complete=False,
        incomplete_reason="the run deadline was reached",
    )
    recorded(tmp_path, current_report(), cut)
    _, out = history(tmp_path, capsys, "--node", "node2", "--check", "node.oom")
    rows = out.splitlines()[3:]
    assert [("(sweep cut short) fail: OOM killed" in row, row.split()[3]) for row in rows] == [
        (False, "fail"),
        (True, "fail"),
    ]


# ---------------------------------------------------------------- history --show versions|counters|measurements


def test_history_shows_versions_with_a_change_marked_against_the_sweep_before(tmp_path, capsys):
    recorded(tmp_path, previous_report(), current_report())
    code, out = history(tmp_path, capsys, "--show", "versions", "--last", "1")
    assert code == 0
    assert out.splitlines() == [  # --last 1: the sweep before the window still says what changed
        "versions of all nodes, last 1 sweeps (oldest first):",
        "started (UTC)         run id                  nodes      check         value    change",
        "--------------------  ----------------------  ---------  ------------  -------  -----------------------",
        "2026-11-29 11:02:30Z  20261129T110230Z_sweep  node[1-2]  nccl.version  2.23.5   <- changed (was 2.23.4)",
        "2026-11-29 11:02:30Z  20261129T110230Z_sweep  node3      nccl.version  2.23.5",  # unreachable before
        "2026-11-29 11:02:30Z  20261129T110230Z_sweep  node5      nccl.version  2.23.4",
    ]  # new node
    _, out = history(
        tmp_path, capsys, "--show", "versions", "--node", "node2", "--check", "nccl.version", "--format", "json"
    )
    doc = json.loads(out)
    assert (doc["show"], doc["node"], doc["check"]) == ("versions", "node2", "nccl.version")
    assert [s["versions"] for s in doc["sweeps"]] == [
        [{"node": "node2", "key": "nccl.version", "value": "2.23.4", "was": None, "changed": False}],
        [{"node": "node2", "key": "nccl.version", "value": "2.23.5", "was": "2.23.4", "changed": True}],
    ]


def test_history_shows_counters_rises_resets_by_the_diffs_rule_zeros_summed_up(tmp_path, capsys):
    recorded(tmp_path, previous_report(), current_report())
    _, out = history(tmp_path, capsys, "--show", "counters", "--node", "node1")
    assert out.splitlines() == [
        "error counters of node node1, last 2 sweeps (oldest first):",
        "started (UTC)         run id                  port      counter             value    change",
        "--------------------  ----------------------  --------  ------------------  -------  " + "-" * 35,
        "2026-11-29 10:00:00Z  20261129T100000Z_sweep  mlx5_0/1  SymbolErrorCounter  5",
        "2026-11-29 10:00:00Z  20261129T100000Z_sweep  mlx5_1/1  LinkDownedCounter   5",
        "2026-11-29 10:00:00Z  20261129T100000Z_sweep  mlx5_2/1  LinkDownedCounter   3",
        "2026-11-29 10:00:00Z  20261129T100000Z_sweep  (others)  1 counter           0",  # mlx5_0/1 LinkDowned
        "2026-11-29 11:02:30Z  20261129T110230Z_sweep  mlx5_0/1  LinkDownedCounter   1        +1 (was 0)",
        "2026-11-29 11:02:30Z  20261129T110230Z_sweep  mlx5_0/1  SymbolErrorCounter  50       +45 (was 5)",
        "2026-11-29 11:02:30Z  20261129T110230Z_sweep  mlx5_1/1  LinkDownedCounter   9"
        "        not compared: another source",
        "2026-11-29 11:02:30Z  20261129T110230Z_sweep  mlx5_2/1  LinkDownedCounter   0"
        "        went down (was 3): cleared or reset",
    ]
    # --check names a counter or a port; node2 rebooted between the sweeps (boot-2 -> boot-2b)
    _, out = history(tmp_path, capsys, "--show", "counters", "--check", "SymbolErrorCounter", "--format", "json")
    sweeps = json.loads(out)["sweeps"]
    assert [[(c["node"], c["value"], c["was"], c["change"]) for c in s["counters"]] for s in sweeps] == [
        [("node1", 5, None, None), ("node2", 7, None, None)],
        [("node1", 50, 5, "rise"), ("node2", 0, 7, "reboot")],
    ]
    _, out = history(tmp_path, capsys, "--show", "counters", "--check", "mlx5_2/1", "--last", "1")
    assert out.splitlines()[3:] == [
        "2026-11-29 11:02:30Z  20261129T110230Z_sweep  node1    mlx5_2/1  LinkDownedCounter"
        "  0        went down (was 3): cleared or reset"
    ]


def test_history_shows_a_saturated_64_bit_counter_exactly(tmp_path, capsys):
    snap = D.snapshot(previous_report())
    rows = [
        CounterRow("node1", "mlx5_0/1", "SymbolErrorCounter", v, "boot-1", "perfquery -x")
        for v in (2**64 - 2, 2**64 - 1)
    ]
    with History.open(tmp_path / "h.sqlite") as h:
        h.record(replace(snap, counters=(rows[0],)), None)
        h.record(replace(snap, run_id="later", started=T1, counters=(rows[1],)), None)
    _, out = history(tmp_path, capsys, "--show", "counters", "--last", "1", "--format", "json")
    [item] = json.loads(out)["sweeps"][0]["counters"]
    assert (item["value"], item["was"], item["change"]) == (18446744073709551615, 18446744073709551614, "rise")
    _, out = history(tmp_path, capsys, "--show", "counters", "--last", "1")
    assert out.splitlines()[3].split("  ")[-2:] == ["18446744073709551615", "+1 (was 18446744073709551614)"]


def test_history_shows_measurements_and_a_sweep_that_kept_none(tmp_path, capsys):
    recorded(tmp_path, previous_report(), current_report())
    _, out = history(tmp_path, capsys, "--show", "measurements", "--node", "node1")
    assert out.splitlines() == [
        "measurements of node node1, last 2 sweeps (oldest first):",
        "started (UTC)         run id                  check                   measurement       subject     value",
        "--------------------  ----------------------  ----------------------"
        "  ----------------  ----------  ----------",
        "2026-11-29 10:00:00Z  20261129T100000Z_sweep  not read in this sweep",
        "2026-11-29 11:02:30Z  20261129T110230Z_sweep  nccl.allreduce_single"
        "   busbw             all_reduce  452.1 GB/s",
        "2026-11-29 11:02:30Z  20261129T110230Z_sweep  ib.pairs"
        "                ib_write_bw_best  mlx5_0      391.5 Gb/s",
    ]
    _, out = history(
        tmp_path, capsys, "--show", "measurements", "--check", "ib.pairs", "--last", "1", "--format", "json"
    )
    assert json.loads(out)["sweeps"][0]["measurements"] == [
        {"node": n, "check": "ib.pairs", "name": "ib_write_bw_best", "subject": "mlx5_0", "value": v, "unit": "Gb/s"}
        for n, v in (("node1", 391.5), ("node2", 391.5), ("node3", 120.0))
    ]


@pytest.mark.parametrize(
    "argv, flag, message, hint",
    [
        (
            ["--show", "versions", "--check", "nccl.versoin"],
            "--check",
            "no versions for check 'nccl.versoin' in the last 2 sweeps",
            "did you mean 'nccl.version'?",
        ),
        (
            ["--show", "versions", "--check", "cuda.version"],
            "--check",  # a real check, just not recorded
            "no versions for check 'cuda.version' in the last 2 sweeps",
            "recorded there: nccl.version",
        ),
        (
            ["--show", "counters", "--node", "node3"],
            "--node",  # a node, not one with counters
            "no error counters for node 'node3' in the last 2 sweeps",
            "3 nodes have error counters there; its statuses: --show results",
        ),
        (
            ["--show", "counters", "--node", "node4", "--check", "SymbolErrorCounter"],
            "--check",
            "no error counters for counter or port 'SymbolErrorCounter' on node 'node4' in the last 2 sweeps",
            "that node's: LinkDownedCounter, mlx5_0/1",
        ),
        (
            ["--show", "measurements", "--node", "node1", "--last", "1", "--check", "ib.pair"],
            "--check",
            "no measurements for check 'ib.pair' in the last 1 sweeps",
            "did you mean 'ib.pairs'?",
        ),
    ],
)
def test_history_show_a_filter_that_matches_nothing_is_bad_input(tmp_path, capsys, argv, flag, message, hint):
    recorded(tmp_path, previous_report(), current_report())
    with pytest.raises(ConfigError) as caught:
        history(tmp_path, capsys, *argv)
    assert (caught.value.file, caught.value.message, caught.value.hint) == (
        flag,
        f"{message} of {tmp_path / 'h.sqlite'}",
        hint,
    )
    assert cli.main(["history", "--history", str(tmp_path / "h.sqlite"), *argv]) == 64
    assert f"nodecheck: error: {flag}: {message}" in capsys.readouterr().err


def test_history_show_says_which_checks_keep_what_no_sweep_kept(tmp_path, capsys):
    recorded(tmp_path, previous_report())
    with pytest.raises(ConfigError) as caught:
        history(tmp_path, capsys, "--show", "measurements", "--node", "node1")
    assert str(caught.value) == (
        f"--show: no measurements in the last 1 sweeps of {tmp_path / 'h.sqlite'}; hint: kept "
        "by gpu.perf, ib.pairs and nccl.allreduce_*: none read in these sweeps"
    )
    with pytest.raises(ConfigError) as caught:  # a node typo: as for results
        history(tmp_path, capsys, "--show", "versions", "--node", "nod1")
    assert caught.value.hint == "did you mean 'node1'?"
    _, out = history(tmp_path, capsys, "--show", "measurements")  # no filter: the sweep says it kept none
    assert out.splitlines()[3] == "2026-11-29 10:00:00Z  20261129T100000Z_sweep  -        not read in this sweep"
    assert cli.build_parser().parse_args(["history"]).show == "results"

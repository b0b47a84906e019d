"""`nodecheck history --show actions`: what remediation did to each node and how it went, and each
node's mean time between incidents, read from the action records (nodecheck.remedy.record)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import pytest

from nodecheck import cli
from nodecheck.core.errors import ConfigError
from nodecheck.remedy import record
from nodecheck.remedy.model import Entry

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
EVIDENCE = "/reports/20261201T000000Z_remedy/evidence/node2"


def at(days: float = 0, minutes: float = 0) -> datetime:
    return T0 + timedelta(days=days, minutes=minutes)


def act(when: datetime, action: str, outcome: str, detail: str, target: str = "", ladder: str = "xid-79") -> Entry:
    return Entry(when, "action", action, target, ladder, "gpu.health", outcome, detail, EVIDENCE)  # type: ignore[arg-type]


def node2_record() -> list[Entry]:
    """Three incidents (days 0, 2 and 6.4: 3.2 days apart on average), each action written pending
    first and then with its outcome, as the executor writes them."""
    return [
        act(at(0), "reset_gpu", "pending", "gpu.health: GPU3 Xid 79", "3"),
        act(at(0, 1), "reset_gpu", "done", "GPU 00000000:3B:00.0 was reset", "3"),
        Entry(at(0, 10), "returned", detail="re-proven: every check passes"),
        act(at(2), "reboot", "pending", "gpu.health: GPU3 Xid 79"),
        act(at(2, 5), "reboot", "failed", "scontrol reboot failed: timed out"),
        act(at(2, 60), "restart_service", "pending", "nvlink down", "nvidia-fabricmanager", "nvlink"),
        act(
            at(2, 61),
            "restart_service",
            "refused",
            "the node's idle guard refused: a job runs",
            "nvidia-fabricmanager",
            "nvlink",
        ),
        Entry(at(2, 120), "held", check="gpu.health", detail="needs a person: the ladder is spent", evidence=EVIDENCE),
        act(at(6.4), "reset_gpu", "pending", "gpu.health: GPU3 Xid 79", "3"),
        act(at(6.4, 1), "reset_gpu", "done", "x" * 300, "3"),
    ]


@pytest.fixture
def records(tmp_path):
    state = tmp_path / "remedy"
    record.append(state, "node2", node2_record())
    record.append(state, "node10", [act(at(1), "reset_gpu", "failed", "exit 3: no such GPU", "0")])
    record.append(
        state, "node3", [act(at(1), "reboot", "done", "Slurm: IDLE, the node booted"), Entry(at(1, 30), "held")]
    )
    return state


def history(tmp_path, capsys, *argv):
    """No sweep history exists at --history: the actions view must not need one."""
    args = cli.build_parser().parse_args(
        ["history", "--history", str(tmp_path / "h.sqlite"), "--show", "actions", *argv]
    )
    from nodecheck.fleet.history_command import history_command

    code = history_command(args)
    return code, capsys.readouterr().out


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_a_nodes_actions_each_with_its_outcome_then_its_incidents_and_mtbi(tmp_path, capsys, records):
    code, out = history(tmp_path, capsys, "--records", str(records), "--node", "node2")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"action record of node node2 in {records}, newest 10 entries (oldest first):"
    assert cells(lines[1]) == ["time (UTC)", "event", "action", "outcome", "ladder", "detail", "evidence"]
    assert [cells(line) for line in lines[3:9]] == [  # a pending entry and its outcome: one row, at its start
        [
            "2026-12-01 00:00:00Z",
            "action",
            "reset_gpu GPU3",
            "done",
            "xid-79",
            "GPU 00000000:3B:00.0 was reset",
            EVIDENCE,
        ],
        ["2026-12-01 00:10:00Z", "returned", "re-proven: every check passes"],
        ["2026-12-03 00:00:00Z", "action", "reboot", "failed", "xid-79", "scontrol reboot failed: timed out", EVIDENCE],
        [
            "2026-12-03 01:00:00Z",
            "action",
            "restart_service nvidia-fabricmanager",
            "refused",
            "nvlink",
            "the node's idle guard refused: a job runs",
            EVIDENCE,
        ],
        ["2026-12-03 02:00:00Z", "held", "needs a person: the ladder is spent", EVIDENCE],
        ["2026-12-07 09:36:00Z", "action", "reset_gpu GPU3", "done", "xid-79", "x" * 59 + "…", EVIDENCE],
    ]
    assert lines[9:] == [
        "node2: 3 incidents; actions: 2 done, 1 failed, 1 refused; mean time between incidents 3.2 days; not held now"
    ]


def test_every_node_in_natural_order_the_newest_entries_and_a_summary_each(tmp_path, capsys, records):
    _, out = history(tmp_path, capsys, "--records", str(records), "--last", "1")
    lines = out.splitlines()
    assert lines[0] == f"action records in {records}, newest 1 entries per node (oldest first):"
    named = [line for line in lines if re.match(r"^node\d+(:|$)", line)]
    assert named == [
        "node2",
        "node2: 3 incidents; actions: 2 done, 1 failed, 1 refused; mean time between incidents 3.2 days; not held now",
        "node3",
        "node3: 1 incident; actions: 1 done, 0 failed, 0 refused; mean time between incidents —; held now",
        "node10",
        "node10: 1 incident; actions: 0 done, 1 failed, 0 refused; mean time between incidents —; not held now",
    ]
    assert "(5 earlier entries not shown: --last N shows more)" in lines
    assert [cells(line)[:3] for line in lines if line.startswith("2026-")] == [
        ["2026-12-07 09:36:00Z", "action", "reset_gpu GPU3"],
        ["2026-12-02 00:30:00Z", "held"],
        ["2026-12-02 00:00:00Z", "action", "reset_gpu GPU0"],
    ]


def test_an_unreadable_record_is_that_nodes_error_line_never_skipped(tmp_path, capsys, records):
    (records / "node4.jsonl").write_text("garbage\n")
    code, out = history(tmp_path, capsys, "--records", str(records))
    assert code == 0
    (line,) = [line for line in out.splitlines() if line.startswith("node4")]
    assert line.startswith(f"node4: its action record cannot be read: {records / 'node4.jsonl'}: line 1 of the newest")
    assert out.index("node3:") < out.index("node4:") < out.index("node10\n")
    _, out = history(tmp_path, capsys, "--records", str(records), "--node", "node4", "--format", "json")
    (node,) = json.loads(out)["nodes"]
    assert node["node"] == "node4" and node["entries"] == [] and node["mtbi_s"] is None
    assert node["error"].startswith(f"{records / 'node4.jsonl'}: line 1 of the newest is not a record entry")


def test_json_has_every_node_its_entries_counts_mtbi_and_hold(tmp_path, capsys, records):
    _, out = history(tmp_path, capsys, "--records", str(records), "--format", "json")
    doc = json.loads(out)
    assert doc["records"] == str(records)
    assert [n["node"] for n in doc["nodes"]] == ["node2", "node3", "node10"]
    node2 = doc["nodes"][0]
    assert {k: node2[k] for k in ("incidents", "actions", "mtbi_s", "held", "error")} == {
        "incidents": 3,
        "actions": {"done": 2, "failed": 1, "refused": 1},
        "mtbi_s": 3.2 * 86400,
        "held": False,
        "error": None,
    }
    assert len(node2["entries"]) == 6
    assert node2["entries"][0] == {
        "at": "2026-12-01T00:00:00Z",
        "finished": "2026-12-01T00:01:00Z",
        "event": "action",
        "action": "reset_gpu",
        "target": "3",  # as recorded (and as `remediate --json` gives it)
        "outcome": "done",
        "ladder": "xid-79",
        "check": "gpu.health",
        "detail": "GPU 00000000:3B:00.0 was reset",
        "evidence": EVIDENCE,
    }
    assert node2["entries"][-1]["detail"] == "x" * 300  # bounded in the table only
    assert node2["not_shown"] == 0
    assert doc["nodes"][1]["held"] is True and doc["nodes"][1]["mtbi_s"] is None


def test_an_action_still_under_way_shows_pending(tmp_path, capsys):
    state = tmp_path / "remedy"
    record.append(state, "node2", [act(at(0), "reboot", "pending", "gpu.health: GPU3 Xid 79")])
    _, out = history(tmp_path, capsys, "--records", str(state))
    assert cells(out.splitlines()[5])[:4] == ["2026-12-01 00:00:00Z", "action", "reboot", "pending"]
    assert "node2: 1 incident; actions: 0 done, 0 failed, 0 refused;" in out


def test_an_unknown_node_is_bad_input_with_the_nearest_name(tmp_path, capsys, records):
    with pytest.raises(ConfigError) as caught:
        history(tmp_path, capsys, "--records", str(records), "--node", "nod2")
    assert caught.value.file == "--node" and caught.value.hint == "did you mean 'node2'?"
    assert str(records) in str(caught.value)
    argv = ["history", "--show", "actions", "--records", str(records), "--node", "gpu-a17"]
    assert cli.main(argv) == 64
    assert "3 nodes have an action record there" in capsys.readouterr().err


def test_a_check_filter_is_bad_input_for_actions(tmp_path, capsys, records):
    with pytest.raises(ConfigError) as caught:
        history(tmp_path, capsys, "--records", str(records), "--check", "gpu.health")
    assert caught.value.file == "--check"


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_no_records_says_so_not_an_empty_table(tmp_path, capsys, fmt):
    (tmp_path / "empty").mkdir()
    for where in (tmp_path / "empty", tmp_path / "missing"):
        _, out = history(tmp_path, capsys, "--records", str(where), "--format", fmt)
        if fmt == "table":
            assert out == f"no action records in {where}\n"
        else:
            assert json.loads(out) == {"records": str(where), "nodes": []}


def test_the_records_default_to_the_gate_configs_state_dir(tmp_path, capsys, records, monkeypatch):
    from nodecheck.fleet.history_command import records_dir

    config = tmp_path / "nodecheck.yml"
    config.write_text(f"remedy:\n  state_dir: {records}\n")
    monkeypatch.setenv("NODECHECK_GATE_CONFIG", str(config))
    _, out = history(tmp_path, capsys, "--node", "node3")
    assert out.splitlines()[0] == f"action record of node node3 in {records}, newest 10 entries (oldest first):"
    config.write_text("health:\n  retries: 1\n")  # no remedy: section: the shipped default
    assert records_dir(None) == "/var/lib/nodecheck/remedy"
    assert records_dir(str(tmp_path)) == str(tmp_path)

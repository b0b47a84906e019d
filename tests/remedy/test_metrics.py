"""Remediation metrics (nodecheck.remedy.metrics) from the action records."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from nodecheck.remedy.metrics import incidents, mean_time_between_incidents_s, render
from nodecheck.remedy.model import Entry

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)


def act(days: float, action: str = "reset_gpu", outcome: str = "done") -> Entry:
    return Entry(T0 + timedelta(days=days), "action", action, "3", "x", "gpu.health", outcome)


def back(days: float) -> Entry:
    return Entry(T0 + timedelta(days=days), "returned")


def test_incidents_begin_at_their_first_action_and_end_with_a_return_or_hold():
    node = [
        act(0, outcome="pending"),
        act(0),
        back(0.1),
        act(2),
        act(2.1, "reboot"),
        back(2.2),
        act(5, outcome="refused"),
    ]
    assert incidents(node) == [T0, T0 + timedelta(days=2)]
    assert mean_time_between_incidents_s(node) == 2 * 86400
    assert mean_time_between_incidents_s([act(0), back(1)]) is None


def test_the_textfile_counts_actions_by_kind_and_outcome_and_says_who_is_held():
    text = render(
        {
            "node2": [act(0, outcome="pending"), act(0), back(0.1), act(2, outcome="failed"), act(3, "reboot")],
            "node3": [act(1, "restart_service"), Entry(T0 + timedelta(days=1), "held")],
        }
    )
    assert 'nodecheck_remedy_actions{node="node2",action="reset_gpu",outcome="done"} 1\n' in text
    assert 'nodecheck_remedy_actions{node="node2",action="reset_gpu",outcome="failed"} 1\n' in text
    assert 'nodecheck_remedy_actions{node="node2",action="reboot",outcome="done"} 1\n' in text
    assert 'nodecheck_remedy_held{node="node3"} 1\n' in text and 'nodecheck_remedy_held{node="node2"} 0\n' in text
    assert 'nodecheck_remedy_mean_time_between_incidents_seconds{node="node2"} 172800\n' in text
    assert "node3" not in text.split("nodecheck_remedy_mean_time_between_incidents_seconds")[1].split("# HELP")[0]
    assert "# TYPE nodecheck_remedy_actions gauge" in text

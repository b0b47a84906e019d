"""Kernel-log events a re-proven repair answered (nodecheck.gate.answered): the node's own Prolog
and health runs judge its log windows from the repair on, so a repaired node is not drained again
on the Xid its GPU reset already dealt with."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

from nodecheck.config.playbook import load_playbook
from nodecheck.gate.answered import after_answered, answered_before, log_windows_since, write_answered

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)
PLAYBOOK = """\
version: 1
checks:
  gpu.xid: {since: 1h}
  node.oom: {since: 10s}
  nvlink.sxid: {since: boot}
  kernel.version: {}
"""


def playbook(tmp_path):
    path = tmp_path / "p.yml"
    path.write_text(PLAYBOOK)
    return load_playbook(str(path))


def windows(book) -> dict[str, str]:
    return {c.spec.name: c.params.since for c in book.checks if hasattr(c.params, "since")}


def test_the_windows_start_at_the_answering_action_a_shorter_one_is_kept(tmp_path):
    book = log_windows_since(playbook(tmp_path), NOW - timedelta(minutes=20), NOW)
    assert windows(book) == {"gpu.xid": "1201s", "node.oom": "10s", "nvlink.sxid": "1201s"}


def test_what_was_written_is_read_back_private(tmp_path):
    write_answered(tmp_path / "remedy", "node10", NOW - timedelta(minutes=20))
    path = tmp_path / "remedy" / "node10.answered"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "remedy").stat().st_mode & 0o777) == "0o700"
    assert answered_before(tmp_path / "remedy", "node10") == NOW - timedelta(minutes=20)
    book = after_answered(playbook(tmp_path), str(tmp_path / "remedy"), "node10", NOW)
    assert windows(book)["gpu.xid"] == "1201s"


def test_no_file_a_foreign_or_damaged_one_judges_the_whole_window(tmp_path):
    state = tmp_path / "remedy"
    book = playbook(tmp_path)
    assert after_answered(book, str(state), "node10", NOW) is book  # nothing answered yet
    assert after_answered(book, None, "node10", NOW) is book  # no remedy section
    write_answered(state, "node10", NOW - timedelta(minutes=20))
    path = state / "node10.answered"
    os.chmod(path, 0o620)  # another user could move it forward and hide a new Xid
    assert answered_before(state, "node10") is None
    os.chmod(path, 0o600)
    for text in ("garbage\n", "2026-12-07T11:40:00\n", "x" * 1000):  # not a time; naive; too long
        path.write_text(text)
        assert answered_before(state, "node10") is None, text


def test_a_symlink_is_never_followed_and_a_bad_node_name_names_no_file(tmp_path):
    state = tmp_path / "remedy"
    write_answered(state, "elsewhere", NOW)
    (state / "node10.answered").symlink_to(state / "elsewhere.answered")
    assert answered_before(state, "node10") is None
    assert answered_before(state, "../etc/passwd") is None
    write_answered(state, "../x", NOW)  # nothing written outside
    assert not (tmp_path / "x.answered").exists()

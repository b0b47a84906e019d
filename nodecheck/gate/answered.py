"""Kernel-log events a repair answered. After remediation resets a GPU for an Xid and the node
passes its re-proof (whose log windows looked back to the reset only), the Xid stays in the kernel
log for hours: the next Prolog or health run on the node would see it again and drain the repaired
node on an event already dealt with. So when nodecheck returns a node after an action, it writes
when that action began to `<remedy.state_dir>/<node>.answered`; a Prolog or health run on that node
then judges its kernel-log windows (gpu.xid, nvlink.sxid, node.oom) from that time on at the
earliest. An event logged after it is judged as always.

The file is root's word (read bounded, never through a symbolic link, owned by root and not group-
or world-writable) or it is ignored: ignoring it judges the whole window, the stricter way."""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import datetime, timezone
from pathlib import Path

from nodecheck.config.playbook import Playbook
from nodecheck.config.yaml_source import not_roots_word
from nodecheck.judging.log_window import Window
from nodecheck.report import store

MAX_BYTES = 200
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def answered_path(state_dir: str | Path, node: str) -> Path | None:
    """None for a node name that cannot name a file."""
    if not _NODE.fullmatch(node) or node in (".", ".."):
        return None
    return Path(state_dir) / f"{node}.answered"


def write_answered(state_dir: str | Path, node: str, at: datetime) -> None:
    """Say that the node's kernel-log events before `at` were answered (OSError when it cannot)."""
    path = answered_path(state_dir, node)
    if path is None:
        return
    store.make_dirs(path.parent, store.private())
    store.write_atomic(path, at.astimezone(timezone.utc).isoformat() + "\n", store.private())


def answered_before(state_dir: str | Path, node: str) -> datetime | None:
    """When the node's answered events end, or None (no file, or one that is not root's word)."""
    path = answered_path(state_dir, node)
    if path is None:
        return None
    try:
        found = store.read_newest(path, MAX_BYTES)
    except OSError:
        return None
    if found is None or not_roots_word(found[1].st_uid, found[1].st_mode):
        return None
    text = found[0].strip()
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def log_windows_since(playbook: Playbook, started: datetime, now: datetime) -> Playbook:
    """The playbook with every kernel-log window reaching back to `started` at the earliest (whole
    seconds, rounded up, and one more: the node's clock and ours may differ by a little). A window
    that already ends later is kept."""
    seconds = max(1, math.ceil((now - started).total_seconds()) + 1)

    def narrowed(c):
        if not isinstance(c.params, Window):
            return c
        if c.params.seconds is not None and c.params.seconds <= seconds:
            return c
        return dataclasses.replace(c, params=c.params.model_copy(update={"since": f"{seconds}s"}))

    return dataclasses.replace(playbook, checks=tuple(narrowed(c) for c in playbook.checks))


def after_answered(playbook: Playbook, state_dir: str | None, node: str, now: datetime) -> Playbook:
    """The playbook for a run on `node` itself: its kernel-log windows start where its answered
    events end (the playbook as it is when there are none, or no remedy state)."""
    if not state_dir:
        return playbook
    before = answered_before(state_dir, node)
    return playbook if before is None else log_windows_since(playbook, before, now)

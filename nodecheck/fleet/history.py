"""Sweep history in SQLite (stdlib sqlite3): one transaction per sweep, a versioned schema, and
the reads behind the sweep diff and `nodecheck history` (fleet/history_command.py).

Concurrency: WAL journal, a busy timeout, and BEGIN IMMEDIATE for every write, so two sweeps that
overlap (a manual one during the timer's) each commit whole sweeps and readers never see half of
one. Keep the file on a local filesystem: SQLite's locking is unreliable on NFS.

Schema (PRAGMA user_version = SCHEMA_VERSION); times are UTC ISO 8601 text, which sorts in time:
    sweeps(id, run_id, playbook, started, finished, complete, incomplete_reason, status, exit_code,
           report_dir, nodecheck_version)
    nodes(sweep_id, node, status)                          each node the sweep covered, its worst status
    results(sweep_id, node, check_name, status, message, subject)
                                                           every non-passing verdict; a check that
                                                           passed everything on a node is one row
    facts(sweep_id, node, key, value)                      versions: key is the check (nccl.version)
    counters(sweep_id, node, port, counter, value, boot_id, source, seq)   IB and NVLink error counters
                                                           (ib.counters' second read); value is an
                                                           integer, or its decimal text beyond 2^63-1;
                                                           seq keeps the recorded order
    measurements(sweep_id, node, check_name, name, subject, value, unit)   busbw, pair bandwidth, GPU figures

Version 2 made counters (three quarters of the bytes: 64 rows a node) a WITHOUT ROWID table, stored
once, in its primary key's b-tree, instead of as a table plus an index of the same columns: a 1000-
node sweep takes 9.7 MB instead of 12.5. A version 1 database is migrated when a sweep opens it.

Retention: History.prune deletes a playbook's sweeps beyond the newest N (`sweep --keep`). The
pages they free are reused by the next sweeps (no auto_vacuum), so the file stops growing at about
N + 1 sweeps; after lowering --keep, `sqlite3 FILE VACUUM` (no sweep running) gives space back.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

from nodecheck.core.errors import ConfigError
from nodecheck.core.model import SEVERITY, Status
from nodecheck.core.redact import redact_text
from nodecheck.report import exit_code_for
from nodecheck.report.diff import CounterRow, Measurement, NodeSweep, ResultRow, SweepSnapshot

SCHEMA_VERSION = 2
BUSY_TIMEOUT_S = 60.0  # another sweep's commit takes well under a second
# How far back baseline() looks for what the last sweep did not judge or read: a day of hourly
# sweeps. Older than that, "since the last sweep" would be a stretch: it is "not compared".
LOOKBACK_SWEEPS = 24
_STATUSES = ", ".join(f"'{s.value}'" for s in SEVERITY)
# value has no declared type: SQLite keeps an integer as an integer and a saturated 64-bit counter
# (beyond SQLite's signed 64-bit integers) as text, never as a lossy REAL. WITHOUT ROWID: the rows
# live in the primary key's b-tree (a rowid table would store those columns twice); it has no
# rowid to read back the recorded order by, so seq (the row's place in the sweep's) keeps it.
COUNTERS_TABLE = """CREATE TABLE counters (
        sweep_id INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
        node TEXT NOT NULL,
        port TEXT NOT NULL,
        counter TEXT NOT NULL,
        value NOT NULL,
        boot_id TEXT,
        source TEXT NOT NULL DEFAULT '',
        seq INTEGER NOT NULL,
        PRIMARY KEY (sweep_id, node, port, counter)) WITHOUT ROWID"""
SCHEMA = (
    f"""CREATE TABLE sweeps (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        playbook TEXT NOT NULL,
        started TEXT NOT NULL,
        finished TEXT NOT NULL,
        complete INTEGER NOT NULL CHECK (complete IN (0, 1)),
        incomplete_reason TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL CHECK (status IN ({_STATUSES})),
        exit_code INTEGER NOT NULL,
        report_dir TEXT,
        nodecheck_version TEXT NOT NULL DEFAULT '')""",
    "CREATE INDEX sweeps_by_playbook ON sweeps (playbook, started)",
    "CREATE INDEX sweeps_by_time ON sweeps (started)",
    f"""CREATE TABLE nodes (
        sweep_id INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
        node TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ({_STATUSES})),
        PRIMARY KEY (sweep_id, node))""",
    "CREATE INDEX nodes_by_node ON nodes (node, sweep_id)",
    f"""CREATE TABLE results (
        sweep_id INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
        node TEXT NOT NULL,
        check_name TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ({_STATUSES})),
        message TEXT NOT NULL,
        subject TEXT NOT NULL DEFAULT '')""",
    "CREATE INDEX results_by_sweep ON results (sweep_id, node)",
    "CREATE INDEX results_by_node ON results (node, sweep_id)",
    "CREATE INDEX results_by_check ON results (check_name, sweep_id)",
    """CREATE TABLE facts (
        sweep_id INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
        node TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (sweep_id, node, key))""",
    COUNTERS_TABLE,
    """CREATE TABLE measurements (
        sweep_id INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
        node TEXT NOT NULL,
        check_name TEXT NOT NULL,
        name TEXT NOT NULL,
        subject TEXT NOT NULL DEFAULT '',
        value REAL NOT NULL,
        unit TEXT NOT NULL,
        PRIMARY KEY (sweep_id, node, check_name, name, subject))""",
)
# Schema version -> the statements that bring a database of that version to the next one.
MIGRATIONS = {
    1: (
        "ALTER TABLE counters RENAME TO counters_v1",
        COUNTERS_TABLE,
        "INSERT INTO counters SELECT sweep_id, node, port, counter, value, boot_id, source, rowid FROM counters_v1",
        "DROP TABLE counters_v1",
    ),
}
_SQLITE_MAX_INT = 2**63 - 1
# The most sweeps one prune deletes. Deleting rewrites every page the rows were on, so the WAL grows
# by the bytes deleted: 1000 nodes, 24 sweeps is ~3 s and ~200 MB. A lowered --keep (720 -> 168:
# 5 GB) so drains 23 sweeps an hour instead of stalling one sweep for minutes on gigabytes of WAL.
PRUNE_MAX_SWEEPS = 24
# What History.prune deletes a sweep from: its rows in every table, the sweeps row last.
_SWEEP_TABLES = ("nodes", "results", "facts", "counters", "measurements")


class KeptView(NamedTuple):
    """What `history --show` reads besides results: one table, and what --check names in it."""

    table: str
    columns: str  # as snapshot() reads them
    order: str
    check_columns: tuple[str, ...]  # --check matches any of them
    what: str  # "versions": in titles and messages
    check_word: str  # what a --check value is here
    read_by: str  # the checks that keep them: a window without them has none


VIEWS = {
    "versions": KeptView(
        "facts",
        "node, key, value",
        "rowid",
        ("key",),
        "versions",
        "check",
        "the version checks (nccl.version, gpu.driver, ...)",
    ),
    # a counter name and a port never look alike (SymbolErrorCounter, mlx5_0/1): one option for both
    "counters": KeptView(
        "counters",
        "node, port, counter, value, boot_id, source",
        "seq",
        ("counter", "port"),
        "error counters",
        "counter or port",
        "ib.counters and nvlink.errors",
    ),
    "measurements": KeptView(
        "measurements",
        "node, check_name, name, subject, value, unit",
        "rowid",
        ("check_name",),
        "measurements",
        "check",
        "gpu.perf, ib.pairs and nccl.allreduce_*",
    ),
}


class SweepRow(NamedTuple):
    id: int
    run_id: str
    playbook: str
    started: datetime
    finished: datetime
    complete: bool
    status: Status
    exit_code: int
    report_dir: str | None
    incomplete_reason: str = ""


class Pruned(NamedTuple):
    """What History.prune deleted: the sweeps (oldest first), the oldest sweep it left, and how many
    sweeps beyond `keep` it left for the next sweeps to delete (PRUNE_MAX_SWEEPS)."""

    removed: tuple[SweepRow, ...]
    older_than: str  # the run id of the oldest sweep left
    left: int = 0


class _Gaps(NamedTuple):
    """What History.baseline still looks for on one node; what it finds leaves the sets."""

    checks: set[str]
    counters: set[tuple[str, str]]  # (port, counter)
    facts: set[str]


class History:
    """An open history database; use as a context manager."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path, self.conn = path, conn

    @classmethod
    def open(cls, path: str | Path, *, readonly: bool = False) -> History:
        """Open (and, for writing, create or migrate) the database. Problems are ConfigErrors naming
        the file: nothing has run yet, and the operator has a path to fix."""
        path = Path(path)
        if readonly and not path.is_file():
            raise ConfigError(
                f"no sweep history at {path}",
                file="--history",
                hint="`nodecheck sweep INVENTORY --output-dir DIR` writes DIR/history.sqlite "
                "(or its --history DB); point --history at that file",
            )
        try:
            if readonly:
                conn = _connect_readonly(path)
            else:
                _prepare_files(path)
                conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
            history = cls(path, conn)
            conn.execute("PRAGMA foreign_keys = ON")
            history._check_schema(readonly)  # before WAL: a newer or foreign file is not touched
            if not readonly:
                history._use_wal()
            return history
        except (sqlite3.Error, OSError) as e:
            raise ConfigError(
                f"cannot use the sweep history: {e}",
                file=str(path),
                hint="a SQLite file nodecheck writes; give another --history, or move this one aside",
            ) from None

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE takes the write lock up front (waiting out another writer up to the busy
        timeout) instead of failing at the first write of a deferred transaction."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _use_wal(self) -> None:
        """WAL: readers (`nodecheck history`) do not block a sweep's commit. The mode is stored in
        the file; switching needs the database to itself, and SQLite answers "locked" without
        waiting on the busy timeout while another process holds it, so this waits here."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while self.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _check_schema(self, readonly: bool) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(
                f"schema version {version} is newer than this nodecheck's ({SCHEMA_VERSION}): upgrade nodecheck"
            )
        if version == SCHEMA_VERSION:
            return
        if readonly:
            if version in MIGRATIONS:
                raise sqlite3.DatabaseError(
                    f"schema version {version}, of an older nodecheck: the next "
                    "`nodecheck sweep` that uses this history upgrades it"
                )
            raise sqlite3.DatabaseError(f"not a nodecheck history (schema version {version})")
        with self._transaction() as conn:
            # another sweep may have created or migrated it while this one waited for the lock
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION, *MIGRATIONS):
                raise sqlite3.DatabaseError(f"not a nodecheck history (schema version {version})")
            if version == 0:
                tables = [
                    r[0]
                    for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name LIMIT 3")
                ]
                if tables:  # another program's database: add nothing to it
                    raise sqlite3.DatabaseError(
                        f"not a nodecheck history: a SQLite database of something else "
                        f"(tables {', '.join(tables)}, ...)"
                    )
                for statement in SCHEMA:
                    conn.execute(statement)
            # one transaction: a migration cut short leaves the old version whole
            for step in range(version or SCHEMA_VERSION, SCHEMA_VERSION):
                for statement in MIGRATIONS[step]:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # ------------------------------------------------------------ writing

    def record(self, snap: SweepSnapshot, report_dir: str | None, nodecheck_version: str = "") -> int:
        """Store one sweep, all or nothing; returns its id."""
        with self._transaction() as conn:
            status = snap.status
            cur = conn.execute(
                "INSERT INTO sweeps (run_id, playbook, started, finished, complete, incomplete_reason, status, "
                "exit_code, report_dir, nodecheck_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    snap.run_id,
                    snap.playbook,
                    utc_text(snap.started),
                    utc_text(snap.finished),
                    int(snap.complete),
                    snap.incomplete_reason,
                    status.value,
                    exit_code_for(status),
                    report_dir,
                    nodecheck_version,
                ),
            )
            sid = cur.lastrowid
            assert sid is not None  # an INSERT's row id
            conn.executemany(
                "INSERT INTO nodes VALUES (?, ?, ?)", [(sid, n, s.value) for n, s in snap.node_statuses.items()]
            )
            conn.executemany(
                "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (sid, r.node, r.check, r.status.value, redact_text(r.message), redact_text(r.subject))
                    for r in snap.results
                ],
            )
            conn.executemany(
                "INSERT INTO facts VALUES (?, ?, ?, ?)",
                [(sid, node, key, redact_text(value)) for node, key, value in snap.facts],
            )
            conn.executemany(
                "INSERT INTO counters VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        sid,
                        c.node,
                        c.port,
                        c.counter,
                        c.value if c.value <= _SQLITE_MAX_INT else str(c.value),
                        c.boot_id,
                        c.source,
                        seq,
                    )
                    for seq, c in enumerate(snap.counters)
                ],
            )
            conn.executemany(
                "INSERT INTO measurements VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(sid, m.node, m.check, m.name, m.subject, m.value, m.unit) for m in snap.measurements],
            )
            return sid

    def prune(self, playbook: str, keep: int, recorded: int, at_most: int = PRUNE_MAX_SWEEPS) -> Pruned | None:
        """Delete this playbook's sweeps beyond the newest `keep` (newest as sweeps() and so the
        offender window order them), the oldest `at_most` of them, every row, in one transaction;
        never the sweep `recorded` (the one just recorded: a clock stepped back may have dated it
        older). None when nothing was deleted. Their report directories are the caller's, after
        the commit: a directory is never gone while its sweep is still in the history."""
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        with self._transaction() as conn:
            oldest_first = self.sweeps(-1, playbook)  # LIMIT -1: every one
            beyond = [s for s in oldest_first[: max(len(oldest_first) - keep, 0)] if s.id != recorded]
            removed = beyond[:at_most]
            if not removed:
                return None
            ids = [(s.id,) for s in removed]
            for table in _SWEEP_TABLES:  # not left to ON DELETE CASCADE: foreign_keys is per connection
                conn.executemany(f"DELETE FROM {table} WHERE sweep_id = ?", ids)
            conn.executemany("DELETE FROM sweeps WHERE id = ?", ids)
        # the oldest left: the sweep just recorded only when no other is (its date may be off)
        gone = {s.id for s in removed}
        left = [s for s in oldest_first if s.id not in gone]
        older_than = next((s for s in left if s.id != recorded), left[0]).run_id
        return Pruned(tuple(removed), older_than, len(beyond) - len(removed))

    # ------------------------------------------------------------ reading

    def sweeps(self, last: int, playbook: str | None = None) -> list[SweepRow]:
        """The last `last` sweeps (of one playbook), oldest first."""
        where, args = ("WHERE playbook = ?", (playbook,)) if playbook else ("", ())
        rows = self.conn.execute(
            f"SELECT id, run_id, playbook, started, finished, complete, status, exit_code, report_dir, "
            f"incomplete_reason FROM sweeps {where} ORDER BY started DESC, id DESC LIMIT ?",
            (*args, last),
        ).fetchall()
        return [
            SweepRow(r[0], r[1], r[2], _parse_ts(r[3]), _parse_ts(r[4]), bool(r[5]), Status(r[6]), r[7], r[8], r[9])
            for r in reversed(rows)
        ]

    def recent_measurements(self, playbook: str, check: str, last: int) -> dict[tuple[str, str, str], list[float]]:
        """(node, name, subject) -> the values of `check`'s measurements in the last `last` sweeps of
        the playbook, oldest first: each node's own history, for the drop warnings."""
        rows = self.conn.execute(
            "SELECT m.node, m.name, m.subject, m.value FROM measurements m JOIN "
            "(SELECT id, started FROM sweeps WHERE playbook = ? ORDER BY started DESC, id DESC LIMIT ?) s "
            "ON m.sweep_id = s.id WHERE m.check_name = ? ORDER BY s.started, s.id",
            (playbook, last, check),
        ).fetchall()
        out: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        for node, name, subject, value in rows:
            out[(node, name, subject)].append(float(value))
        return dict(out)

    def last(self, playbook: str) -> SweepSnapshot | None:
        """The latest sweep of this playbook, as it was recorded."""
        found = self.sweeps(1, playbook)
        return self.snapshot(found[0]) if found else None

    def baseline(self, playbook: str, current: SweepSnapshot, lookback: int = LOOKBACK_SWEEPS) -> SweepSnapshot | None:
        """The latest sweep of this playbook as diff() compares `current` with it: where it did not
        judge a (node, check) of `current` (the deadline cut it: SKIPPED; or it was not in that
        sweep), or did not read a counter or a version that `current` has, the latest of the
        `lookback` sweeps before it that did stands in. So a cut sweep neither hides a failure nor
        claims a recovery, and counters that rose over an hour whose read failed still show."""
        window = self.sweeps(lookback, playbook)
        if not window:
            return None
        last = self.snapshot(window[-1])
        states = last.checks()
        want: dict[str, _Gaps] = defaultdict(lambda: _Gaps(set(), set(), set()))  # by node
        for node, check in {(r.node, r.check) for r in current.results}:
            if (node, check) not in states or states[(node, check)].status is Status.SKIPPED:
                want[node].checks.add(check)
        read = {(c.node, c.port, c.counter) for c in last.counters}
        for c in current.counters:
            if (c.node, c.port, c.counter) not in read:
                want[c.node].counters.add((c.port, c.counter))
        known = {(node, key) for node, key, _ in last.facts}
        for node, key, _ in current.facts:
            if (node, key) not in known:
                want[node].facts.add(key)
        results: list[ResultRow] = []
        counters: list[CounterRow] = []
        facts: list[tuple[str, str, str]] = []
        used: list[str] = []
        for sweep in reversed(window[:-1]):
            if not want:
                break
            found = len(results) + len(counters) + len(facts)
            for node, gaps in list(want.items()):
                results += self._older_results(sweep.id, node, gaps.checks)
                counters += self._older_counters(sweep.id, node, gaps.counters)
                facts += self._older_facts(sweep.id, node, gaps.facts)
                if not any(gaps):
                    del want[node]
            if len(results) + len(counters) + len(facts) > found:
                used.append(sweep.run_id)
        if not used:
            return last
        filled = {(r.node, r.check) for r in results}
        return replace(
            last,
            results=tuple(r for r in last.results if (r.node, r.check) not in filled) + tuple(results),
            counters=last.counters + tuple(counters),
            facts=last.facts + tuple(facts),
            filled=len(filled) + len(counters) + len(facts),
            filled_from=tuple(used),
        )

    def _older_results(self, sweep_id: int, node: str, checks: set[str]) -> list[ResultRow]:
        """The rows of the wanted checks this sweep judged on the node; those found leave `checks`."""
        if not checks:
            return []
        rows: dict[str, list[ResultRow]] = {}
        for check, status, message, subject in self.conn.execute(
            "SELECT check_name, status, message, subject FROM results WHERE sweep_id = ? AND node = ? ORDER BY rowid",
            (sweep_id, node),
        ):
            if check in checks:
                rows.setdefault(check, []).append(ResultRow(node, check, Status(status), message, subject))
        judged = [check for check, found in rows.items() if any(r.status is not Status.SKIPPED for r in found)]
        checks.difference_update(judged)
        return [r for check in judged for r in rows[check]]

    def _older_counters(self, sweep_id: int, node: str, wanted: set[tuple[str, str]]) -> list[CounterRow]:
        if not wanted:
            return []
        found = [
            CounterRow(node, port, counter, int(value), boot_id, source)
            for port, counter, value, boot_id, source in self.conn.execute(
                "SELECT port, counter, value, boot_id, source FROM counters WHERE sweep_id = ? "
                "AND node = ? ORDER BY seq",
                (sweep_id, node),
            )
            if (port, counter) in wanted
        ]
        wanted.difference_update((c.port, c.counter) for c in found)
        return found

    def _older_facts(self, sweep_id: int, node: str, keys: set[str]) -> list[tuple[str, str, str]]:
        if not keys:
            return []
        found = [
            (node, key, value)
            for key, value in self.conn.execute(
                "SELECT key, value FROM facts WHERE sweep_id = ? AND node = ? ORDER BY rowid", (sweep_id, node)
            )
            if key in keys
        ]
        keys.difference_update(key for _, key, _ in found)
        return found

    def snapshot(self, sweep: SweepRow) -> SweepSnapshot:
        def rows(columns: str, table: str, order: str = "rowid") -> list[tuple]:
            return self.conn.execute(
                f"SELECT {columns} FROM {table} WHERE sweep_id = ? ORDER BY {order}", (sweep.id,)
            ).fetchall()

        return SweepSnapshot(
            run_id=sweep.run_id,
            playbook=sweep.playbook,
            started=sweep.started,
            finished=sweep.finished,
            complete=sweep.complete,
            incomplete_reason=sweep.incomplete_reason,
            nodes=tuple(r[0] for r in rows("node", "nodes")),
            results=tuple(
                ResultRow(n, c, Status(s), m, subj)
                for n, c, s, m, subj in rows("node, check_name, status, message, subject", "results")
            ),
            facts=tuple(rows("node, key, value", "facts")),
            counters=tuple(
                CounterRow(n, p, c, int(v), b, src)
                for n, p, c, v, b, src in rows("node, port, counter, value, boot_id, source", "counters", "seq")
            ),
            measurements=tuple(
                Measurement(*r) for r in rows("node, check_name, name, subject, value, unit", "measurements")
            ),
        )

    def counters_since(
        self, nodes: Sequence[str], counters: Sequence[str], since: datetime
    ) -> list[tuple[datetime, list[CounterRow]]]:
        """The kept `counters` of `nodes` in each sweep (any playbook) that finished at or after
        `since`, and in the last one before it (what the first of them rose from), oldest first:
        (the sweep's finish, its rows). For the remediation memory rules' counter rises."""
        before = self.conn.execute(
            "SELECT id FROM sweeps WHERE finished < ? ORDER BY finished DESC, id DESC LIMIT 1", (utc_text(since),)
        ).fetchone()
        sweeps = self.conn.execute(
            "SELECT id, finished FROM sweeps WHERE finished >= ? OR id = ? ORDER BY finished, id",
            (utc_text(since), before[0] if before else -1),
        ).fetchall()
        wanted = set(counters)
        out: list[tuple[datetime, list[CounterRow]]] = []
        for sweep_id, finished in sweeps:
            rows: list[CounterRow] = []
            for chunk in _chunks(list(dict.fromkeys(nodes)), 500):  # SQLite's bound on a statement's variables
                marks = ", ".join("?" * len(chunk))
                rows += [
                    CounterRow(n, p, c, int(v), b, src)
                    for n, p, c, v, b, src in self.conn.execute(
                        "SELECT node, port, counter, value, boot_id, source FROM counters "
                        f"WHERE sweep_id = ? AND node IN ({marks}) ORDER BY seq",
                        (sweep_id, *chunk),
                    )
                    if c in wanted
                ]
            out.append((_parse_ts(finished), rows))
        return out

    def node_sweeps(self, playbook: str, last: int) -> list[NodeSweep]:
        """Each node's status and failing checks in the last `last` sweeps of a playbook, for
        offenders(); NodeSweep.sweep is the sweep's position in time (0 = oldest of them)."""
        window = self.sweeps(last, playbook) if last > 0 else []
        rows: list[NodeSweep] = []
        for position, sweep in enumerate(window):
            failing: dict[str, list[str]] = {}
            # as diff.offenders counts them: a check the deadline cut (skipped) is no offence
            for node, check in self.conn.execute(
                "SELECT DISTINCT node, check_name FROM results WHERE sweep_id = ? AND status NOT IN (?, ?, ?) "
                "ORDER BY check_name",
                (sweep.id, Status.PASS.value, Status.WARN.value, Status.SKIPPED.value),
            ):
                failing.setdefault(node, []).append(check)
            rows += [
                NodeSweep(position, node, Status(status), tuple(failing.get(node, ())))
                for node, status in self.conn.execute(
                    "SELECT node, status FROM nodes WHERE sweep_id = ? ORDER BY rowid", (sweep.id,)
                )
            ]
        return rows

    def node_counts(self, sweep_id: int) -> dict[Status, int]:
        return {
            Status(s): n
            for s, n in self.conn.execute(
                "SELECT status, COUNT(*) FROM nodes WHERE sweep_id = ? GROUP BY status", (sweep_id,)
            )
        }

    def results(self, sweep_id: int, node: str | None = None, check: str | None = None) -> list[ResultRow]:
        clauses = ["sweep_id = ?"]
        args: list[object] = [sweep_id]
        for column, value in (("node", node), ("check_name", check)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        return [
            ResultRow(r[0], r[1], Status(r[2]), r[3], r[4])
            for r in self.conn.execute(
                f"SELECT node, check_name, status, message, subject FROM results WHERE {' AND '.join(clauses)} "
                "ORDER BY rowid",
                args,
            )
        ]

    def kept(self, view: str, sweep_id: int, node: str | None = None, check: str | None = None) -> list:
        """What one sweep kept of a VIEWS table, in recorded order, as snapshot() reads it: facts
        (node, key, value), CounterRows or Measurements; only this node's, only what --check names."""
        spec = VIEWS[view]
        clauses = ["sweep_id = ?"]
        args: list[object] = [sweep_id]
        if node is not None:
            clauses.append("node = ?")
            args.append(node)
        if check is not None:
            clauses.append("(" + " OR ".join(f"{c} = ?" for c in spec.check_columns) + ")")
            args += [check] * len(spec.check_columns)
        rows = self.conn.execute(
            f"SELECT {spec.columns} FROM {spec.table} WHERE {' AND '.join(clauses)} ORDER BY {spec.order}", args
        ).fetchall()
        if view == "counters":
            return [CounterRow(n, p, c, int(v), b, src) for n, p, c, v, b, src in rows]
        if view == "measurements":
            return [Measurement(*r) for r in rows]
        return [tuple(r) for r in rows]

    def kept_names(
        self, view: str, columns: Sequence[str], sweep_ids: Sequence[int], node: str | None = None
    ) -> set[str]:
        """The distinct values of these columns of a VIEWS table in these sweeps (on one node): what
        a --node or --check could have named. One query a sweep: each is a prefix of the key."""
        table, names = VIEWS[view].table, set[str]()
        where, extra = ("AND node = ?", (node,)) if node is not None else ("", ())
        for column in columns:
            for sweep_id in sweep_ids:
                names.update(
                    r[0]
                    for r in self.conn.execute(
                        f"SELECT DISTINCT {column} FROM {table} WHERE sweep_id = ? {where}", (sweep_id, *extra)
                    )
                )
        return names

    def covered(self, sweep_id: int, node: str) -> bool:
        return (
            self.conn.execute("SELECT 1 FROM nodes WHERE sweep_id = ? AND node = ?", (sweep_id, node)).fetchone()
            is not None
        )

    def knows(self, column: str, value: str) -> bool:
        """Whether any sweep covered this node (column "node") or judged this check ("check_name"):
        one indexed lookup, where known() reads a month of results."""
        table = "nodes" if column == "node" else "results"
        return self.conn.execute(f"SELECT 1 FROM {table} WHERE {column} = ? LIMIT 1", (value,)).fetchone() is not None

    def known(self, column: str) -> list[str]:
        """Every node (column "node") or check ("check_name") the history has seen."""
        table = "nodes" if column == "node" else "results"
        return [r[0] for r in self.conn.execute(f"SELECT DISTINCT {column} FROM {table}")]


def _prepare_files(path: Path) -> None:
    """The database file made (empty: SQLite takes an empty file for a new database) or narrowed
    with nodecheck's modes before SQLite opens it: SQLite makes its -wal, -shm and -journal files
    with the database file's mode and owner, so none of them is readable by others either
    (report.store.shared(): 0640, the operators' group). Existing ones a sweep left are narrowed too."""
    from nodecheck.report.store import create, make_dirs, shared

    access = shared()
    make_dirs(path.parent, access)
    for name in (path, *(Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal"))):
        if name == path or os.path.lexists(name):
            os.close(create(name, access, keep=True))


def _connect_readonly(path: Path) -> sqlite3.Connection:
    uri = path.resolve().as_uri()
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute("PRAGMA user_version").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
        if os.access(path.parent, os.W_OK) or Path(f"{path}-wal").exists():
            raise
    # A reader who may not write the directory (an operator reading root's history) cannot create
    # the WAL index (-shm) a WAL database needs. Without a -wal file no sweep has it open (SQLite
    # removes it when the last connection closes), so the file alone is the whole database: read
    # it as immutable. A sweep that commits meanwhile is not seen; `history` is a display.
    return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def utc_text(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_ts(s: str) -> datetime:
    return datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")

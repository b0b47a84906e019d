"""`nodecheck history`: a node's or a check's past, per sweep, read from the sweep history
(fleet/history.py): the results (render_history), or with --show the versions, IB and NVLink error counters or
measurements the sweeps kept (kept_entries, render_kept); with --show actions, what remediation did to
each node, read from its action records instead (actions_command)."""

from __future__ import annotations

import difflib
import json
import sys
from argparse import Namespace
from collections.abc import Sequence

from nodecheck.core.errors import ConfigError
from nodecheck.core.model import SEVERITY, Status, one_line
from nodecheck.fleet.history import VIEWS, History, SweepRow, utc_text
from nodecheck.report.diff import (
    FACT_CHECKS,
    KEPT_COUNTERS,
    CounterRow,
    Measurement,
    counter_changes,  # the diff's rule: one rule for both
    natural,
)


def history_command(args: Namespace) -> int:
    """`nodecheck history [--node N] [--check C] [--last K] [--show WHAT] [--html FILE]`: per sweep, oldest first."""
    if getattr(args, "html", None):  # the fleet page instead of the table (fleet/fleet_page.py)
        from nodecheck.fleet.fleet_page import html_command

        return html_command(args)
    if args.show == "actions":  # the action records, not the sweeps: no sweep history needed
        return actions_command(args)
    with History.open(args.history, readonly=True) as h:
        _refuse_unknown(h, "node", args.node, "--node")
        if args.show == "results":
            _refuse_unknown(h, "check_name", args.check, "--check")
            entries = [_entry(h, sweep, args.node, args.check) for sweep in h.sweeps(args.last)]
        else:
            entries = kept_entries(h, args.show, args.node, args.check, args.last)
    if args.format == "json":
        doc = {
            "history": str(args.history),
            "show": args.show,
            "node": args.node,
            "check": args.check,
            "sweeps": entries,
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif args.show == "results":
        sys.stdout.write(render_history(entries, args.node, args.check))
    else:
        sys.stdout.write(render_kept(args.show, entries, args.node, args.check))
    return 0


def _refuse_unknown(h: History, column: str, value: str | None, flag: str) -> None:
    """A node no sweep covered or a check no sweep judged is a typo: bad input, with the nearest name."""
    if value is None or h.knows(column, value):
        return
    known = h.known(column)
    close = difflib.get_close_matches(value, known, n=1)
    raise ConfigError(
        f"{value!r} is in no sweep of {h.path}",
        file=flag,
        hint=f"did you mean {close[0]!r}?"
        if close
        else f"{len(known)} {'nodes' if column == 'node' else 'checks'} are recorded",
    )


def _entry(h: History, sweep: SweepRow, node: str | None, check: str | None) -> dict:
    """One sweep as `history` shows it: its status for what was asked, and the results behind it."""
    entry = {
        "run_id": sweep.run_id,
        "playbook": sweep.playbook,
        "started": utc_text(sweep.started),
        "report_dir": sweep.report_dir,
        "complete": sweep.complete,
    }
    if node is None and check is None:
        counts = h.node_counts(sweep.id)
        return {**entry, "status": sweep.status.value, "nodes": {s.value: counts[s] for s in SEVERITY if s in counts}}
    if node is not None and not h.covered(sweep.id, node):
        return {**entry, "status": "not checked", "results": []}
    rows = h.results(sweep.id, node, check)
    if not rows:  # the node was there, the check was not in the playbook
        return {**entry, "status": "not checked", "results": []}
    status = max((r.status for r in rows), key=lambda s: s.rank)
    return {
        **entry,
        "status": status.value,
        "results": [
            {"node": r.node, "check": r.check, "status": r.status.value, "subject": r.subject, "message": r.message}
            for r in rows
        ],
    }


def render_history(entries: Sequence[dict], node: str | None, check: str | None) -> str:
    from tabulate import tabulate

    from nodecheck.core.hostlist import fold

    what = " ".join(p for p in (node and f"node {node}", check and f"check {check}") if p) or "all nodes"
    rows = []
    for e in entries:
        when = e["started"][:19].replace("T", " ") + "Z"
        if "nodes" in e:
            detail = ", ".join(f"{n} {s}" for s, n in e["nodes"].items())
        elif not e["results"]:
            detail = "not checked in this sweep"
        else:
            detail = _detail(e["results"], node, check, fold)
        if not e["complete"]:  # its skipped and timed-out results are the cut, not the node
            detail = f"(sweep cut short) {detail}"
        rows.append([when, e["run_id"], e["status"], detail, e["report_dir"] or "-"])
    if not rows:
        return f"history of {what}: no sweep recorded\n"
    table = tabulate(
        rows,
        headers=["started (UTC)", "run id", "status", "detail", "report"],
        tablefmt="simple",
        maxcolwidths=[None, None, None, 80, None],
    )
    return f"history of {what}, last {len(rows)} sweeps (oldest first):\n{table}\n"


def _detail(results: list[dict], node: str | None, check: str | None, fold) -> str:
    """The non-passing results, naming what the query did not fix; for a check, the nodes that
    passed too."""
    bad = [r for r in results if r["status"] != Status.PASS.value]
    groups: dict[tuple[str, str, str], list[str]] = {}
    for r in bad:
        groups.setdefault((r["check"], r["status"], r["message"]), []).append(r["node"])
    parts = []
    for (name, status, message), nodes in groups.items():
        who = "" if node is not None else f"{fold(nodes)} "
        which = "" if check is not None else f"{name} "
        parts.append(f"{who}{which}{status}: {message}")
    if node is None:
        failed = {r["node"] for r in bad}
        passed = [r["node"] for r in results if r["node"] not in failed]
        if passed:
            parts.append(f"{fold(passed)} pass")
    elif not bad:
        parts.append(results[0]["message"] if check is not None else f"{len(results)} checks pass")
    return "; ".join(parts)


# ---------------------------------------------------------------- history --show versions|counters|measurements


def kept_entries(h: History, show: str, node: str | None, check: str | None, last: int) -> list[dict]:
    """The last `last` sweeps (oldest first), each with what it kept of VIEWS[show]. A version or a
    counter is compared with the latest earlier sweep that read it (the one before the window
    included, so the oldest row shown has its change too): versions get `was` and `changed`,
    counters `was` and `change` (counter_change). A --node or --check that matches nothing in
    these sweeps is bad input (ConfigError), as an unknown one is for results."""
    window = h.sweeps(last + 1)
    seen: dict[tuple, tuple | CounterRow | Measurement] = {}  # what each version or counter was last
    if len(window) > last:
        seen.update((_identity(show, row), row) for row in h.kept(show, window[0].id, node, check))
    entries = []
    for sweep in window[-last:] if len(window) > last else window:
        items = []
        for row in h.kept(show, sweep.id, node, check):
            key = _identity(show, row)
            items.append(_item(show, row, seen.get(key)))
            seen[key] = row
        entries.append(
            {
                "run_id": sweep.run_id,
                "playbook": sweep.playbook,
                "started": utc_text(sweep.started),
                "report_dir": sweep.report_dir,
                "complete": sweep.complete,
                show: items,
            }
        )
    if (node is not None or check is not None) and entries and not any(e[show] for e in entries):
        raise _matched_nothing(h, show, node, check, window[-len(entries) :])
    return entries


def _identity(show: str, row) -> tuple:
    if show == "counters":
        return (row.node, row.port, row.counter)
    if show == "measurements":
        return (row.node, row.check, row.name, row.subject)
    return row[:2]  # (node, key)


def _item(show: str, row, was) -> dict:
    if show == "versions":
        node, key, value = row
        old = was[2] if was is not None else None
        return {"node": node, "key": key, "value": value, "was": old, "changed": old is not None and old != value}
    if show == "counters":
        return {
            "node": row.node,
            "port": row.port,
            "counter": row.counter,
            "value": row.value,
            "boot_id": row.boot_id,
            "source": row.source,
            "was": was.value if was is not None else None,
            "change": counter_change(was, row),
        }
    return {
        "node": row.node,
        "check": row.check,
        "name": row.name,
        "subject": row.subject,
        "value": row.value,
        "unit": row.unit,
    }


def counter_change(was: CounterRow | None, now: CounterRow) -> str | None:
    """What a counter did since its last read, by the sweep diff's rule (diff.counter_changes, so
    `history` and the sweep's "since the last sweep" never disagree): "rise"; "reboot" (a new
    boot id: counters restart at zero); "cleared" (went down within one boot: perfquery -R or a
    reset); "other source" (perfquery vs sysfs, other widths: not compared); "same"; None when
    there is no earlier read."""
    if was is None:
        return None
    if was.source != now.source:
        return "other source"
    risen, reset = counter_changes((was,), (now,))
    if risen:
        return "rise"
    if reset:
        return "cleared" if reset[0].port else "reboot"
    return "same"


def _matched_nothing(
    h: History, show: str, node: str | None, check: str | None, sweeps: Sequence[SweepRow]
) -> ConfigError:
    """Which filter matched nothing in these sweeps, and what would have matched. The node is one
    some sweep covered (_refuse_unknown): no "did you mean" for it; a --check that is a real name
    of this view (cuda.version, a counter) gets what was recorded, a typo the nearest name."""
    spec = VIEWS[show]
    ids = [s.id for s in sweeps]
    span = f"the last {len(sweeps)} sweeps of {h.path}"
    nodes = h.kept_names(show, ("node",), ids)
    if not nodes:
        return ConfigError(
            f"no {spec.what} in {span}", file="--show", hint=f"kept by {spec.read_by}: none read in these sweeps"
        )
    if check is not None:
        names = h.kept_names(show, spec.check_columns, ids)
        if check not in names:
            close = difflib.get_close_matches(check, names, n=1)
            return ConfigError(
                f"no {spec.what} for {spec.check_word} {check!r} in {span}",
                file="--check",
                hint=f"did you mean {close[0]!r}?"
                if close and check not in _NAMES[show]
                else f"recorded there: {_listing(names)}",
            )
    if node is not None and node not in nodes:
        return ConfigError(
            f"no {spec.what} for node {node!r} in {span}",
            file="--node",
            hint=f"{len(nodes)} nodes have {spec.what} there; its statuses: --show results",
        )
    names = h.kept_names(show, spec.check_columns, ids, node=node)
    return ConfigError(
        f"no {spec.what} for {spec.check_word} {check!r} on node {node!r} in {span}",
        file="--check",
        hint=f"that node's: {_listing(names)}",
    )


def _listing(names: set[str], most: int = 10) -> str:
    ordered = sorted(names, key=natural)
    more = f", ... ({len(ordered) - most} more)" if len(ordered) > most else ""
    return ", ".join(ordered[:most]) + more


# The names a --check of each view may rightly give that a window may lack (no "did you mean" for them)
_NAMES = {"versions": FACT_CHECKS, "counters": KEPT_COUNTERS, "measurements": ()}
_COUNTER_CHANGE = {
    "rise": "+{delta} (was {was})",
    "reboot": "new boot: restarted at zero (was {was})",
    "cleared": "went down (was {was}): cleared or reset",
    "other source": "not compared: another source",
}


def render_kept(show: str, entries: Sequence[dict], node: str | None, check: str | None) -> str:
    """One row per sweep and identical item, its nodes folded (a value 2000 nodes share is one
    row); a column the query fixed is left out. A sweep that kept none says so. Counters: without
    --check, those at 0 that did not change are one "(others)" row per sweep (64 a node otherwise)."""
    from tabulate import tabulate

    from nodecheck.core.hostlist import fold

    spec = VIEWS[show]
    headers = {
        "versions": ["check", "value", "change"],
        "counters": ["port", "counter", "value", "change"],
        "measurements": ["check", "measurement", "subject", "value"],
    }[show]
    drop = {0} if check is not None and show != "counters" else set()  # the check column, fixed
    headers = [h for i, h in enumerate(headers) if i not in drop]
    rows = []
    for e in entries:
        when, run = e["started"][:19].replace("T", " ") + "Z", e["run_id"]
        groups: dict[tuple, list[str]] = {}
        zeros: list[str] = []
        for item in e[show]:
            cells = _cells(show, item)
            if show == "counters" and check is None and item["value"] == 0 and item["change"] in (None, "same"):
                zeros.append(item["node"])
                continue
            groups.setdefault(tuple(c for i, c in enumerate(cells) if i not in drop), []).append(item["node"])
        if zeros:
            plural = "s" if len(zeros) != 1 else ""
            groups[("(others)", f"{len(zeros)} counter{plural}", "0", "")] = list(dict.fromkeys(zeros))
        who = [] if node is not None else ["-"]
        if not groups:
            note = "(sweep cut short) not read" if not e["complete"] else "not read in this sweep"
            rows.append([when, run, *who, note, *[""] * (len(headers) - 1)])
        for shown, nodes in groups.items():
            rows.append([when, run, *([] if node is not None else [fold(nodes)]), *shown])
    named = check if show == "counters" else f"check {check}"  # a counter or a port names itself
    what = " ".join(p for p in (node and f"node {node}", check and named) if p) or "all nodes"
    if not entries:
        return f"{spec.what} of {what}: no sweep recorded\n"
    table = tabulate(
        rows,
        headers=["started (UTC)", "run id", *([] if node is not None else ["nodes"]), *headers],
        tablefmt="simple",
        disable_numparse=True,
    )
    return f"{spec.what} of {what}, last {len(entries)} sweeps (oldest first):\n{table}\n"


def _cells(show: str, item: dict) -> list[str]:
    if show == "versions":
        return [item["key"], item["value"], f"<- changed (was {item['was']})" if item["changed"] else ""]
    if show == "counters":
        template = _COUNTER_CHANGE.get(item["change"], "")
        change = template.format(delta=item["value"] - item["was"], was=item["was"]) if template else ""
        return [item["port"], item["counter"], str(item["value"]), change]
    return [item["check"], item["name"], item["subject"], f"{item['value']:g} {item['unit']}"]


# ---------------------------------------------------------------- history --show actions

DETAIL_CHARS = 60  # a table cell; the JSON has the whole detail
_STAMP = "%Y-%m-%dT%H:%M:%SZ"  # the action record's own


def actions_command(args: Namespace) -> int:
    """Per node (natural order): each action with its outcome, each return and hold, oldest first
    (the newest --last); then its incidents, actions by outcome, mean time between incidents and
    whether it is held now. A record that cannot be read is that node's error, never left out."""
    if args.check is not None:
        raise ConfigError(
            "the action records are per node: --show actions takes no --check", file="--check", hint="--node N"
        )
    where = records_dir(args.records)
    names = _recorded_nodes(where)
    if args.node is not None and names:
        _refuse_unrecorded(where, args.node, names)
        names = [args.node]
    from nodecheck.remedy import record

    records, problems = record.load_many(where, names)
    nodes = [node_actions(n, records.get(n, ()), problems.get(n), args.last) for n in names]
    if args.format == "json":
        sys.stdout.write(json.dumps({"records": where, "nodes": nodes}, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(render_actions(where, nodes, args.node, args.last))
    return 0


def records_dir(given: str | None) -> str:
    """--records, else the gate config's remedy.state_dir (found as `remediate` finds it), else the
    shipped default."""
    if given:
        return given
    from nodecheck.config.remedy import RemedySettings
    from nodecheck.gate import config as gateconfig

    settings, _ = gateconfig.remedy_settings(gateconfig.config_path(None))
    return (settings or RemedySettings()).state_dir


def _recorded_nodes(where: str) -> list[str]:
    from nodecheck.remedy.command import recorded

    try:
        return sorted(recorded(where), key=natural)
    except ConfigError as e:  # a directory root keeps 0700: name the option that pointed at it
        raise ConfigError(e.message, file="--records", hint="the records are root's: run as root") from None


def _refuse_unrecorded(where: str, node: str, names: list[str]) -> None:
    """A node with no record is a typo (or a node nothing was ever done to): bad input, with the nearest name."""
    if node in names:
        return
    close = difflib.get_close_matches(node, names, n=1)
    raise ConfigError(
        f"{node!r} has no action record in {where}",
        file="--node",
        hint=f"did you mean {close[0]!r}?" if close else f"{len(names)} nodes have an action record there",
    )


def node_actions(node: str, entries: Sequence, error: str | None, last: int) -> dict:
    """One node as the view shows it; the counts and the MTBI are over its whole record."""
    from nodecheck.remedy import metrics

    if error is not None:
        return {
            "node": node,
            "error": error,
            "entries": [],
            "not_shown": 0,
            "incidents": None,
            "actions": {},
            "mtbi_s": None,
            "held": None,
        }
    rows = action_rows(entries)
    said = [e.outcome for e in entries if e.event == "action"]
    return {
        "node": node,
        "error": None,
        "entries": rows[-last:],
        "not_shown": max(0, len(rows) - last),
        "incidents": len(metrics.incidents(entries)),
        "actions": {o: said.count(o) for o in ("done", "failed", "refused")},
        "mtbi_s": metrics.mean_time_between_incidents_s(entries),
        "held": bool(entries) and entries[-1].event == "held",
    }


def action_rows(entries: Sequence) -> list[dict]:
    """One row per action with its outcome, per return and per hold, oldest first. The executor
    writes an action pending and then again with its outcome (one action at a time per node): the
    pair is one row, at the action's start; a pending one with no outcome yet is under way."""
    rows = []
    for i, e in enumerate(entries):
        if i + 1 < len(entries) and _outcome_of(e, entries[i + 1]):
            continue  # shown with its outcome
        started = entries[i - 1] if i and _outcome_of(entries[i - 1], e) else e
        rows.append(_row(started, e))
    return rows


def _outcome_of(pending, later) -> bool:
    return (
        pending.event == "action"
        and pending.outcome == "pending"
        and later.event == "action"
        and later.outcome != "pending"
        and (later.action, later.target) == (pending.action, pending.target)
    )


def _row(started, e) -> dict:
    finished = e.event == "action" and e.outcome != "pending"
    return {
        "at": started.at.strftime(_STAMP),
        "finished": e.at.strftime(_STAMP) if finished else None,
        "event": e.event,
        "action": e.action,
        "target": e.target,
        "outcome": e.outcome,
        "ladder": e.ladder,
        "check": e.check or started.check,
        "detail": e.detail or started.detail,
        "evidence": e.evidence or started.evidence,
    }


def render_actions(where: str, nodes: Sequence[dict], node: str | None, last: int) -> str:
    """A table per node (its name above it when there are several), then its summary line."""
    if not nodes:  # not an empty table that reads as "nothing went wrong"
        return f"no action records in {where}\n"
    if node is not None:
        out = [f"action record of node {node} in {where}, newest {last} entries (oldest first):"]
    else:
        out = [f"action records in {where}, newest {last} entries per node (oldest first):"]
    for n in nodes:
        if n["error"] is not None:
            out += [
                *([""] if node is None else []),
                one_line(f"{n['node']}: its action record cannot be read: {n['error']}"),
            ]
            continue
        if node is None:
            out += ["", n["node"]]
        if n["not_shown"]:
            out.append(f"({n['not_shown']} earlier entries not shown: --last N shows more)")
        out.append(_actions_table(n["entries"]) if n["entries"] else "(no entries)")
        out.append(_summary(n))
    return "\n".join(out) + "\n"


def _actions_table(rows: Sequence[dict]) -> str:
    from tabulate import tabulate

    from nodecheck.remedy.model import shown_target

    cells = [
        [
            r["at"].replace("T", " "),
            r["event"],
            f"{r['action']} {shown_target(r['target'])}".strip(),
            r["outcome"],
            r["ladder"],
            _bounded(one_line(r["detail"])),
            r["evidence"],
        ]
        for r in rows
    ]
    headers = ["time (UTC)", "event", "action", "outcome", "ladder", "detail", "evidence"]
    return tabulate(cells, headers=headers, tablefmt="simple", disable_numparse=True)


def _bounded(text: str) -> str:
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def _summary(n: dict) -> str:
    count = n["incidents"]
    by = ", ".join(f"{k} {o}" for o, k in n["actions"].items())
    mtbi = interval(n["mtbi_s"]) if n["mtbi_s"] is not None else "—"  # fewer than two incidents
    held = "held now" if n["held"] else "not held now"
    incidents = f"{count} incident{'s' if count != 1 else ''}"
    return f"{n['node']}: {incidents}; actions: {by}; mean time between incidents {mtbi}; {held}"


def interval(seconds: float) -> str:
    """A time between incidents: "3.2 days" from two days up, else the watcher's units (5.0 h, 12 min)."""
    from nodecheck.watch.wording import duration

    return f"{seconds / 86400:.1f} days" if seconds >= 2 * 86400 else duration(seconds)

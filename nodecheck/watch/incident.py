"""Incident records: on each change of verdict, a directory under OUTPUT_DIR with what justifies it,
written atomically (report.store.store_files), 0640 in a 0750 directory, secrets masked:

  <UTC stamp>_watch_<job key>_<verdict>/
    incident.json   the event (as alerted), the assessment and its facts, the --on-hang action, the watcher
    samples.jsonl   the ticks kept, oldest first: per node the parsed numbers AND the raw probe output
    summary.txt     the same for a person: the verdict, its message, one row per node and tick

The ticks kept are the watcher's recent history (config `history` ticks), bounded in bytes: unbounded,
64 nodes x 240 ticks made a 95 MiB samples.jsonl per change of verdict (64 KiB of raw log tail per node
per tick, ~3 KB of numbers). Raw output is kept for the newest tick always, and for the ticks before it
within RAW_TICKS and RAW_BYTES; the numbers for as many ticks as SAMPLES_BYTES holds, the oldest dropped
first (incident.json says how many). A record is then at most ~12 MiB plus one tick's raw output
(nodes x ~66 KiB). Nothing is added to what the probe returned: no setting, URL or hook command.
"""

from __future__ import annotations

import dataclasses
import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from nodecheck.core.model import Capture, one_line
from nodecheck.report.store import safe_key, stamp

INCIDENT_VERSION = 1
RAW_TICKS = 12  # ticks whose raw probe output the record keeps, at most
RAW_BYTES = 4 * 1024 * 1024  # of raw output in the ticks before the newest
SAMPLES_BYTES = 8 * 1024 * 1024  # of the ticks' numbers (their JSON without the raw output)
SUMMARY_TICKS = 20  # ticks shown in summary.txt


def incident_id(at: float, job_key: str, verdict: str) -> str:
    return f"{stamp(at)}_watch_{safe_key(job_key)}_{safe_key(verdict)}"


def tick_record(tick, captures: Mapping[str, Capture | None]) -> dict:
    """One tick as a JSON object: per node the probe outcome, the parsed numbers (the sample without
    its log tail, the progress read from it) or the failure, and the raw output. `tick` is a
    verdicts.Tick; `captures` maps a node to its sample capture (None: not probed)."""
    nodes = {}
    for obs in tick.nodes:
        capture = captures.get(obs.node)
        entry: dict = {"failure": obs.failure}
        if capture is not None:
            entry.update(
                outcome=capture.outcome.value,
                exit_code=capture.exit_code,
                seconds=round(capture.duration_s, 3),
                detail=capture.detail,
            )
        if obs.sample is not None:
            sample = dataclasses.asdict(obs.sample)
            sample.pop("log_tail", None)  # in the raw output already, and often 64 KiB
            entry["sample"] = sample
        if obs.progress is not None:
            entry["progress"] = _jsonable(dataclasses.asdict(obs.progress))
        if capture is not None:
            entry["raw"] = {"stdout": capture.stdout, "stderr": capture.stderr}
        nodes[obs.node] = entry
    return {"at": _iso(tick.at), "at_epoch": tick.at, "job_state": tick.job_state, "nodes": nodes}


class TickHistory:
    """The ticks kept for incident records: the last `size`, within the byte bounds above (so the
    watcher's memory is bounded too). `dropped`: ticks given up for size since the watch started."""

    def __init__(self, size: int) -> None:
        self.ticks: deque[dict] = deque(maxlen=max(1, size))
        self.sizes: deque[list[int]] = deque(maxlen=max(1, size))  # [numbers bytes, raw bytes] per tick
        self.dropped = 0

    def add(self, record: dict) -> None:
        raw = sum(len(e["raw"]["stdout"]) + len(e["raw"]["stderr"]) for e in record["nodes"].values() if "raw" in e)
        numbers = len(
            json.dumps(
                {
                    **record,
                    "nodes": {n: {k: v for k, v in e.items() if k != "raw"} for n, e in record["nodes"].items()},
                },
                default=str,
            )
        )
        self.ticks.append(record)
        self.sizes.append([numbers, raw])
        kept = 0
        for n in range(len(self.ticks) - 2, -1, -1):  # newest first, the newest tick itself aside
            size = self.sizes[n]
            if not size[1]:
                continue
            if len(self.ticks) - n <= RAW_TICKS and kept + size[1] <= RAW_BYTES:
                kept += size[1]
                continue
            for entry in self.ticks[n]["nodes"].values():
                if entry.pop("raw", None) is not None:
                    entry["raw_dropped"] = True
            size[1] = 0
        total = sum(size[0] for size in self.sizes)
        while total > SAMPLES_BYTES and len(self.ticks) > 1:
            total -= self.sizes.popleft()[0]
            self.ticks.popleft()
            self.dropped += 1

    @property
    def raw_ticks(self) -> int:
        return sum(1 for size in self.sizes if size[1])

    def __len__(self) -> int:
        return len(self.ticks)

    def __iter__(self):
        return iter(self.ticks)


def write_incident(
    output_dir: str | Path,
    *,
    event: Mapping,
    assessment,
    ticks: Iterable[dict],
    job_key: str,
    at: float,
    action: Mapping | None = None,
    watcher: Mapping | None = None,
) -> Path:
    """Write the record and return its directory. `event` is the alert event without its "incident"
    field (the caller adds the path this returns); `assessment` a verdicts.Assessment; `ticks` a
    TickHistory (or a list of tick records)."""
    from nodecheck.core.redact import redact_text
    from nodecheck.report.json import scrub
    from nodecheck.report.store import store_files

    dropped = getattr(ticks, "dropped", 0)
    ticks = list(ticks)
    body = {
        "incident_version": INCIDENT_VERSION,
        "event": dict(event),
        "assessment": {
            "verdict": assessment.verdict,
            "message": assessment.message,
            "nodes": list(assessment.nodes),
            "ranks": list(assessment.ranks),
            "since": _iso(assessment.since),
            "since_epoch": assessment.since,
            "facts": _jsonable(dict(assessment.facts)),
        },
        "on_hang": dict(action) if action else None,
        "watcher": dict(watcher or {}),
        "samples": {
            "ticks": len(ticks),
            "first": ticks[0]["at"] if ticks else None,
            "last": ticks[-1]["at"] if ticks else None,
            "raw_ticks": sum(1 for t in ticks if any("raw" in e for e in t["nodes"].values())),
            "dropped_for_size": dropped,
        },
    }
    # the raw output holds the job's log tail: a token a job printed is masked in what is kept
    files = {
        "incident.json": json.dumps(scrub(body), indent=2, default=str) + "\n",
        "samples.jsonl": "".join(json.dumps(scrub(t), default=str) + "\n" for t in ticks),
        "summary.txt": redact_text(summary_text(event, assessment, ticks, action)),
    }
    return store_files(incident_id(at, job_key, assessment.verdict), files, output_dir)


def summary_text(event: Mapping, assessment, ticks: Sequence[dict], action: Mapping | None = None) -> str:
    from tabulate import tabulate

    from nodecheck.core.hostlist import fold

    head = [
        f"nodecheck watch: job {event['job']}: {assessment.verdict}"
        + (f" (was {event['previous']})" if event.get("previous") else "")
        + f" at {event['at']}",
        one_line(assessment.message),
        f"since {_iso(assessment.since)}"
        + (f"; nodes {fold(assessment.nodes)}" if assessment.nodes else "")
        + (f"; ranks {', '.join(map(str, assessment.ranks))}" if assessment.ranks else ""),
    ]
    if action:
        head.append(f"on-hang {action.get('action')}: {action.get('result')}")
    rows = []
    for t in ticks[-SUMMARY_TICKS:]:
        for node, entry in t["nodes"].items():
            rows.append([t["at"][11:19], node, *_numbers(entry)])
    table = (
        tabulate(
            rows,
            headers=["time", "node", "gpu util %", "power W", "step", "throughput", "processes", "problem"],
            tablefmt="simple",
        )
        if rows
        else "(no samples)"
    )
    more = f" (last {SUMMARY_TICKS} of {len(ticks)} ticks)" if len(ticks) > SUMMARY_TICKS else ""
    return "\n".join(head) + f"\n\nsamples{more}, full data in samples.jsonl:\n" + table + "\n"


def _numbers(entry: Mapping) -> list:
    """min-max utilization, total board power, step, throughput, process count, the failure if any."""
    sample, progress = entry.get("sample") or {}, entry.get("progress") or {}
    gpus = sample.get("gpus") or []
    utils = [g["util_pct"] for g in gpus if g.get("util_pct") is not None]
    powers = [g["power_w"] for g in gpus if g.get("power_w") is not None]
    util = (f"{min(utils):g}" if min(utils) == max(utils) else f"{min(utils):g}-{max(utils):g}") if utils else ""
    procs = sample.get("processes")
    problem = entry.get("failure") or sample.get("gpu_error") or sample.get("log_error") or ""
    step, throughput = progress.get("step"), progress.get("throughput")
    return [
        util,
        f"{sum(powers):.0f}" if powers else "",
        "" if step is None else step,
        "" if throughput is None else f"{throughput:g}",
        len(procs) if procs is not None else "",
        one_line(str(problem))[:80],
    ]


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _jsonable(value):
    """Mappings with int keys (rank -> seconds) and tuples become plain JSON types."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value

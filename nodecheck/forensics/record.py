"""What forensics says: the text an operator reads (render), the JSON record (to_json), and the record
directory under reports/ with every dump that parsed, every stack and capture (files), written
atomically by report/store.py. A dump's bytes are kept only when they parsed as a flight-recorder dump:
bytes that did not are whatever the path held, and the record says why they were left out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import PurePath

from nodecheck.core.hostlist import fold
from nodecheck.forensics.analysis import Forensics
from nodecheck.forensics.collectives import describe, last_completed_text
from nodecheck.forensics.stacks import describe_group, frame_text
from nodecheck.parsers.watch_sample import GpuSample
from nodecheck.report import capture_relpath
from nodecheck.report.store import safe_key

RECORD_VERSION = 1


def render(f: Forensics, label: str) -> str:
    g = f.gathered
    d = f.diagnosis
    lines = [_head(f, label), f"verdict: {d.headline}"]
    if d.evidence:
        lines.append("evidence:")
        lines += [f"  {e}" for e in d.evidence]
    if f.findings:
        lines.append("last collective completed (flight recorder):")
        lines += [
            f"  pg {x.pg or '(unnamed)'}{f' ({x.desc})' if x.desc else ''}: {last_completed_text(x)}"
            for x in f.findings
        ]
    other = [x for x in f.findings if describe(x, _place(f)) not in d.evidence]
    if other:
        lines.append("other process groups:")
        lines += [f"  {describe(x, _place(f))}" for x in other]
    if f.groups:
        versions = sorted({v for v in (g.pyspy.values() if g else ()) if v})
        lines.append(f"stacks ({', '.join(versions) or 'py-spy'}; {len(f.stacks)} processes):")
        lines += [f"  {describe_group(grp)}" for grp in f.groups]
    if g is not None and g.snapshots:
        lines.append("nodes:")
        for node in g.nodes:
            lines.append(f"  {node}: {_node_line(f, node)}")
    lines.append(f"next step: {d.next_step}")
    if f.notes:
        lines.append("notes:")
        lines += [f"  {n}" for n in f.notes]
    return "\n".join(lines) + "\n"


def _head(f: Forensics, label: str) -> str:
    g = f.gathered
    ranks = len({p.rank for p in g.processes if p.rank is not None}) if g else 0
    read = sum(1 for r in f.dumps if r.dump is not None)
    parts = [f"nodecheck forensics: job {label}"]
    if g is not None:
        parts.append(f"{len(g.nodes)} node{'s' if len(g.nodes) != 1 else ''} ({fold(g.nodes) if g.nodes else 'none'})")
        parts.append(f"{len(g.processes)} processes, {ranks} ranks")
    parts.append(f"{read} of {len(f.dumps)} flight-recorder dumps read")
    return ", ".join(parts)


def _place(f: Forensics):
    by_rank = {p.rank: p for p in (f.gathered.processes if f.gathered else []) if p.rank is not None}
    return lambda rank: by_rank[rank].place if rank in by_rank else ""


def _node_line(f: Forensics, node: str) -> str:
    g = f.gathered
    assert g is not None  # called for the nodes gathered
    if node in g.failures:
        return f"not read: {g.failures[node]}"
    snap = g.snapshots[node]
    parts = [gpu_line(snap.gpus) if snap.gpus else f"GPUs unknown ({snap.gpu_error})"]
    ev = f.events.get(node)
    if ev is not None and ev.kernel_error:
        parts.append(f"kernel log not read ({ev.kernel_error})")
    elif ev is not None:
        parts.append("; ".join(ev.xids) if ev.xids else "no Xid")
        parts.append("; ".join(ev.ooms) if ev.ooms else "no OOM kill")
    if snap.log_watched:
        parts.append(f"log: {snap.log_error}" if snap.log_error else f"{len(snap.nccl_warns)} NCCL WARN lines")
    return "; ".join(parts)


def gpu_line(gpus: Sequence[GpuSample]) -> str:
    """ "8 GPUs: util 100% (GPU3 0%), power 188-195 W of 1100 W"."""
    utils = [g.util_pct for g in gpus if g.util_pct is not None]
    text = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
    if utils:
        common = max(set(utils), key=utils.count)
        odd = [f"GPU{g.index} {g.util_pct:g}%" for g in gpus if g.util_pct is not None and g.util_pct != common]
        text += f": util {common:g}%" + (f" ({', '.join(odd)})" if odd else "")
    powers = [g.power_w for g in gpus if g.power_w is not None]
    if powers:
        limits = sorted({g.power_limit_w for g in gpus if g.power_limit_w is not None})
        of = f" of {limits[0]:g} W" if len(limits) == 1 else ""
        span = f"{min(powers):g}" if min(powers) == max(powers) else f"{min(powers):g}-{max(powers):g}"
        text += f", power {span} W{of}"
    return text


def to_json(f: Forensics, label: str, started: str, finished: str) -> dict:
    from nodecheck import __version__

    g = f.gathered
    place = _place(f)
    return {
        "record_version": RECORD_VERSION,
        "kind": "forensics",
        "job": label,
        "started": started,
        "finished": finished,
        "nodecheck_version": __version__,
        "diagnosis": {
            "class": f.diagnosis.kind,
            "headline": f.diagnosis.headline,
            "culprit_ranks": list(f.diagnosis.culprit_ranks),
            "culprit_nodes": list(f.diagnosis.culprit_nodes),
            "evidence": list(f.diagnosis.evidence),
            "next_step": f.diagnosis.next_step,
            "basis": f.diagnosis.basis,
        },
        "process_groups": [dict(asdict(x), text=describe(x, place)) for x in f.findings],
        "stack_groups": [
            {
                "text": describe_group(grp),
                "ranks": list(grp.ranks),
                "nodes": list(grp.nodes),
                "failure": grp.failure,
                "frames": [frame_text(fr) for fr in grp.frames],
                "processes": [{"node": p.node, "pid": p.pid, "rank": p.rank} for p in grp.members],
            }
            for grp in f.groups
        ],
        "processes": [asdict(p) for p in (g.processes if g else [])],
        "dumps": [
            {
                "node": r.read.node,
                "path": r.read.path,
                "read": r.dump is not None,
                "error": r.error,
                "rank": r.dump.rank if r.dump else None,
                "version": r.dump.version if r.dump else None,
                "format": r.dump.format if r.dump else None,
                "entries": len(r.dump.entries) if r.dump else None,
                "file": _dump_relpath(r.read.node, r.read.path, k) if _kept(r) else None,
                "not_kept": _not_kept(r),
            }
            for k, r in enumerate(f.dumps)
        ],
        "nodes": {node: _node_json(f, node) for node in (g.nodes if g else [])},
        "notes": list(f.notes),
    }


def _node_json(f: Forensics, node: str) -> dict:
    g = f.gathered
    assert g is not None  # called for the nodes gathered
    if node in g.failures:
        return {"reached": False, "failure": g.failures[node]}
    snap = g.snapshots[node]
    ev = f.events.get(node)
    return {
        "reached": True,
        "gpus": [asdict(x) for x in snap.gpus],
        "gpu_error": snap.gpu_error,
        "xids": list(ev.xids) if ev else [],
        "ooms": list(ev.ooms) if ev else [],
        "kernel_log_error": ev.kernel_error if ev else "not gathered",
        "nccl_warns": list(snap.nccl_warns),
        "log_error": snap.log_error,
        "pyspy": g.pyspy.get(node),
        "stack_failure": g.stack_failures.get(node, ""),
    }


def files(f: Forensics, record: dict, summary: str) -> dict[str, str | bytes]:
    """The record directory's contents (relative path -> text or bytes): `record` (to_json's) and
    `summary` (render's) as the caller made them, every raw capture, stack and dump."""
    out: dict[str, str | bytes] = {
        "forensics.json": json.dumps(record, indent=1, default=str) + "\n",
        "summary.txt": summary,
    }
    g = f.gathered
    if g is not None:
        for c in g.captures:
            out[capture_relpath(c.node, c.probe)] = c.stdout
            if c.stderr:
                out[capture_relpath(c.node, c.probe, "stderr")] = c.stderr
    for s in f.stacks:
        if s.raw:
            out[f"stacks/{safe_key(s.process.node)}/pid-{s.process.pid}.txt"] = s.raw
    for k, r in enumerate(f.dumps):
        if _kept(r):
            assert r.read.data is not None  # _kept: the dump was read and parsed
            out[_dump_relpath(r.read.node, r.read.path, k)] = r.read.data
    return out


def _kept(r) -> bool:
    """Only a dump that parsed is copied into the record: other bytes are whatever the path held."""
    return r.read.data is not None and r.dump is not None


def _not_kept(r) -> str:
    if r.read.data is not None and r.dump is None:
        return "its bytes are not kept: they did not parse as a flight-recorder dump"
    return ""


def _dump_relpath(node: str, path: str, k: int) -> str:
    # numbered: two prefixes on one node may hold files of the same name
    return f"dumps/{safe_key(node or 'local')}/{k:03d}-{safe_key(PurePath(path).name)}"

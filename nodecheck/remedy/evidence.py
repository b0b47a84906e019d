"""The evidence bundle: before the first action on a node in an incident (or a hold), what a person
or a vendor needs later, kept private beside the report: the failing checks' captures (named, they
are in the report already), the kernel log since boot, nvidia-bug-report.sh where installed
(bounded in time), ibstat and perfquery for a fabric failure. Written 0600 in a 0700 directory:
a bug report carries the whole machine's configuration."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from nodecheck.core.model import Capture, Outcome
from nodecheck.core.redact import redact_text
from nodecheck.parsers.sections import split_sections
from nodecheck.probes.remedy import evidence_probe
from nodecheck.remedy.model import Failure
from nodecheck.report import store

FABRIC_CHECKS = ("ib.", "roce.", "hca.", "nccl.")  # failures whose evidence includes the HCAs' view


@dataclass(frozen=True)
class Bundle:
    path: str  # the bundle's directory ("" when it could not be written)
    files: tuple[str, ...]
    notes: tuple[str, ...]  # what is missing, and why

    @property
    def said(self) -> str:
        if not self.path:
            return "no evidence bundle: " + "; ".join(self.notes)
        return self.path + (f" ({'; '.join(self.notes)})" if self.notes else "")


def wants_fabric(failures: Sequence[Failure]) -> bool:
    return any(f.check.startswith(FABRIC_CHECKS) for f in failures)


def probe_for(failures: Sequence[Failure], bug_report_s: float):
    return evidence_probe(bug_report_s, wants_fabric(failures))


def write_bundle(
    report_dir: str | None, node: str, failures: Sequence[Failure], capture: Capture, now: datetime | None = None
) -> Bundle:
    """The bundle from the evidence probe's capture, under <report_dir>/evidence/<node>/."""
    notes: list[str] = []
    if not report_dir:
        return Bundle("", (), ("the report was not written, so the bundle has nowhere to go",))
    where = Path(report_dir) / "evidence" / node
    files: dict[str, bytes] = {}
    if capture.outcome is not Outcome.EXITED:
        notes.append(f"the evidence probe did not complete ({capture.outcome.value}: {capture.detail})")
    sections = split_sections(capture.stdout, "remedy-evidence")
    for name in ("dmesg", "ibstat", "perfquery"):
        section = sections.get(name)
        if section is not None:
            # tool output, as the report's captures: a token a tool echoed is masked
            files[f"{name}.txt"] = redact_text(section.text).encode("utf-8", "replace")
    report_text = sections.get("nvidia-bug-report")
    if sections.facts.get("nvidia_bug_report") == "missing":
        notes.append("nvidia-bug-report.sh is not installed on the node")
    elif report_text is not None:
        try:
            files["nvidia-bug-report.log.gz"] = base64.b64decode("".join(report_text.text.split()), validate=True)
        except (binascii.Error, ValueError):
            notes.append("nvidia-bug-report.sh's output was cut or unreadable (over 7.5 MiB, or cut at its time bound)")
        rc = sections.facts.get("nvidia_bug_report_rc", "")
        if rc not in ("", "0"):
            notes.append(f"nvidia-bug-report.sh exited {rc} (124: cut at its time bound)")
    manifest = {
        "node": node,
        "collected": (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "failures": [
            {"check": f.check, "subject": f.subject, "message": f.message, "capture": f.capture} for f in failures
        ],
        "files": sorted(files),
        "notes": notes,
    }
    files["manifest.json"] = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    try:
        store.make_dirs(where, store.private())
        for name, data in files.items():
            store.write_atomic(where / name, data, store.private())
    except OSError as e:
        return Bundle("", (), (*notes, f"cannot write {where}: {store.why(e)}"))
    return Bundle(str(where), tuple(sorted(files)), tuple(notes))

"""The playbook text of a translation: its YAML, each check under comments naming the NHC lines it
came from, and the lines not translated listed at the end."""

from __future__ import annotations

import re

import yaml

from nodecheck.app.nhc_model import Remark, Translation, block_of


def render(result: Translation) -> str:
    """The playbook: YAML a `nodecheck run --playbook` loads, each check under comments naming the
    NHC lines it came from, the lines not translated listed at the end."""
    src = result.source
    out = [
        "# nodecheck playbook translated from an LBNL NHC configuration by `nodecheck import-nhc`.",
        f"# source: {comment(src)} ({result.lines} lines, sha256 {result.sha256 or 'unknown'})",
        f"# {sum(len(v) for v in result.origins.values())} line(s) translated into {len(result.checks)} check(s); "
        f"{len(result.untranslated)} not translated (listed at the end); {len(result.ignored)} need nothing.",
        "# NHC's repairs (start/restart a service, remount, -e/-E actions, kill) are never translated:",
        "# nodecheck judges and reports; draining is the Slurm gate's decision (docs/slurm-gate.md).",
        "version: 1",
        "description: " + _scalar(f"Translated from NHC configuration {src} by nodecheck import-nhc"),
    ]
    if result.deadline_s is not None and result.deadline_line is not None:
        out.append(f"# {_where(src, result.deadline_line)}  {comment(result.deadline_line.text)}")
        out.append(f"deadline_s: {int(result.deadline_s)}")
    out.append("checks:")
    for name in result.checks:
        block = block_of(result, name)
        for origin in result.origins[name]:
            out.append(f"  # {_where(src, origin)}  {comment(origin.text)}")
            if origin.note:
                out.append(f"  #   {comment(origin.note)}")
        if block:
            body = yaml.safe_dump({name: block}, sort_keys=False, default_flow_style=False, width=100)
            out.extend("  " + line for line in body.rstrip("\n").split("\n"))
        else:
            out.append(f"  {name}: {{}}")
    if result.ignored:
        out.append("")
        out.append("# Lines that need nothing in nodecheck:")
        for item in result.ignored:
            out.append(f"# {_where(src, item)}  {comment(item.text)}")
            out.append(f"#   {comment(item.note)}")
    if result.untranslated:
        out.append("")
        out.append("# NOT TRANSLATED (line: why):")
        for miss in result.untranslated:
            out.append(f"# {comment(src)}:{miss.line}  {comment(miss.text)}")
            out.append(f"#   {comment(miss.reason)}")
    return "\n".join(out) + "\n"


def _where(src: str, remark: Remark) -> str:
    return f"{comment(src)}:{remark.line}"


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")


def comment(text: str, limit: int = 200) -> str:
    """Text fit for one YAML comment line: no control characters, bounded."""
    text = _UNPRINTABLE.sub("?", text)
    return text if len(text) <= limit else text[:limit] + "..."


def _scalar(text: str) -> str:
    return yaml.safe_dump(text, default_style='"', width=10_000).strip().removesuffix("...").strip()

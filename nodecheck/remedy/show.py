"""A remediation plan as a person reads it (a table) and as a program does (JSON)."""

from __future__ import annotations

import json

from tabulate import tabulate

from nodecheck.core.model import one_line
from nodecheck.remedy.model import Plan

MAX_WHY = 160  # a table cell; the JSON and the gate log keep the whole of it


def plan_table(the_plan: Plan, acting: bool = False) -> str:
    rows = [
        [
            p.node,
            p.verb,
            p.action if p.verb == "act" else "resume" if p.verb == "return" else "-",
            _cut(one_line(p.why)),
        ]
        for p in the_plan.nodes
        if p.verb != "healthy"
    ]
    healthy = [p.node for p in the_plan.nodes if p.verb == "healthy"]
    lines = []
    if rows:
        lines.append(tabulate(rows, headers=["NODE", "PLAN", "STEP", "WHY"], tablefmt="plain"))
    if healthy:
        lines.append(f"healthy (nothing to repair): {', '.join(healthy)}")
    counts = {v: len(the_plan.by_verb(v)) for v in ("act", "return", "hold", "wait", "leave")}
    lines.append(
        f"plan: {counts['act']} to act on, {counts['return']} to return, {counts['hold']} held for a person, "
        f"{counts['wait']} waiting, "
        f"{counts['leave']} left alone; at most {the_plan.capacity} node"
        f"{'s' if the_plan.capacity != 1 else ''} in remediation at once"
        + (f" ({len(the_plan.in_remediation)} under way)" if the_plan.in_remediation else "")
        + f"; ladders {the_plan.ladders_file}"
    )
    if not acting:
        lines.append("observe: nothing was changed (no Slurm state, GPU or service)")
    return "\n".join(lines) + "\n"


def plan_json(the_plan: Plan) -> str:
    doc = {
        "ladders": the_plan.ladders_file,
        "capacity": the_plan.capacity,
        "in_remediation": list(the_plan.in_remediation),
        "observe": True,
        "nodes": [
            {
                "node": p.node,
                "plan": p.verb,
                "step": p.action if p.verb == "act" else None,
                "target": p.target or None,
                "ladder": p.ladder or None,
                "rung": list(p.rung) if p.verb == "act" else None,
                "why": p.why,
                "failures": [
                    {"check": f.check, "subject": f.subject, "message": f.message, "capture": f.capture}
                    for f in p.failures
                ],
            }
            for p in the_plan.nodes
        ],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _cut(text: str) -> str:
    return text if len(text) <= MAX_WHY else text[: MAX_WHY - 1] + "…"

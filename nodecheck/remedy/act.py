"""The executor: carries out a remediation plan, one node at a time, and puts every step on record.

For a node the plan says to act on:
1. re-read its Slurm state just before acting: still drained by nodecheck, not held, no job on it,
   not rebooting (a plan is a few seconds old; a job or a person may have come since);
2. before the first action of an incident, collect the evidence bundle (nodecheck.remedy.evidence);
3. write the action to the node's record as pending (synced), then take it:
   - reset_gpu / restart_service on the node, behind its idle guard (a job step, a job allocated
     there or a GPU process refuses it: nothing is done, the record says refused);
   - reboot through Slurm (`scontrol reboot reason=...`): the node comes back drained and the run
     after its boot is its re-proof;
4. write the outcome; after a reset or a restart, re-prove the node now (the caller's `reprove`:
   the health playbook, and the action's acceptance playbook) and resume it only when everything
   passes, with a `returned` entry naming the re-proof's report.
A hold sets the drain reason "<check> needs a person: <why>" (owned, never resumed by nodecheck);
a node the plan returns (re-proven after a reboot) is resumed. Every change goes to the gate log.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from nodecheck.app.slurm import MAX_REASON_CHARS, Slurm, SlurmError, drain_politely, drain_reason, resume_politely
from nodecheck.config.remedy import RemedySettings
from nodecheck.core.model import Capture, Node, Outcome, excerpt, one_line
from nodecheck.gate.answered import write_answered
from nodecheck.gate.command import GateLog
from nodecheck.parsers.sections import split_sections
from nodecheck.parsers.slurm import NodeState, held_for_a_person
from nodecheck.probes.idle import refusal
from nodecheck.probes.remedy import action_probe
from nodecheck.remedy import record
from nodecheck.remedy.evidence import Bundle, probe_for, write_bundle
from nodecheck.remedy.model import Entry, NodePlan, Plan
from nodecheck.remedy.model import Outcome as Said
from nodecheck.remedy.plan import BUSY_FLAGS, REBOOT_FLAGS, over_budget, repairing, settled, taken
from nodecheck.report import Report
from nodecheck.transport import Transport

_GPU = re.compile(r"\d{1,3}|[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}(\.[0-7])?")
_UNIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9:_.@\\-]{0,254}")
CONNECT_S = 15.0


@dataclass(frozen=True)
class Taken:
    """What the executor did about one node, for the result lines."""

    node: str
    what: str  # "reset_gpu GPU3", "hold", "return"
    result: str  # done | failed | refused | not-taken | held | returned | still-failing | pending
    detail: str = ""
    evidence: str = ""
    reproof: str = ""  # the re-proof's report directory

    @property
    def line(self) -> str:
        extra = "".join(f"; {k} {v}" for k, v in (("evidence", self.evidence), ("re-proof", self.reproof)) if v)
        return one_line(
            f"{self.node}: {self.what}: {self.result}" + (f" ({self.detail})" if self.detail else "") + extra
        )


Reprove = Callable[[Node, datetime, str], tuple[Report, str | None]]  # (report, where it was stored)


@dataclass
class Executor:
    slurm: Slurm
    transport: Transport
    nodes: Mapping[str, Node]
    state_dir: str
    log: GateLog
    report: Report
    report_dir: str | None
    reprove: Reprove
    bug_report_s: float = 300.0
    token: str = ""
    settings: RemedySettings = field(default_factory=RemedySettings)  # the budgets
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc)

    def carry_out(self, the_plan: Plan) -> list[Taken]:
        out: list[Taken] = []
        for p in the_plan.nodes:
            if p.verb in ("act", "hold", "return") and p.node not in self.nodes:
                why = "how to reach it is not known (not among the inventory's nodes)"
                if p.verb != "hold" or not p.why.startswith("already held"):
                    out.append(Taken(p.node, p.action if p.verb == "act" else p.verb, "not-taken", why))
                continue
            if p.verb == "act":
                out.append(self._act(p))
            elif p.verb == "hold" and p.step is None and not p.why.startswith("already held"):
                out.append(self._hold(p))
            elif p.verb == "return":
                out.append(self._return(p))
        return out

    # ---- the steps ----------------------------------------------------------------------------

    def _act(self, p: NodePlan) -> Taken:
        assert p.step is not None
        what = p.action
        state, why_not = self._still_ours(p.node)
        if why_not:
            self.log.event("remedy-not-taken", p.node, step=what, message=why_not)
            return Taken(p.node, what, "not-taken", why_not)
        assert state is not None  # _still_ours read it
        target = p.target
        if p.step.action == "reset_gpu" and not _GPU.fullmatch(target):
            return self._refuse_target(p, what, f"GPU {target!r} is not an index or a PCI bus id")
        if p.step.action == "restart_service" and not _UNIT.fullmatch(target):
            return self._refuse_target(p, what, f"unit {target!r} is not a unit name")
        try:
            history = self._settle(p.node, state)
        except (OSError, record.RecordError) as e:
            why = f"its action record cannot be read or written, so nothing was done: {e}"
            self.log.event("remedy-failed", p.node, step=what, message=why)
            return Taken(p.node, what, "failed", why)
        why_not = self._claim(p, state)
        if why_not:
            self.log.event("remedy-not-taken", p.node, step=what, message=why_not)
            return Taken(p.node, what, "not-taken", why_not)
        bundle = self._evidence(p) if not _incident_open(history) else None
        started = self.now()
        evidence = bundle.path if bundle else _incident_bundle(history)
        pending = Entry(started, "action", p.step.action, target, p.ladder, _check(p), "pending", p.why[:500], evidence)
        try:
            record.append(self.state_dir, p.node, [pending])
        except (OSError, record.RecordError) as e:  # nothing is done that is not on record first
            self._release(p.node, state.reason)
            why = f"cannot write its action record, so nothing was done: {e}"
            self.log.event("remedy-failed", p.node, step=what, message=why)
            return Taken(p.node, what, "failed", why)
        if p.step.action == "reboot":
            return self._reboot(p, pending, state.reason)
        capture = self._run(p.node, action_probe(p.step.action, target))
        outcome, detail = _action_outcome(capture)
        record.append(self.state_dir, p.node, [replace(pending, at=self.now(), outcome=outcome, detail=detail)])
        self.log.event(f"remedy-{outcome}", p.node, step=what, ladder=p.ladder, message=detail, evidence=evidence)
        if outcome != "done":
            self._release(p.node, state.reason)
            return Taken(p.node, what, outcome, detail, evidence)
        report, where = self.reprove(self.nodes[p.node], started, p.step.action)
        taken = self._after_reproof(p.node, what, report, where, evidence)
        if taken.result != "returned":
            self._release(p.node, state.reason)
        return taken

    def _claim(self, p: NodePlan, before: NodeState) -> str:
        """Mark the node as under repair in its drain reason (any nodecheck can count the cluster's
        repairs from Slurm), then count: when more nodes than the budget marked themselves at the
        same moment, the ones marked later (by reason time, then name) step back. "" = go on."""
        rung = f", step {p.rung[0]} of {p.rung[1]}" if p.rung[1] else ""
        body = f"repairing: {p.action} ({p.ladder or 'no ladder'}{rung}): {p.failures[0].message if p.failures else ''}"
        change = drain_politely(
            self.slurm, p.node, drain_reason(_check(p), body, MAX_REASON_CHARS, self.token), self.token
        )
        if change.action not in ("drain", "kept"):
            return f"cannot mark it as under repair: {change.reason}"
        try:
            states = self.slurm.nodes()
        except SlurmError as e:
            self._release(p.node, before.reason)
            return f"cannot count the nodes under repair: {e}"
        under = sorted((s.reason_time or "~", n) for n, s in states.items() if repairing(s, self.token))
        place = next((i for i, (_, n) in enumerate(under) if n == p.node), len(under))
        ahead = [n for _, n in under[:place]]
        why = over_budget(p.node, ahead, states, self.settings, len(states), ahead)
        if why:
            self._release(p.node, before.reason)
            return why.replace("in remediation at once", "under repair at once")
        return ""

    def _release(self, node: str, reason: str) -> None:
        """Back to the drain reason it had before the repair (the failure's, ours)."""
        change = drain_politely(self.slurm, node, reason, self.token)
        if change.action not in ("drain", "kept"):
            self.log.event("remedy-failed", node, step="restore the drain reason", message=change.reason)

    def _reboot(self, p: NodePlan, pending: Entry, before_reason: str) -> Taken:
        reason = drain_reason(_check(p), f"rebooting: {p.why}", MAX_REASON_CHARS, self.token)
        evidence = pending.evidence
        try:
            self.slurm.reboot(p.node, reason)
        except SlurmError as e:
            detail = f"scontrol reboot failed: {e}"
            record.append(self.state_dir, p.node, [replace(pending, at=self.now(), outcome="failed", detail=detail)])
            self._release(p.node, before_reason)
            self.log.event("remedy-failed", p.node, step="reboot", message=detail, evidence=evidence)
            return Taken(p.node, "reboot", "failed", detail, evidence)
        self.log.event("remedy-reboot", p.node, step="reboot", ladder=p.ladder, reason=reason, evidence=evidence)
        return Taken(p.node, "reboot", "pending", "Slurm reboots it when idle; re-proven after it boots", evidence)

    def _hold(self, p: NodePlan) -> Taken:
        state, why_not = self._still_ours(p.node, busy_ok=True)
        if why_not:
            self.log.event("remedy-not-taken", p.node, step="hold", message=why_not)
            return Taken(p.node, "hold", "not-taken", why_not)
        try:
            history = self._settle(p.node, state)
        except (OSError, record.RecordError) as e:
            why = f"its action record cannot be read or written, so it was not held: {e}"
            self.log.event("remedy-failed", p.node, step="hold", message=why)
            return Taken(p.node, "hold", "failed", why)
        bundle = self._evidence(p) if not _incident_open(history) else None
        body = p.why if p.why.startswith("needs a person:") else f"needs a person: {p.why}"
        reason = drain_reason(_check(p), body, MAX_REASON_CHARS, self.token)
        change = drain_politely(self.slurm, p.node, reason, self.token)
        evidence = bundle.path if bundle else _incident_bundle(history)
        if change.action in ("drain", "kept"):
            held = Entry(self.now(), "held", check=_check(p), detail=p.why[:2000], evidence=evidence)
            record.append(self.state_dir, p.node, [held])
            self.log.event("hold", p.node, reason=reason, evidence=evidence)
            return Taken(p.node, "hold", "held", p.why, evidence)
        self.log.event("remedy-failed", p.node, step="hold", message=change.reason)
        return Taken(p.node, "hold", "failed" if change.action == "failed" else "not-taken", change.reason)

    def _return(self, p: NodePlan) -> Taken:
        try:
            return self._returned(p)
        except (OSError, record.RecordError) as e:
            why = f"its action record cannot be read or written: {e}"
            self.log.event("remedy-failed", p.node, step="return", message=why)
            return Taken(p.node, "return", "failed", why)

    def _returned(self, p: NodePlan) -> Taken:
        state, why_not = self._still_ours(p.node)
        if state is not None and not state.drained:
            # the gate resumed it this run (its check passes again): the incident ends here
            self._settle(p.node, state)
            entry = Entry(
                self.now(), "returned", detail=f"re-proven: passed and resumed by the gate ({self.report_dir})"
            )
            record.append(self.state_dir, p.node, [entry])
            return Taken(p.node, "return", "returned", "re-proven: resumed by the gate")
        if why_not:
            return Taken(p.node, "return", "not-taken", why_not)
        self._settle(p.node, state)
        if p.since is not None:  # failures an earlier action answered: re-prove since that action
            report, where = self.reprove(self.nodes[p.node], p.since, "return")
            return self._after_reproof(p.node, "return", report, where, "")
        return self._after_reproof(p.node, "return", self.report, self.report_dir, "")

    def _after_reproof(self, node: str, what: str, report: Report, where: str | None, evidence: str) -> Taken:
        """Resume the node if every check passed on it; else it stays drained for the next rung."""
        status = report.node_status(node)
        proof = where or "report not written"
        if not status.healthy:
            bad = [r for r in report.results_for(node) if not r.verdict.status.healthy]
            detail = "; ".join(f"{r.check} {r.verdict.status.value}: {r.verdict.message}" for r in bad)[:500]
            detail = detail or "no result: the node was not checked"
            self.log.event("still-failing", node, step=what, message=detail, evidence=proof)
            return Taken(node, what, "still-failing", detail, evidence, proof)
        self._answered(node)  # before the resume: a job's Prolog right after it must not see the old events
        change = resume_politely(self.slurm, node, self.token)
        if change.action != "resume":
            self.log.event("remedy-not-returned", node, message=change.reason, evidence=proof)
            return Taken(
                node, what, "failed" if change.action == "failed" else "not-taken", change.reason, evidence, proof
            )
        record.append(self.state_dir, node, [Entry(self.now(), "returned", detail=f"re-proven: {proof}")])
        self.log.event("resume", node, reason=change.reason, message=f"re-proven after {what}", evidence=proof)
        return Taken(node, what, "returned", "re-proven: every check passes", evidence, proof)

    # ---- helpers ------------------------------------------------------------------------------

    def _answered(self, node: str) -> None:
        """The node's kernel-log events before its last action were answered by it (the re-proof
        looked back to the action and passed): its own Prolog and health runs judge from there on
        (nodecheck.gate.answered). Not written: they judge the whole window, the stricter way."""
        try:
            actions = taken(record.load(self.state_dir, node))
            if actions:
                write_answered(self.state_dir, node, actions[-1].at)
        except (OSError, record.RecordError) as e:
            self.log.event("answered-not-written", node, message=str(e))

    def _still_ours(self, node: str, busy_ok: bool = False) -> tuple[NodeState | None, str]:
        """The node's state now, and why nothing may be done to it ("" when it may)."""
        try:
            state = self.slurm.nodes([node]).get(node)
        except SlurmError as e:
            return None, f"cannot read its Slurm state just before acting: {e}"
        if state is None:
            return None, "Slurm no longer lists it"
        if not state.drained or state.owner(self.token) != "ours":
            return state, f"no longer drained by nodecheck ({state.state}, {excerpt(state.reason, 120)!r})"
        if held_for_a_person(state.reason):
            return state, "held for a person meanwhile"
        if not busy_ok and state.flags & BUSY_FLAGS:
            return state, f"a job came onto it since the plan ({state.state}): not touched"
        if state.flags & REBOOT_FLAGS:
            return state, f"a reboot is under way ({state.state})"
        return state, ""

    def _settle(self, node: str, state: NodeState | None) -> tuple[Entry, ...]:
        """The node's record, with a finished reboot's outcome written (as the planner read it)."""
        now_record = record.load(self.state_dir, node)
        done = settled(now_record, state, self.now())
        if len(done) > len(now_record):
            record.append(self.state_dir, node, list(done[len(now_record) :]))
        return done

    def _evidence(self, p: NodePlan) -> Bundle:
        capture = self._run(p.node, probe_for(p.failures, self.bug_report_s))
        bundle = write_bundle(self.report_dir, p.node, p.failures, capture, self.now())
        self.log.event("evidence", p.node, message="; ".join(bundle.notes), evidence=bundle.path or bundle.said)
        return bundle

    def _run(self, node: str, probe) -> Capture:
        session = self.transport.connect(self.nodes[node], CONNECT_S)
        try:
            return session.run(probe, probe.timeout_s)
        finally:
            session.close()

    def _refuse_target(self, p: NodePlan, what: str, why: str) -> Taken:
        self.log.event("remedy-not-taken", p.node, step=what, message=why)
        return Taken(p.node, what, "not-taken", why)


def _check(p: NodePlan) -> str:
    return p.failures[0].check if p.failures else "remedy"


def _incident_bundle(history: Sequence[Entry]) -> str:
    """The evidence bundle of the incident under way (its first action's), or ""."""
    start = max((i + 1 for i, e in enumerate(history) if e.event in ("returned", "held")), default=0)
    return next((e.evidence for e in history[start:] if e.evidence), "")


def _incident_open(history: Sequence[Entry]) -> bool:
    """Has an action been taken since the node last returned (or was held)? Then its bundle exists."""
    start = max((i + 1 for i, e in enumerate(history) if e.event in ("returned", "held")), default=0)
    return bool(taken(history[start:]))


def _action_outcome(capture: Capture) -> tuple[Said, str]:
    """(done | failed | refused, what the node said)."""
    if capture.outcome is not Outcome.EXITED:
        return "failed", f"{capture.outcome.value}: {capture.detail}"[:500]
    sections = split_sections(capture.stdout, "remedy-action")
    why = refusal(sections.facts)
    if why is not None:
        return "refused", f"the node's idle guard refused: {why}"[:500]
    action = sections.get("action")
    if capture.exit_code != 0 or action is None:
        said = excerpt(capture.stdout + capture.stderr, 300)
        return "failed", f"exit {capture.exit_code}: {said}"[:500]
    text = one_line(action.text.strip())[:400]
    if action.rc != 0:
        return "failed", f"exit {action.rc}: {text}"
    return "done", text or "exit 0"

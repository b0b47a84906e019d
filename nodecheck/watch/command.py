"""`nodecheck watch`'s loop: sample a running job's nodes from outside, every interval, and say when its
verdict changes (stdout, an incident record, alerts). The judging is classify.Tracker's, the job's nodes
target.py's, --on-hang onhang.py's, the kept connections transport/kept.py's; this module is the loop.

One tick: the job's nodes (Slurm: `scontrol show job` each tick, since a job starts, grows, ends and is
requeued; an inventory: fixed) -> one sample probe per node through transport.fanout with the sample
timeout as deadline -> parsed (a node whose output cannot be read carries the failure and its excerpt:
evidence, never a crash) -> Tracker.update -> on a change of verdict: --on-hang, the incident record,
alerts -> state.json. Ticks follow a monotonic schedule (start + k x interval: no drift; a tick that ran
long skips the boundaries it missed). SIGTERM/SIGINT: the tick in flight is dropped (its partial
samples would read as unresponsive nodes), the state saved, the exit code is the last verdict's.

The watcher never touches the job unless --on-hang says so, and then once per hang.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import threading
import time
import traceback
from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from nodecheck.app.signals import STOPPED
from nodecheck.core.errors import ConfigError, ParseError
from nodecheck.core.hostlist import fold
from nodecheck.core.model import Capture, Cut, Node, Outcome, excerpt, one_line
from nodecheck.report.store import safe_key
from nodecheck.transport.kept import KeptSessions
from nodecheck.watch.alerts import Deliverer, alert_kind, build_event, channels_of, iso
from nodecheck.watch.incident import TickHistory, tick_record, write_incident
from nodecheck.watch.onhang import OnHang
from nodecheck.watch.state import StateDir, WatchState, config_fingerprint
from nodecheck.watch.target import InventoryJob, SlurmJob, Target, first_read

if TYPE_CHECKING:  # imported where used, at run time
    from nodecheck.transport import Transport
    from nodecheck.watch.classify import Tracker
    from nodecheck.watch.config import WatchConfig
    from nodecheck.watch.verdicts import Assessment

# a quiet change (progressing <-> checkpointing, every save of a long job) is recorded with its last
# few ticks only: the full history (up to ~12 MiB at 64 nodes) is for alarms
QUIET_RECORD_TICKS = 3
EXIT_NO_SAMPLE = 3  # could not watch: no tick ever got a sample from any node
# nodecheck's own failure mid-watch (sysexits EX_SOFTWARE): the state is saved first, and the unit
# restarts on it; Python's own 1 for an uncaught exception would read as the verdict "slow"
EXIT_INTERNAL = 70
FORENSICS_DEADLINE_S = 90.0  # --forensics on a hang: the tick waits this long at most
HANG_ACTION_ATTEMPTS = 3  # --on-hang tries (one per tick) before giving up on this hang
FAILURE_CHARS = 600  # of a node's failure text in the tick (and the incident)


# ---- the watcher ----------------------------------------------------------------------------------


@dataclass
class Plan:
    """Everything validated before the first tick."""

    cfg: WatchConfig
    job: InventoryJob | SlurmJob
    label: str  # the event's "job": "1234" or "inventory:train\.py"
    key: str  # one path component: state dir and incident names
    transport: Transport
    fanout: int
    state_dir: Path
    output_dir: Path
    on_hang: OnHang | None
    first: Target | None = None
    config_owner: int | None = None  # the uid owning --config as it was read: the job's user (job_user)


class Watcher:
    def __init__(
        self,
        plan: Plan,
        statedir: StateDir,
        state: WatchState,
        *,
        stop: threading.Event,
        out=None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        from nodecheck.gate.command import GateLog

        self.plan, self.cfg, self.statedir, self.state = plan, plan.cfg, statedir, state
        self.stop, self.out, self.clock = stop, out or sys.stdout, clock
        self.log = GateLog(str(statedir.alert_log), "watch", plan.label)
        self.deliverer = Deliverer(
            channels_of(self.cfg.alerts),
            self.cfg.alerts.retries,
            self.cfg.alerts.backoff_s,
            lambda action, **f: self.log.event(action, "-", **f),
            stop,
        )
        self.history = TickHistory(self.cfg.history)
        self.tracker: Tracker | None = None
        self.last: Assessment | None = None
        self.host = socket.gethostname()
        self.slurm_down = False  # scontrol failing: said once, when it starts

    # -- one tick --
    def tick(self, target: Target) -> Assessment | None:
        """Sample, judge, act on a change; None when a stop request cut the tick (nothing judged)."""
        from nodecheck.transport.fanout import run_probes
        from nodecheck.watch.probe import sample_probe
        from nodecheck.watch.verdicts import Tick

        at = self.clock()
        if target.pending:
            assessment = self._pending(target, at)
            if self.tracker is not None and target.job_state:  # requeued: the tracker's run starts over,
                self.tracker.update(Tick(at=at, nodes=(), job_state=target.job_state))  # its clocks too
                self.state.tracker = self.tracker.to_json()
            self.history.add(
                {"at": iso(at), "at_epoch": at, "job_state": target.job_state, "nodes": {}, "note": target.note}
            )
        else:
            nodes = list(target.nodes)
            user = job_user(self.plan.config_owner, self.plan.job)
            work = {n: [sample_probe(self.cfg, n.name, user)] for n in nodes}
            done = run_probes(
                self.plan.transport,
                work,
                fanout=self.plan.fanout,
                deadline=time.monotonic() + self.cfg.sample_timeout,
                stop=self.stop,
            )
            if self.stop.is_set():
                return None
            captures = {n.name: done.captures[(n.name, "watch")] for n in nodes}
            observations = tuple(observe(n.name, captures[n.name], self.cfg) for n in nodes)
            tick = Tick(at=at, nodes=observations, job_state=target.job_state, job_reason=target.job_reason)
            tracker = self._tracker([n.name for n in nodes])
            assessment = self._own_cancel(tracker.update(tick))
            self.state.tracker = tracker.to_json()
            self.state.probed_ticks += 1
            self.state.sampled_ticks += any(o.sample is not None for o in observations)
            record = tick_record(tick, captures)
            if target.note:
                record["note"] = target.note
            self.history.add(record)
        self._slurm_note(target)
        self.last = assessment
        line = ""
        if assessment.verdict != self.state.verdict:
            line = self._changed(assessment, at, list(target.nodes))
        elif assessment.verdict == "hung" and not target.pending:
            self._act_on_hang(list(target.nodes), again=True)
        if assessment.verdict != "hung":
            self.state.hang_acted, self.state.hang_actions = False, 0
        self.state.message = assessment.message
        self._save()  # before the line: what stdout says, the state holds
        if line:
            self.say(line)
        if self.state.pending:
            self.state.pending = self.deliverer.flush(self.state.pending)
            self._save()
        return assessment

    def _slurm_note(self, target: Target) -> None:
        """scontrol failing is said when it starts and when it ends, not every tick it lasts."""
        down = target.note.startswith("scontrol failed")
        if down != self.slurm_down:
            self.log.event(
                "slurm-unavailable" if down else "slurm-available", "-", message=target.note or "scontrol answers"
            )
            self.slurm_down = down

    def _own_cancel(self, a):
        """After --on-hang cancel (or requeue) ended a hung run, what follows (Slurm's CANCELLED, the
        processes gone) is that action, not a new crash: the verdict stays hung, said once, paged once.
        A requeued job then reads "starting" (Slurm: PENDING), and runs again, on these or other nodes."""
        if not (
            self.state.hang_acted
            and self.state.verdict == "hung"
            and a.verdict == "crashed"
            and self.plan.on_hang is not None
        ):
            return a
        done = {"cancel": "cancelled", "requeue": "requeued"}[self.plan.on_hang.action]
        said = self.state.message.split(f"; {done} by --on-hang", 1)[0]
        return replace(
            a,
            verdict="hung",
            since=self.state.since or a.since,
            message=f"{said}; {done} by --on-hang {self.plan.on_hang.action} ({a.message.removeprefix('crashed: ')})",
        )

    def _pending(self, target: Target, at: float):
        from nodecheck.watch.verdicts import Assessment

        if target.job_state is None and self.state.verdict is not None:
            # scontrol failed and no node is known yet (a restart while slurmctld is down): no news is
            # not a change -- a hang read as "starting" would be alerted resolved, then hung again
            return Assessment(
                verdict=self.state.verdict,
                message=self.state.message or self.state.verdict,
                nodes=(),
                ranks=(),
                since=self.state.since or at,
                facts={"job_state": None, "note": target.note},
            )
        since = self.state.since if self.state.verdict == "starting" and self.state.since else at
        return Assessment(
            verdict="starting",
            message=f"starting: {target.note}",
            nodes=(),
            ranks=(),
            since=since,
            facts={"job_state": target.job_state},
        )

    def _tracker(self, names: list[str]):
        """The tracker for these nodes: resumed from the state when it was built for them; rebuilt when
        the job's nodes changed (a requeue lands elsewhere), its history no longer lines up with ranks."""
        from nodecheck.watch.classify import Tracker

        if self.tracker is not None and self.state.nodes == names:
            return self.tracker
        if self.tracker is None and self.state.tracker and self.state.nodes == names:
            try:
                self.tracker = Tracker.from_json(self.cfg, names, self.state.tracker)
                return self.tracker
            except (KeyError, ValueError, TypeError) as e:
                self.log.event(
                    "state-note", "-", message=f"the saved history could not be resumed ({e}); judging starts afresh"
                )
        elif self.state.nodes and self.state.nodes != names:
            before, now = fold(self.state.nodes) or "(none)", fold(names) or "(none)"
            self.log.event(
                "nodes-changed", "-", message=f"the job's nodes changed from {before} to {now}; judging starts afresh"
            )
        self.tracker, self.state.nodes = Tracker(self.cfg, names), names
        return self.tracker

    def _changed(self, a, at: float, nodes: list[Node]) -> str:
        """A new verdict: --on-hang (into hung), the incident record (not for a fresh watcher's first,
        quiet verdict: nothing happened yet), the alert queued; returns the line for stdout."""
        previous = self.state.verdict
        kind = alert_kind(previous, a.verdict)
        # forensics before --on-hang: the stacks of a cancelled job are gone
        forensics = self._forensics(nodes) if a.verdict == "hung" and self.cfg.forensics else None
        action = self._act_on_hang(nodes) if a.verdict == "hung" else None
        event = build_event(
            job=self.plan.label,
            kind=kind,
            verdict=a.verdict,
            previous=previous,
            at=at,
            since=a.since,
            message=a.message,
            nodes=a.nodes,
            ranks=a.ranks,
            incident=None,
            watcher=self.host,
        )
        if forensics is not None:
            event["forensics"] = forensics
        where, record = None, previous is not None or kind is not None
        if record:
            try:
                where = write_incident(
                    self.plan.output_dir,
                    event={k: v for k, v in event.items() if k != "incident"},
                    assessment=a,
                    ticks=self.history if kind else list(self.history)[-QUIET_RECORD_TICKS:],
                    job_key=self.plan.key,
                    at=at,
                    action=action,
                    watcher=self._about(),
                )
                event["incident"] = str(where)
            except (OSError, ValueError) as e:
                self.log.event("incident-not-written", "-", verdict=a.verdict, message=str(e))
        self.state.verdict, self.state.since = a.verdict, a.since
        self.state.incident = event["incident"] or self.state.incident
        if kind:
            self.state.pending = self.deliverer.enqueue(self.state.pending, event)
        return (
            f"{iso(at)} job {self.plan.label}: {one_line(a.message) or a.verdict}"
            + (f" (was {previous})" if previous else "")
            + (f"; forensics: {forensics['verdict']} ({forensics['record']})" if forensics else "")
            + (f"; on-hang {action['action']}: {action['result']}" if action else "")
            + (f"; incident {where}" if where else "")
            + ("; incident NOT written (see alerts.log)" if record and not where else "")
        )

    def _forensics(self, nodes: list[Node]) -> dict:
        """`nodecheck forensics` on the hung job's nodes, its record beside the incidents: {"verdict": the
        headline, "record": its directory, "culprit_ranks", "culprit_nodes"}; a failure is said, never raised."""
        from nodecheck.forensics.collect import Where
        from nodecheck.forensics.command import investigate

        job_id = self.plan.label if isinstance(self.plan.job, SlurmJob) else None
        if self.cfg.match:
            where = Where("match", self.cfg.match)
        else:
            assert job_id is not None  # an inventory job always has a match (plan_watch)
            where = Where("slurm", job_id)
        where = Where(  # the job's log, read on the nodes as the job's user (forensics/probe.py)
            where.mode, where.what, self.cfg.progress.log, user=job_user(self.plan.config_owner, self.plan.job)
        )
        try:
            done = investigate(
                self.plan.transport,
                nodes,
                where,
                label=self.plan.label,
                key=self.plan.key,
                output_dir=self.plan.output_dir,
                fanout=self.plan.fanout,
                deadline_s=FORENSICS_DEADLINE_S,
                stop=self.stop,
            )
        except Exception as e:  # forensics failing must not stop the watching
            self.log.event("forensics-failed", "-", message=f"{type(e).__name__}: {e}")
            return {
                "verdict": f"forensics failed: {type(e).__name__}: {e}",
                "record": None,
                "culprit_ranks": [],
                "culprit_nodes": [],
            }
        d = done.result.diagnosis
        self.log.event("forensics", "-", verdict=d.kind, record=str(done.where))
        return {
            "verdict": d.headline,
            "record": str(done.where) if done.where else None,
            "culprit_ranks": list(d.culprit_ranks),
            "culprit_nodes": list(d.culprit_nodes),
        }

    def _act_on_hang(self, nodes: list[Node], again: bool = False) -> dict | None:
        """--on-hang, once per hang: a failed attempt is tried again on the next hung ticks, up to
        HANG_ACTION_ATTEMPTS; a success is never repeated while the verdict stays hung."""
        on_hang = self.plan.on_hang
        if on_hang is None or self.state.hang_acted or self.state.hang_actions >= HANG_ACTION_ATTEMPTS:
            return None
        self.state.hang_actions += 1
        result = on_hang.act(nodes, self.stop)
        self.state.hang_acted = bool(result["ok"])
        self.log.event(
            f"on-hang-{on_hang.action}",
            "-",
            ok=str(result["ok"]).lower(),
            result=result["result"],
            attempt=f"{self.state.hang_actions}/{HANG_ACTION_ATTEMPTS}",
        )
        for node, lines in (result.get("nodes") or {}).items():
            for line in lines:
                self.log.event(f"on-hang-{on_hang.action}", node, detail=line)
        if again:
            self.say(
                f"{iso(self.clock())} job {self.plan.label}: on-hang {on_hang.action} (attempt "
                f"{self.state.hang_actions}): {result['result']}"
            )
        return result

    def _about(self) -> dict:
        return {
            "host": self.host,
            "pid": os.getpid(),
            "state_dir": str(self.statedir.path),
            "interval_s": self.cfg.interval_s,
            "config_fingerprint": self.state.fingerprint,
            "on_hang": self.cfg.on_hang,
        }

    def _save(self) -> None:
        try:
            self.statedir.save(self.state)
        except OSError as e:  # a full disk must not stop the watching; it is said each tick
            print(f"nodecheck: warning: cannot save the watcher state in {self.statedir.path}: {e}", file=sys.stderr)

    def say(self, line: str) -> None:
        print(one_line(line), file=self.out, flush=True)

    # -- the loop --
    def run(
        self, *, once: bool = False, max_samples: int | None = None, duration_s: float | None = None
    ) -> tuple[int, str]:
        """Tick until told to stop; (exit code, why it stopped)."""
        from nodecheck.watch.verdicts import exit_code

        interval = self.cfg.interval_s
        started = time.monotonic()
        ticks, why = 0, ""
        target = self.plan.first
        while True:
            target = target or self.plan.job.read()
            assessment = self.tick(target)
            if assessment is None:
                why = STOPPED
                break
            ticks += 1
            if once:
                why = "--once"
                break
            if target.ended:
                why = target.note or "the job ended"
                break
            if assessment.verdict == "completed":
                why = "the job completed"
                break
            if max_samples and ticks >= max_samples:
                why = f"{ticks} samples taken (--max-samples)"
                break
            k = int((time.monotonic() - started) / interval) + 1  # the next boundary not yet passed
            wake = started + k * interval
            if duration_s is not None and wake - started > duration_s:
                why = f"--duration {duration_s:g} s reached"
                break
            if self.stop.wait(max(0.0, wake - time.monotonic())):
                why = STOPPED
                break
            target = None
        # nothing ever answered: could not watch -- unless Slurm's end of the job gave the verdict
        if self.state.probed_ticks and not self.state.sampled_ticks and not (target and target.ended):
            return EXIT_NO_SAMPLE, why
        if self.last is None:  # stopped before the first tick judged anything
            return (exit_code(self.state.verdict) if self.state.verdict else EXIT_NO_SAMPLE), why
        return exit_code(self.last.verdict), why


def observe(node: str, capture: Capture, cfg):
    """A node's Observation from its sample capture: parsed, or the failure (with the output that
    could not be read) as evidence."""
    from nodecheck.parsers.watch_sample import parse_sample, read_progress
    from nodecheck.watch.verdicts import Observation

    if capture.outcome is not Outcome.EXITED:
        detail = capture.detail
        if capture.cut is Cut.DEADLINE:  # the tick's deadline IS the sample timeout: the node was slow
            detail = f"no answer within {cfg.sample_timeout:g} s"
        return Observation(node, None, failure=one_line(f"{capture.outcome.value}: {detail}")[:FAILURE_CHARS])
    try:
        sample = parse_sample(capture.stdout)
    except ParseError as e:
        said = f"; stderr: {excerpt(capture.stderr.strip(), 200)!r}" if capture.stderr.strip() else ""
        return Observation(
            node,
            None,
            failure=one_line(
                f"unreadable sample (exit {capture.exit_code}): {e.reason}; output: {e.excerpt[:300]!r}{said}"
            )[:FAILURE_CHARS],
        )
    try:
        progress = read_progress(sample.log_tail, cfg.progress)
    except ParseError as e:  # a regex group that is not a number: the node answered,
        return Observation(node, replace(sample, log_error=f"cannot read the progress: {e.reason}"))  # its log did not
    return Observation(node, sample, "", progress)


# ---- the command ----------------------------------------------------------------------------------


def watch_command(args: Namespace) -> int:
    plan = plan_watch(args)
    statedir = StateDir(plan.state_dir)
    statedir.lock()
    try:
        state, note = statedir.load()
        if note:
            print(f"nodecheck: warning: {note}", file=sys.stderr)
        fingerprint = config_fingerprint(plan.cfg)
        resumed = state is not None
        if state is None or state.job != plan.label:
            if state is not None:
                print(
                    f"nodecheck: warning: {statedir.state_file} was written for job {state.job}, not "
                    f"{plan.label}; starting afresh",
                    file=sys.stderr,
                )
            state = WatchState(job=plan.label, fingerprint=fingerprint)
            resumed = False
        elif state.fingerprint != fingerprint:
            print(
                f"nodecheck: warning: the judging settings changed since {statedir.state_file} was written "
                f"(fingerprint {state.fingerprint} -> {fingerprint}); the new bounds apply from now on",
                file=sys.stderr,
            )
            state.fingerprint = fingerprint
        if resumed and isinstance(plan.job, SlurmJob):
            plan.job.seen = True  # an earlier run saw it: a purge now means it ended
        from nodecheck.app.signals import stop_on_signals

        # any failure of nodecheck itself, not only inside a tick, is 70 (the unit restarts it): an
        # uncaught exception's 1 would read as the verdict "slow"
        try:
            with stop_on_signals() as stop:
                watcher = Watcher(plan, statedir, state, stop=stop)
                if note:
                    watcher.log.event("state-note", "-", message=note)
                if not args.once:
                    watcher.say(_start_line(plan, state, resumed))
                try:
                    code, why = watcher.run(once=args.once, max_samples=args.max_samples, duration_s=args.duration)
                finally:
                    watcher._save()
                    if isinstance(plan.transport, KeptSessions):
                        plan.transport.close()
            return _finish(args, plan, watcher, state, code, why)
        except ConfigError:
            raise
        except Exception:
            traceback.print_exc()
            print(
                "nodecheck: error: the watcher failed (above); its state is saved, a restart resumes it",
                file=sys.stderr,
            )
            return EXIT_INTERNAL
    finally:
        statedir.unlock()


def _finish(args: Namespace, plan: Plan, watcher: Watcher, state: WatchState, code: int, why: str) -> int:
    """The closing line (or --once's verdict line), and why nothing could be watched; the exit code."""
    last = watcher.last
    if args.once and last is not None:
        watcher.say(f"job {plan.label}: {last.verdict} since {iso(last.since)}: {one_line(last.message)}")
    elif not args.once:
        verdict = state.verdict or "no verdict"
        since = f" since {iso(state.since)}" if state.since else ""
        watcher.say(f"{iso(time.time())} job {plan.label}: stopped ({why}): {verdict}{since}; exit {code}")
    if code == EXIT_NO_SAMPLE and state.probed_ticks:
        last_nodes = list(watcher.history)[-1]["nodes"] if len(watcher.history) else {}
        why_not = "; ".join(f"{node}: {entry['failure']}" for node, entry in list(last_nodes.items())[:3])
        print(
            f"nodecheck: error: no node answered with a sample in {state.probed_ticks} tick(s): could not "
            f"watch" + (f" ({why_not})" if why_not else ""),
            file=sys.stderr,
        )
    return code


def plan_watch(args: Namespace) -> Plan:
    """Validate everything before the first tick; ConfigError (exit 64) names the option and the fix."""
    from nodecheck.app.defaults import DEFAULT_FANOUT
    from nodecheck.app.transports import ensure_open_files, ssh_transport
    from nodecheck.config.inventory import load_inventory, select
    from nodecheck.watch.config import apply_overrides, load_watch_source

    # a config root does not own sets only the job's own fields (watch/config.py JOB_FIELDS): what
    # makes root act comes from here, the command line, or a root-owned config
    source = load_watch_source(args.config)
    cfg = apply_overrides(
        source.cfg,
        match=args.match,
        log=args.log,
        heartbeat=args.heartbeat,
        interval_s=args.interval,
        alert_command=args.alert_command,
        alert_url=args.alert_url,
        on_hang=args.on_hang,
        forensics=args.forensics,
    )
    if args.once and (args.max_samples or args.duration):
        raise ConfigError(
            "--once takes one sample: it cannot be combined with --max-samples or --duration",
            file="arguments",
            hint="drop --once, or drop --max-samples/--duration",
        )
    if not args.slurm_job and not args.inventory:
        raise ConfigError(
            "which job? give --slurm-job ID, or an inventory (hosts.yml) and --match PATTERN",
            file="arguments",
            hint="nodecheck watch --slurm-job 1234   or   nodecheck watch hosts.yml --match 'train\\.py'",
        )
    if args.nodes and not args.inventory:
        raise ConfigError(
            "--nodes selects inventory nodes: give the inventory too",
            file="--nodes",
            hint="nodecheck watch hosts.yml --nodes 'gpu[01-04]' --match PATTERN",
        )
    if args.slurm_job and args.nodes:
        raise ConfigError(
            "--nodes with --slurm-job: the job's nodes come from Slurm", file="--nodes", hint="drop --nodes"
        )
    if cfg.on_hang == "requeue" and not args.slurm_job:
        raise ConfigError(
            "--on-hang requeue needs --slurm-job: only Slurm can requeue a job",
            file="--on-hang",
            hint="with an inventory, --on-hang cancel sends SIGTERM to the matched processes",
        )
    if not args.slurm_job and not cfg.match:
        raise ConfigError(
            "an inventory needs --match PATTERN (or `match:` in --config): the job's processes on each node",
            file="--match",
            hint="e.g. --match 'train\\.py'",
        )
    inventory = load_inventory(args.inventory) if args.inventory else []
    transport = KeptSessions(ssh_transport(args))
    fanout = args.fanout or DEFAULT_FANOUT
    output_dir = Path(args.output_dir)
    job: SlurmJob | InventoryJob
    if args.slurm_job:
        job_id = args.slurm_job.strip()
        if not job_id.replace("_", "").isdigit():
            raise ConfigError(
                f"--slurm-job {args.slurm_job!r} is not a job id",
                file="--slurm-job",
                hint="a number, or ARRAYJOB_TASK such as 1234_7",
            )
        slurm = _slurm()
        job = SlurmJob(job_id, slurm, {n.name: n for n in inventory})
        label = key = job_id
        on_hang = OnHang(cfg.on_hang, slurm=slurm, job_id=job_id) if cfg.on_hang else None
        first = first_read(job)
    else:
        nodes = select(inventory, args.nodes)
        if not nodes:
            raise ConfigError(f"{args.inventory} names no node", file=args.inventory)
        job = InventoryJob(nodes)
        assert cfg.match  # an inventory needs --match (checked above)
        label = f"inventory:{cfg.match}"
        digest = hashlib.sha256(
            "\0".join([os.path.realpath(args.inventory), cfg.match, *(n.name for n in nodes)]).encode()
        ).hexdigest()[:10]
        key = f"{safe_key(Path(args.inventory).stem)}-{digest}"
        on_hang = OnHang(cfg.on_hang, pattern=cfg.match, transport=transport, fanout=fanout) if cfg.on_hang else None
        first = job.read()
    if first is not None and first.nodes:
        ensure_open_files(min(fanout, len(first.nodes)))
    state_dir = Path(args.state_dir) if args.state_dir else output_dir / "watch" / safe_key(key)
    return Plan(
        cfg,
        job,
        label,
        safe_key(key),
        transport,
        fanout,
        state_dir,
        output_dir,
        on_hang,
        first,
        config_owner=source.owner_uid,
    )


def _slurm():
    from nodecheck.app.slurm import Slurm

    return Slurm()


def job_user(config_owner: int | None, job) -> str:
    """Whose progress log and heartbeat the watcher reads (watch/probe.py): app.job_user.job_user_of
    (the owner of the watch config as it was read, not whoever owns its path by this tick; else the
    Slurm job's user once squeue was read)."""
    from nodecheck.app.job_user import job_user_of

    return job_user_of(config_owner, getattr(job, "user", ""))


def _start_line(plan: Plan, state: WatchState, resumed: bool) -> str:
    cfg = plan.cfg
    first = plan.first
    if first is None:
        where = "(job not read yet)"
    elif first.pending:
        where = f"({first.note})"
    else:
        where = f"on {fold([n.name for n in first.nodes]) or '(none)'} ({len(first.nodes)} nodes)"
    alerts = ", ".join(c.name for c in channels_of(cfg.alerts)) or "none (stdout and incident records only)"
    hang = {"cancel": "cancel the job", "requeue": "requeue the job", None: "nothing (the job is never touched)"}
    head = (
        f"nodecheck watch: job {plan.label} {where}, every {cfg.interval_s:g} s; alerts: {alerts}; "
        f"on hang: {'forensics, then ' if cfg.forensics else ''}{hang[cfg.on_hang]}; state {plan.state_dir}"
    )
    if resumed and state.verdict:
        head += f"; resumed: {state.verdict} since {iso(state.since)}" if state.since else f"; resumed: {state.verdict}"
        if state.pending:
            head += f", {len(state.pending)} alert(s) still to deliver"
    return head

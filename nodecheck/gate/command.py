"""The Slurm gate commands (prolog, prolog --controller, health) and the gate steps sweeps share:
run with retries for flaky-prone checks, decide (nodecheck.gate.decide), drain/resume politely
(nodecheck.app.slurm), log every change with its evidence path.

What Slurm does with the exit code decides the etiquette here:
* node Prolog: any non-zero exit drains the node ("Prolog error") and requeues the job. So it
  exits non-zero only when this node was judged failing (after draining it with nodecheck's own
  reason, which Slurm keeps). Could-not-judge, breaker, config errors and --observe exit 0: the job
  starts (fail open), and the log says why, loudly.
* PrologSlurmctld: a non-zero exit requeues the job and drains nothing; nodecheck drains the nodes
  it blames itself, then exits 1; a tripped breaker exits 3 (could not judge) and drains nothing.
* HealthCheckProgram: the exit code is only reported; the command drains and resumes itself.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import re
import socket
import sys
import threading
import time
from argparse import Namespace
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from nodecheck.app.signals import STOPPED
from nodecheck.config.gate_settings import GateSettings
from nodecheck.config.playbook import Playbook
from nodecheck.core.errors import ConfigError
from nodecheck.core.model import Node, Status, one_line
from nodecheck.core.progress import NULL_PROGRESS, RunProgress
from nodecheck.core.redact import redact_text
from nodecheck.gate import decide as gate
from nodecheck.report import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS, EXIT_UNKNOWN, Report, store

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_OUTPUT_DIR = "/var/lib/nodecheck/reports"
DEFAULT_LOG_FILE = "/var/log/nodecheck/gate.log"
DEFAULT_PLAYBOOK = {"prolog": "prolog", "controller": "prolog", "health": "health"}
PROLOG_DEADLINE_S = 20.0  # well under any sane PrologEpilogTimeout
MIN_RETRY_S = 5.0  # a retry with less time left than this cannot judge anything
# scontrol in the node Prolog: up to 5 calls after the checks (drain: read + update; breaker: read
# all; undo: read + update), each bounded, so budget + 2 settle waits + calls stays under
# PrologEpilogTimeout (20 + 6 + 5 x 7 s = 61 s < 90)
PROLOG_SCONTROL_TIMEOUT_S = 5.0
# a failed drain's why on a result line: the end of what scontrol said (the whole of it is in the gate log)
MAX_WHY_CHARS = 200
EXIT_DRAINED = 1  # prolog modes: Slurm requeues the job


# ---- running, with retries ----------------------------------------------------------------------


def run_gated(
    playbook: Playbook,
    nodes: Sequence[Node],
    transport,
    *,
    fanout: int,
    deadline_s: float | None = None,
    inventory: str | None = None,
    stop=None,
    excluded: Sequence[str] = (),
    allow_disruptive: bool = False,
    retries: int | None = None,
    drain_on: Sequence[str] | None = None,
    own_job: str | None = None,
    progress: RunProgress = NULL_PROGRESS,
) -> Report:
    """runner.run, then the flaky-prone checks that failed run again (up to `retries` times, default
    the playbook's gate.retries) within the same deadline; a failure stands only if it repeated in
    every attempt (gate.merge_attempts). Node-scope checks re-run on the failing nodes only; a
    cross-node check (pair tests) on all the run's nodes, since its partners matter. `progress`:
    a person's terminal (sweep); the Prolog and health gates leave it NULL_PROGRESS."""
    from nodecheck.run import runner as runner

    started = time.monotonic()
    total = deadline_s or playbook.deadline_s
    stop = stop or threading.Event()
    first = runner.run(
        playbook,
        nodes,
        transport,
        fanout=fanout,
        deadline_s=total,
        inventory=inventory,
        stop=stop,
        excluded=excluded,
        allow_disruptive=allow_disruptive,
        own_job=own_job,
        progress=progress,
    )
    settings = playbook.gate
    count = settings.retries if retries is None else retries
    statuses = gate.drain_statuses(gate.drain_on_for(drain_on, settings, local=False))
    flaky = gate.flaky_checks(settings, (c.spec.name for c in playbook.checks))
    pending = gate.failing(first, flaky, statuses)
    retried = set(pending)
    attempts: list[Report] = []
    notes: list[str] = []
    for k in range(1, count + 1):
        if not pending:
            break
        if stop.is_set():
            notes.append(f"{STOPPED} before retry {k}")
            break
        left = total - (time.monotonic() - started)
        if left < MIN_RETRY_S:
            notes.append(f"no time left for retry {k} ({max(left, 0):.0f} s of the {total:g} s deadline)")
            break
        book = dataclasses.replace(playbook, checks=tuple(c for c in playbook.checks if c.spec.name in pending))
        suspects = set().union(*pending.values())
        again_nodes = (
            [n for n in nodes if n.name in suspects]
            # a check judged against the other nodes (relative bands) needs them in the retry too
            if all(
                c.spec.scope == "node" and not (c.spec.relate and getattr(c.params, "related", True))
                for c in book.checks
            )
            else list(nodes)
        )
        again = runner.run(
            book,
            again_nodes,
            transport,
            fanout=fanout,
            deadline_s=left,
            inventory=inventory,
            stop=stop,
            allow_disruptive=allow_disruptive,
            own_job=own_job,
            progress=progress,
        )
        attempts.append(again)
        for check in list(pending):
            pending[check] -= gate.healthy_in(again, check)
            if not pending[check]:
                del pending[check]
    return gate.merge_attempts(first, attempts, retried, statuses, notes)


# ---- the log ------------------------------------------------------------------------------------


class GateLog:
    """Every drain, resume, breaker and could-not-judge, one line each, appended to a file (and to
    stderr, which slurmd keeps in its log when a Prolog fails). A log that cannot be written is a
    warning, never a reason to fail the gate."""

    def __init__(self, path: str | None, mode: str, job: str | None = None) -> None:
        self.path, self.mode, self.job = path, mode, job
        self.lines: list[str] = []

    def event(self, action: str, node: str = "-", **fields) -> str:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        parts = [stamp, f"nodecheck[{self.mode}]", f"action={action}", f"node={node}"]
        if self.job:
            parts.append(f"job={self.job}")
        parts += [f"{k}={_quoted(v)}" for k, v in fields.items() if v not in (None, "")]
        # a verdict message can quote a tool's output or a job's command line: a token is masked
        line = redact_text(" ".join(parts))
        self.lines.append(line)
        print(line, file=sys.stderr)
        if self.path:
            try:
                Path(self.path).parent.mkdir(mode=0o750, parents=True, exist_ok=True)
                # 0640 for the operators' group, never through a planted symlink (report.store.create)
                with os.fdopen(store.create(self.path, store.shared(), append=True), "a", encoding="utf-8") as f:
                    f.write(line + "\n")
            except OSError as e:
                print(f"nodecheck: warning: cannot write the gate log {self.path}: {e}", file=sys.stderr)
                self.path = None
        return line


# json.dumps(ensure_ascii=False) escapes only U+0000-U+001F: C1 controls (U+0085 NEL) and U+2028/U+2029
# would still break a log line for readers that split on them (Python's str.splitlines, journald)
_UNESCAPED_BREAKS = re.compile("[\x7f-\x9f\u2028\u2029]")


def _quoted(value) -> str:
    """A log field's value: a JSON string, on one line whatever it holds."""
    return _UNESCAPED_BREAKS.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(str(value), ensure_ascii=False))


def _say(line: str) -> None:
    print(one_line(line))


# ---- applying a decision ------------------------------------------------------------------------


@dataclass(frozen=True)
class Applied:
    drained: tuple[str, ...] = ()  # nodes drained now (by us; reason set or refreshed)
    resumed: tuple[str, ...] = ()
    left: tuple[str, ...] = ()  # drained by someone else: not touched
    failed: tuple[str, ...] = ()  # scontrol failed
    kept: tuple[str, ...] = ()  # already drained by us for the same reason: untouched
    why_failed: tuple[tuple[str, str], ...] = ()  # (node, why scontrol failed) for each failed one

    def failure(self, node: str) -> str:
        """Why the drain or resume of `node` failed, bounded for a result line. The end of what
        scontrol said: its command line (the whole reason) is in the gate log; the why is last."""
        why = one_line(dict(self.why_failed).get(node, "")).strip()
        return why if len(why) <= MAX_WHY_CHARS else "…" + why[-MAX_WHY_CHARS:]


def apply(
    decision: gate.Decision,
    *,
    slurm,
    log: GateLog,
    observe: bool,
    report_dir: str | None,
    drain: bool = True,
    resume: bool = True,
    token: str = "",
) -> Applied:
    """Drain the blamed nodes and resume the cleared ones, politely (slurm.drain_politely re-reads each
    node's state first and never touches another's drain). Logs each change with its evidence.
    `token`: the site's drain token, whose mark makes a reason nodecheck's."""
    from nodecheck.app.slurm import MAX_REASON_CHARS, drain_politely, resume_politely

    done: dict[str, list[str]] = {"drain": [], "resume": [], "left": [], "failed": [], "kept": []}
    why_failed: list[tuple[str, str]] = []
    if decision.tripped:
        log.event(
            "breaker",
            "-",
            message=decision.breaker,
            evidence=report_dir,
            blamed=",".join(b.node for b in decision.blamed),
        )
    for b in decision.drain if drain else ():
        reason = b.reason(MAX_REASON_CHARS, token)
        evidence = _evidence(report_dir, b.capture)
        if observe:
            log.event("would-drain", b.node, check=b.check, reason=reason, evidence=evidence)
            continue
        change = drain_politely(slurm, b.node, reason, token)
        done[change.action].append(b.node)
        if change.action == "failed":
            why_failed.append((b.node, change.reason))
        log.event(
            "still-drained" if change.action == "kept" else change.action,
            b.node,
            check=b.check,
            reason=change.reason,
            evidence=evidence,
        )
    for node in decision.resume if resume else ():
        if observe:
            log.event("would-resume", node, evidence=report_dir)
            continue
        change = resume_politely(slurm, node, token)
        done[change.action].append(node)
        if change.action == "failed":
            why_failed.append((node, change.reason))
        log.event(change.action, node, reason=change.reason, evidence=report_dir)
    for node, why in decision.held if resume else ():
        log.event("held", node, message=why, evidence=report_dir)
    for b in decision.unjudged:
        log.event(
            "not-judged",
            b.node,
            check=b.check,
            status=b.status.value,
            message=b.message,
            evidence=_evidence(report_dir, b.capture),
        )
    return Applied(
        tuple(done["drain"]),
        tuple(done["resume"]),
        tuple(done["left"]),
        tuple(done["failed"]),
        tuple(done["kept"]),
        tuple(why_failed),
    )


def _evidence(report_dir: str | None, capture: str) -> str:
    if not report_dir:
        return "report not written"
    return f"{report_dir}/{capture}" if capture else f"{report_dir}/report.json"


# ---- the commands -------------------------------------------------------------------------------


@dataclass(frozen=True)
class HealthRun:
    """What one `nodecheck health` run checked and decided, for what comes after it (the repair
    pass, nodecheck.remedy.health): the gate decides whether a node is fit, not what to do about it."""

    args: Namespace
    report: Report
    nodes: tuple[Node, ...]
    transport: object  # nodecheck.transport.Transport
    playbook: Playbook
    report_dir: str | None
    log: GateLog
    slurm: object  # nodecheck.app.slurm.Slurm
    drain_on: tuple[str, ...]


AfterHealth = Callable[[HealthRun], str]  # the phrase it adds to the result line ("" for none)


def gate_command(args: Namespace, after_health: AfterHealth | None = None) -> int:
    """`nodecheck prolog [--controller]` and `nodecheck health` (`after_health`: run after a health
    run has drained and resumed, with what it checked)."""
    mode = "controller" if getattr(args, "controller", False) else args.command
    in_slurm = bool(os.environ.get("SLURM_JOB_ID") or os.environ.get("SLURM_SCRIPT_CONTEXT"))
    job = os.environ.get("SLURM_JOB_ID")
    log = GateLog(args.log_file or DEFAULT_LOG_FILE, mode, job)
    try:
        from nodecheck.gate import config as gateconfig

        options, _ = gateconfig.load(gateconfig.config_path(args.config), mode)
        gateconfig.apply(args, options)
        log.path = args.log_file or DEFAULT_LOG_FILE
        _set_environment(getattr(args, "path", None))
        if mode == "health":
            return _health(args, log, job, after_health)
        return {"prolog": _node_prolog, "controller": _controller}[mode](args, log, job)
    except ConfigError as e:
        if not args.log_file:  # the file is invalid: log where it meant us to, if it says
            from nodecheck.gate import config as gateconfig

            try:
                log.path = gateconfig.salvage_log_file(gateconfig.config_path(args.config), mode) or log.path
            except Exception:
                pass
        # a config problem must never drain: under Slurm the job starts (a Prolog's non-zero exit
        # would drain this node), and the log says so; run by hand it is bad input as usual
        log.event("config-error", this_node_name(), message=str(e))
        _say(f"nodecheck {mode}: CONFIG ERROR, nothing judged, nothing drained: {e}")
        return EXIT_PASS if in_slurm and mode != "health" else EXIT_BAD_INPUT
    except Exception as e:  # a nodecheck bug: fail open too, loudly
        import traceback

        log.event("internal-error", this_node_name(), message=f"{type(e).__name__}: {e}")
        traceback.print_exc()
        _say(f"nodecheck {mode}: INTERNAL ERROR, nothing judged, nothing drained: {type(e).__name__}: {e}")
        return EXIT_PASS if in_slurm and mode != "health" else EXIT_UNKNOWN


def _set_environment(path: str | None) -> None:
    """Slurm runs a Prolog with no PATH and no HOME: tools (nvidia-smi, scontrol) and SSH's
    ~/.ssh must still be found. The system directories come first, then what PATH there was."""
    have = [p for p in os.environ.get("PATH", "").split(":") if p]
    wanted = (path or SYSTEM_PATH).split(":")
    os.environ["PATH"] = ":".join(dict.fromkeys(wanted + have))
    if not os.environ.get("HOME"):
        try:
            os.environ["HOME"] = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            os.environ["HOME"] = "/"


def this_node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def site_token(args: Namespace) -> str:
    """The site's drain token (gate config `drain_token`; default none)."""
    return getattr(args, "drain_token", None) or ""


def slurm_for(args: Namespace, timeout_s: float = 10.0):
    from nodecheck.app.slurm import Slurm

    return Slurm(scontrol=getattr(args, "scontrol", None) or "scontrol", timeout_s=timeout_s)


def load_playbook_for(args: Namespace, mode: str) -> Playbook:
    from nodecheck.app.job_user import prolog_job_user, with_job_user
    from nodecheck.config.playbook import load_playbook

    playbook = load_playbook(args.playbook or DEFAULT_PLAYBOOK[mode])
    _refuse_disruptive(playbook, mode)
    # the node Prolog reads files the job names (its NCCL_CONF_FILE) as the job's user would
    return with_job_user(playbook, prolog_job_user()) if mode == "prolog" else playbook


def after_repair(playbook: Playbook, args: Namespace, node: str) -> Playbook:
    """A run on the node itself: its kernel-log windows start after the events a re-proven repair
    answered (nodecheck.gate.answered), where the gate config has a `remedy:` section."""
    from nodecheck.gate import answered
    from nodecheck.gate import config as gateconfig

    settings, _ = gateconfig.remedy_settings(gateconfig.config_path(args.config))
    if settings is None:
        return playbook
    return answered.after_answered(playbook, settings.state_dir, node, datetime.now(timezone.utc))


def _log_gpu_fallback(report: Report, log: GateLog, node: str) -> None:
    """The Prolog reads the GPUs in-process through NVML (nvidia-ml-py, the `nvml` extra); where it
    cannot, the GPU probe falls back to one nvidia-smi start per query, seconds slower on every job.
    Said in the gate log, with why and the fix, so a node installed without the extra is found."""
    from nodecheck.checks.gpu import GPU, UNAVAILABLE

    for c in report.captures:
        if c.node == node and c.probe == GPU.name and c.stdout.startswith(UNAVAILABLE):
            why = c.stdout.split("\n", 1)[0][len(UNAVAILABLE) :].strip()
            log.event(
                "gpu-source",
                node,
                source="nvidia-smi",
                message=f"GPUs read with nvidia-smi, not NVML ({why}): install nodecheck[nvml] on the node",
            )


# the checks that benchmark the GPUs (minutes of full load): never in a gate
BENCHMARKS = {"gpu.perf": "the GPU benchmark", "gpu.sdc": "the silent-data-corruption screen"}


def _refuse_disruptive(playbook: Playbook, mode: str) -> None:
    """A gate runs within a job's start-up budget on nodes the job is about to use: a check that
    loads the GPUs for minutes (DCGM level >= 2) does not belong there, and would only ever be
    SKIPPED (the gate never passes --allow-disruptive). Said when the playbook loads, not per job."""
    from nodecheck.checks.gpu_dcgm import DcgmDiag

    for check in playbook.checks:
        if check.spec.name in BENCHMARKS:
            raise ConfigError(
                f"{check.spec.name}: {BENCHMARKS[check.spec.name]} loads every GPU: not in a {mode} playbook",
                file=playbook.path,
                hint="run it in the sweep (`sweep --allow-disruptive`, short form) and the acceptance "
                "playbook (long form), on idle nodes",
            )
        if isinstance(check.params, DcgmDiag) and check.params.disruptive:
            raise ConfigError(
                f"{check.spec.name}: {check.params.label} loads the GPUs for ~{check.params.minutes} min: "
                f"not in a {mode} playbook",
                file=playbook.path,
                hint="level 1 at most here; run level 2 in the sweep (`sweep --allow-disruptive`) and "
                "level 3 in the acceptance playbook",
            )


def _store(
    report: Report, args: Namespace, node_tag: str, job: str | None, log: GateLog, decision: gate.Decision
) -> str | None:
    """Write the report (the evidence every log line points at); its name says node and job. A
    Prolog runs per job and node, so by default (keep_reports: problems) a run where everything
    passed and nothing changed keeps no report: its result line says so."""
    if (
        getattr(args, "keep_reports", None) != "always"
        and report.status is Status.PASS
        and not (decision.blamed or decision.unjudged or decision.resume or decision.held)
    ):
        return None
    from nodecheck.report import json as report_json
    from nodecheck.report import table
    from nodecheck.report.html.run_page import page_or_none
    from nodecheck.report.store import store

    run_id = report.run_id + (f"_{node_tag}" if node_tag else "") + (f"_job{job}" if job else "")
    report = dataclasses.replace(report, run_id=run_id)
    out = args.output_dir or DEFAULT_OUTPUT_DIR
    html = page_or_none(report, lambda why_not: log.event("report-html-not-written", node_tag or "-", message=why_not))
    try:
        return str(store(report, table.render(report), out, report_json.dumps(report), html=html))
    except OSError as e:
        log.event("report-not-written", node_tag or "-", message=f"{out}: {e}")
        return None


def _tail(where: str | None, report: Report) -> str:
    if where:
        return f" (report {where})"
    return " (all passed: no report kept)" if report.status is Status.PASS else " (report NOT written)"


def _stopper():
    from nodecheck.app.signals import stop_on_signals

    return stop_on_signals()


def _first_line(report: Report, decision: gate.Decision) -> str:
    if decision.blamed:
        b = decision.blamed[0]
        more = f" (+{len(decision.blamed) - 1} more nodes)" if len(decision.blamed) > 1 else ""
        return f"{b.status.value.upper()} {b.check}: {b.message}{more}"
    if decision.unjudged:
        b = decision.unjudged[0]
        return f"COULD NOT JUDGE {b.check} ({b.status.value}): {b.message}"
    return report.status.value.upper()


def _node_prolog(args: Namespace, log: GateLog, job: str | None) -> int:
    """This node, locally, within the budget; drain itself on a judged failure."""
    from nodecheck.app.transports import local_transport

    node = this_node_name()
    playbook = after_repair(load_playbook_for(args, "prolog"), args, node)
    deadline = args.deadline or min(playbook.deadline_s, PROLOG_DEADLINE_S)
    drain_on = gate.drain_on_for(args.drain_on, playbook.gate, local=True)
    with _stopper() as stop:
        report = run_gated(
            playbook,
            [Node(name=node, address="localhost")],
            local_transport(),
            fanout=1,
            deadline_s=deadline,
            stop=stop,
            retries=args.retries,
            drain_on=drain_on,
        )
    settings = playbook.gate
    decision = gate.decide(
        report,
        settings,
        drain_on=drain_on,
        order=[c.spec.name for c in playbook.checks],
        token=site_token(args),
        resume=False,
    )
    where = _store(report, args, node, job, log, decision)
    _log_gpu_fallback(report, log, node)
    head = f"nodecheck prolog {node}" + (f" job {job}" if job else "")
    tail = _tail(where, report)
    if not decision.blamed:
        if decision.unjudged:  # fail open, loudly
            apply(decision, slurm=None, log=log, observe=True, report_dir=where, token=site_token(args))
            _say(
                f"{head}: {_first_line(report, decision)}; not drained: it drains on {', '.join(drain_on)} only; "
                f"the job may start{tail}"
            )
        else:
            _say(f"{head}: {report.status.value.upper()}{tail}")
        return EXIT_PASS
    if decision.tripped:
        # this one-node run tripped the run breaker (gate.breaker_min_nodes: 1): nothing drains, and
        # a non-zero exit would have Slurm drain the node ("Prolog error") in the breaker's stead
        apply(decision, slurm=None, log=log, observe=True, report_dir=where, token=site_token(args))
        _say(f"{head}: {_first_line(report, decision)}; {decision.breaker}; the job may start{tail}")
        return EXIT_PASS
    if args.observe:
        apply(decision, slurm=None, log=log, observe=True, report_dir=where, token=site_token(args))
        _say(f"{head}: {_first_line(report, decision)}; observe only: not drained{tail}")
        return EXIT_PASS
    slurm = slurm_for(args, timeout_s=PROLOG_SCONTROL_TIMEOUT_S)
    done = apply(decision, slurm=slurm, log=log, observe=False, report_dir=where, token=site_token(args))
    if done.drained:
        try:
            breaker = _undo_if_mass_drain(slurm, node, decision, report, settings, log, where, site_token(args))
            if breaker:
                _say(f"{head}: {_first_line(report, decision)}; {breaker}; the job may start{tail}")
                return EXIT_PASS
        except Exception as e:  # the node is drained as judged: the job must not start here
            log.event("internal-error", node, message=f"after the drain: {type(e).__name__}: {e}", evidence=where)
    what = (
        "drained"
        if done.drained
        else "already drained by nodecheck for this"
        if done.kept
        else "already drained by someone else; left as is"
        if done.left
        else "drain FAILED (Slurm will drain it for the Prolog error)"
    )
    _say(f"{head}: {_first_line(report, decision)}; {what}{tail}")
    return EXIT_DRAINED


def _undo_if_mass_drain(
    slurm,
    node: str,
    decision: gate.Decision,
    report: Report,
    settings: GateSettings,
    log: GateLog,
    where: str | None,
    token: str = "",
) -> str:
    """A run on one node (the node Prolog, the local health check) cannot see a mass failure, so
    after draining itself it waits for the other nodes' runs (settle_s), counts nodecheck's recent
    drains for the same check across the cluster and, if they trip the breaker, undoes its own
    drain. Returns the breaker's message, or ''."""
    time.sleep(settings.settle_s)
    breaker = _cluster_breaker(
        slurm,
        decision.blamed[0].check,
        settings,
        log,
        since=report.started - timedelta(seconds=settings.breaker_window_s),
        token=token,
    )
    if breaker:
        from nodecheck.app.slurm import resume_politely

        time.sleep(settings.settle_s)  # hold our drain one more period: slower runs still count it
        change = resume_politely(slurm, node, token)
        log.event("breaker", node, message=breaker, undo=change.action, evidence=where)
    return breaker


def _cluster_breaker(slurm, check: str, settings: GateSettings, log: GateLog, since: datetime, token: str = "") -> str:
    from nodecheck.app.slurm import SlurmError

    try:
        states = slurm.nodes()
    except SlurmError as e:
        log.event("breaker-unknown", "-", message=f"cannot read the cluster's node states: {e}")
        return ""
    return gate.cluster_breaker(check, states, settings, since=since, token=token)


def _job_nodes(args: Namespace) -> tuple[list[Node], object]:
    """The job's nodes (SLURM_JOB_NODELIST), reached as the inventory says (or by name)."""
    from nodecheck.app.transports import ssh_transport
    from nodecheck.config.inventory import load_inventory
    from nodecheck.core.hostlist import expand

    text = os.environ.get("SLURM_JOB_NODELIST", "")
    if not text:
        raise ConfigError(
            "SLURM_JOB_NODELIST is not set: --controller runs as slurm.conf's PrologSlurmctld",
            file="environment",
            hint="or set SLURM_JOB_NODELIST=node[1-4] to try it by hand",
        )
    names = expand(text)
    known = {n.name: n for n in load_inventory(args.inventory)} if args.inventory else {}
    nodes = [known.get(n) or Node(name=n, address=n) for n in names]
    args.connect_timeout = args.connect_timeout or 10.0
    return nodes, ssh_transport(args)


def _controller(args: Namespace, log: GateLog, job: str | None) -> int:
    """The job's nodes over SSH, the playbook's cross-node checks; drain only the blamed nodes."""
    from nodecheck.app.defaults import DEFAULT_FANOUT
    from nodecheck.app.transports import ensure_open_files

    playbook = load_playbook_for(args, "controller")
    cross = tuple(c for c in playbook.checks if c.spec.scope in ("fleet", "active"))
    if not cross:
        raise ConfigError(
            f"playbook {playbook.name} has no cross-node check for --controller to run",
            file=playbook.path,
            hint="add drift checks (gpu.driver: {drift: fail}, ...) or ib.pairs",
        )
    playbook = dataclasses.replace(playbook, checks=cross)
    nodes, transport = _job_nodes(args)
    fanout = args.fanout or DEFAULT_FANOUT
    ensure_open_files(min(fanout, len(nodes)))
    with _stopper() as stop:
        report = run_gated(
            playbook,
            nodes,
            transport,
            fanout=fanout,
            deadline_s=args.deadline,
            stop=stop,
            inventory=args.inventory,
            retries=args.retries,
            drain_on=args.drain_on,
        )
    decision = gate.decide(
        report,
        playbook.gate,
        drain_on=args.drain_on,
        order=[c.spec.name for c in playbook.checks],
        token=site_token(args),
        resume=False,
    )
    where = _store(report, args, "", job, log, decision)
    head = "nodecheck prolog --controller" + (f" job {job}" if job else "") + f" ({len(nodes)} nodes)"
    tail = _tail(where, report)
    if decision.tripped:
        apply(decision, slurm=None, log=log, observe=True, report_dir=where, token=site_token(args), drain=False)
        _say(f"{head}: COULD NOT JUDGE: {decision.breaker}{tail}")
        return EXIT_PASS if args.observe else EXIT_UNKNOWN
    if not decision.blamed:
        apply(decision, slurm=None, log=log, observe=True, report_dir=where, token=site_token(args))
        _say(f"{head}: {_first_line(report, decision)}{tail}")
        return EXIT_PASS
    done = apply(
        decision,
        slurm=None if args.observe else slurm_for(args),
        log=log,
        observe=bool(args.observe),
        report_dir=where,
        token=site_token(args),
    )
    if args.observe:
        blamed = ", ".join(f"{b.node} ({b.check})" for b in decision.blamed)
        _say(f"{head}: FAIL: would drain {blamed}; observe only: the job may start{tail}")
        return EXIT_PASS
    # what each drain became, as health's result line says it: a drain scontrol refused (slurmctld
    # down, the call killed at its bound) is FAILED with why, never "left as is", which is only for
    # a drain someone else owns. The job is requeued all the same: its node was judged bad.
    drained = [f"{b.node} ({b.check})" for b in decision.drain if b.node not in done.failed + done.left]
    parts = [f"drained {', '.join(drained)}"] if drained else []
    parts += [f"drain FAILED {b.node} ({done.failure(b.node)})" for b in decision.drain if b.node in done.failed]
    if done.left:
        parts.append(f"left as is (drained by someone else): {', '.join(done.left)}")
    _say(f"{head}: FAIL: {'; '.join(parts)}; the job is requeued{tail}")
    return EXIT_DRAINED


def _health(args: Namespace, log: GateLog, job: str | None, after: AfterHealth | None = None) -> int:
    """HealthCheckProgram: drain failing nodes, resume the ones nodecheck drained that now pass."""
    from nodecheck.app.defaults import DEFAULT_FANOUT
    from nodecheck.app.slurm import SlurmError
    from nodecheck.app.transports import local_transport, ssh_transport
    from nodecheck.config.inventory import load_inventory, select

    playbook = load_playbook_for(args, "health")
    if args.inventory:
        nodes = select(load_inventory(args.inventory), args.nodes)
        args.connect_timeout = args.connect_timeout or 10.0
        transport, fanout = ssh_transport(args), args.fanout or DEFAULT_FANOUT
    else:
        if args.nodes:
            raise ConfigError(
                "--nodes needs an inventory", file="arguments", hint="nodecheck health hosts.yml --nodes ..."
            )
        nodes, transport, fanout = [Node(name=this_node_name(), address="localhost")], local_transport(), 1
        playbook = after_repair(playbook, args, this_node_name())
    drain_on = gate.drain_on_for(args.drain_on, playbook.gate, local=not args.inventory)
    with _stopper() as stop:
        report = run_gated(
            playbook,
            nodes,
            transport,
            fanout=fanout,
            deadline_s=args.deadline,
            stop=stop,
            inventory=args.inventory,
            retries=args.retries,
            drain_on=drain_on,
        )
    slurm = slurm_for(args)
    try:
        states = slurm.nodes([n.name for n in nodes])
    except SlurmError as e:
        log.event("slurm-unreadable", "-", message=str(e))
        states = {}
    decision = gate.decide(
        report,
        playbook.gate,
        drain_on=drain_on,
        states=states,
        order=[c.spec.name for c in playbook.checks],
        token=site_token(args),
    )
    where = _store(report, args, nodes[0].name if len(nodes) == 1 else "", job, log, decision)
    done = apply(decision, slurm=slurm, log=log, observe=bool(args.observe), report_dir=where, token=site_token(args))
    breaker = decision.breaker
    if done.drained and not args.inventory:  # the local health check: one node per run, as the Prolog
        breaker = _undo_if_mass_drain(
            slurm, nodes[0].name, decision, report, playbook.gate, log, where, site_token(args)
        )
    tail = _tail(where, report)
    parts = [
        f"nodecheck health {nodes[0].name if len(nodes) == 1 else f'{len(nodes)} nodes'}: "
        f"{_first_line(report, decision)}"
    ]
    if after is not None and not breaker:
        run = HealthRun(args, report, tuple(nodes), transport, playbook, where, log, slurm, tuple(drain_on))
        said = after(run)
        tail = (f"; {said}" if said else "") + tail
    if breaker:
        parts.append(breaker)
        _say("; ".join(parts) + tail)
        return EXIT_UNKNOWN
    verb = "would " if args.observe else ""
    # a drain or resume scontrol refused (slurmctld down, the call killed at its bound) is said here
    # too, with why: the result line is what Slurm's log and the operator see, not only the gate log
    drains = [b.node for b in decision.drain if b.node not in done.failed]
    resumes = [n for n in decision.resume if n not in done.failed]
    if drains:
        parts.append(f"{verb}drain {', '.join(drains)}")
    parts += [f"drain FAILED {b.node} ({done.failure(b.node)})" for b in decision.drain if b.node in done.failed]
    if resumes:
        parts.append(f"{verb}resume {', '.join(resumes)}")
    parts += [f"resume FAILED {n} ({done.failure(n)})" for n in decision.resume if n in done.failed]
    if done.left:
        parts.append(f"left as is (drained by someone else): {', '.join(done.left)}")
    _say("; ".join(parts) + tail)
    return EXIT_FAIL if decision.blamed else report.exit_code


def sweep_gate(report: Report, playbook: Playbook, args: Namespace, report_dir: str | None) -> list[str]:
    """`sweep --drain/--resume`: the health etiquette applied to a stored sweep report; the lines to print."""
    from nodecheck.app.slurm import SlurmError
    from nodecheck.gate import config as gateconfig

    options, _ = gateconfig.load(gateconfig.config_path(getattr(args, "config", None)), "sweep")
    gateconfig.apply(args, options)
    log = GateLog(args.log_file or DEFAULT_LOG_FILE, "sweep")
    slurm = slurm_for(args)
    try:
        states = slurm.nodes(report.node_names) if args.resume else {}
    except SlurmError as e:
        log.event("slurm-unreadable", "-", message=str(e))
        return [f"gate: cannot read the nodes' Slurm states ({e}); nothing drained or resumed"]
    decision = gate.decide(
        report,
        playbook.gate,
        drain_on=getattr(args, "drain_on", None),
        states=states,
        order=[c.spec.name for c in playbook.checks],
        token=site_token(args),
        resume=args.resume,
    )
    done = apply(
        decision,
        slurm=slurm,
        log=log,
        observe=bool(args.observe),
        report_dir=report_dir,
        token=site_token(args),
        drain=args.drain,
        resume=args.resume,
    )
    verb = "would " if args.observe else ""
    lines = []
    if decision.tripped:
        lines.append(f"gate: {decision.breaker}")
    if args.drain:
        for b in decision.drain:
            state = (
                "left as is (drained by someone else)"
                if b.node in done.left
                else f"drain FAILED ({done.failure(b.node)})"
                if b.node in done.failed
                else "stays drained (same reason)"
                if b.node in done.kept
                else f"{verb}drained"
            )
            lines.append(f"gate: {b.node} {state}: {b.check}: {b.message}")
    if args.resume:
        lines += [
            f"gate: {n} resume FAILED ({done.failure(n)})"
            if n in done.failed
            else f"gate: {n} {verb}resumed" + (" (left: not ours anymore)" if n in done.left else "")
            for n in decision.resume
        ]
        lines += [f"gate: {n} stays drained: {why}" for n, why in decision.held]
    return lines

"""`nodecheck sweep --slurm-submit`: the sweep as one Slurm batch job on the nodes no job uses.

The inventory's nodes (those the playbook selects) are looked up in Slurm (`scontrol show node`,
bounded); the IDLE ones (with --reservation: the reservation's nodes that run no job) get one
`sbatch --exclusive --nodelist=<them> -N <n>` whose batch script runs this sweep again with
`--slurm-job $SLURM_JOB_ID`, so the scheduler keeps every job off the nodes while they are tested.
Every other node is written down with Slurm's state and the job's sweep reports it SKIPPED,
"not tested: busy (<state>)" or "not tested: down (<state>)", never healthy.

No node idle: nothing is submitted, each node's reason is printed, and the exit code is 3 (could
not judge), so a timer's monitoring does not read "fine". The script and what the job reads live in
a private directory (0700) under OUTPUT_DIR/submit/; the job's exit code is written there, and
--wait waits for the job and exits with it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from argparse import Namespace
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from nodecheck.core.errors import ConfigError
from nodecheck.core.hostlist import fold
from nodecheck.core.model import CheckResult, Status, Verdict, one_line

SKIPPED_FILE = "skipped.json"  # {node: reason}: what the job's sweep reports for the nodes it did not get
EXIT_FILE = "exit_code"
SCRIPT = "sweep.sh"
MAX_SKIPPED_BYTES = 16 << 20
# a node Slurm lets a batch job have: base state IDLE and no flag that keeps jobs off or says it is sick
USABLE = frozenset({"IDLE"})
USABLE_RESERVED = frozenset({"IDLE", "RESERVED", "MAINT"})  # inside our own reservation
DOWN_FLAGS = frozenset({"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "POWERED_DOWN"})
NOT_IN_ALLOCATION = "not tested: busy (not in this sweep's allocation)"
UNREADABLE = "not tested: busy (not in this sweep's allocation; the reason recorded at submission is unreadable)"
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}", re.ASCII)
_TIME = re.compile(r"(\d+-)?\d{1,6}(:\d\d){0,2}|UNLIMITED|INFINITE", re.ASCII)


@dataclass(frozen=True)
class SubmitSettings:
    """sbatch's options for the sweep's job: the command line's, else the config's `sweep: slurm:`."""

    partition: str | None = None
    reservation: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    exclusive: bool = True
    python: str | None = None  # the interpreter the batch job runs nodecheck with (default: this one)

    def sbatch_options(self) -> list[str]:
        opts = ["--exclusive"] if self.exclusive else []
        for key in ("partition", "reservation", "account", "qos", "time"):
            value = getattr(self, key)
            if value:
                opts.append(f"--{key}={value}")
        return opts


def settings(args: Namespace) -> SubmitSettings:
    """The flags over the gate config's slurm: section (sweep's, else the top level's)."""
    from nodecheck.gate import config as gateconfig

    options, source = gateconfig.load(gateconfig.config_path(getattr(args, "config", None)), "sweep")
    base = options.slurm.model_dump() if options.slurm is not None else {}
    merged = {k: v for k, v in base.items() if v is not None}
    for key in ("partition", "reservation", "account", "qos", "time"):
        given = getattr(args, key, None)
        if given:
            merged[key] = given
    for key in ("partition", "reservation", "account", "qos"):
        if merged.get(key) and not _WORD.fullmatch(merged[key]):
            raise ConfigError(f"--{key} {merged[key]!r}: not a Slurm name", file=source or "arguments")
    if merged.get("python") and not (os.path.isabs(merged["python"]) and merged["python"].isprintable()):
        raise ConfigError(f"slurm: python {merged['python']!r}: give an absolute path", file=source or "arguments")
    if merged.get("time") and not _TIME.fullmatch(merged["time"]):
        raise ConfigError(
            f"--time {merged['time']!r}: not a Slurm time limit", file=source or "arguments", hint="e.g. 2:00:00"
        )
    return SubmitSettings(**merged)


# ---- pure: which nodes the job gets, and why the others are not tested ----------------------------


def classify(
    names: Sequence[str], states: Mapping[str, object], reserved: Iterable[str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """(the nodes to submit on, in order; {node: why not tested} for the others). `states`:
    NodeState by name (app.slurm); `reserved`: the reservation's nodes when one is named (then only
    they are usable, RESERVED/MAINT flags allowed; otherwise a RESERVED node is someone else's)."""
    pool = None if reserved is None else set(reserved)
    usable, skipped = [], {}
    for name in names:
        state = states.get(name)
        if state is None:
            skipped[name] = "not tested: unknown to Slurm (scontrol show node does not list it)"
            continue
        flags = frozenset(getattr(state, "flags", ()))
        shown = one_line(str(getattr(state, "state", "?")))[:80]
        if flags & DOWN_FLAGS:
            skipped[name] = f"not tested: down ({shown})"
        elif pool is not None and name not in pool:
            skipped[name] = f"not tested: busy ({shown}; not in the sweep's reservation)"
        elif flags <= (USABLE if pool is None else USABLE_RESERVED) and "IDLE" in flags:
            usable.append(name)
        else:
            skipped[name] = f"not tested: busy ({shown})"
    return usable, skipped


def skipped_results(checks: Sequence[str], skipped: Mapping[str, str]) -> list[CheckResult]:
    """Each node not tested gets each check SKIPPED with its reason: never healthy in the report,
    the history, the diff or the metrics (SKIPPED is not judged: it neither fails nor recovers)."""
    return [
        CheckResult(check, (node,), Verdict(Status.SKIPPED, why, observed={"slurm": why}))
        for node, why in skipped.items()
        for check in checks
    ]


def with_skipped(report, checks: Sequence[str], skipped: Mapping[str, str], addresses: Mapping[str, str]):
    """The report with the nodes not tested added (after the tested ones), each check SKIPPED."""
    extra = [(n, addresses.get(n, n)) for n in skipped if n not in set(report.node_names)]
    if not extra:
        return report
    return replace(
        report,
        nodes=report.nodes + tuple(extra),
        results=report.results + tuple(skipped_results(checks, {n: skipped[n] for n, _ in extra})),
    )


def child_argv(args: Namespace, options: Sequence[tuple[str, str, str]], python: str | None = None) -> list[str]:
    """The `nodecheck sweep ...` the batch job runs: this invocation's options (the sweep parser's
    `options`: (dest, option string or "" for a positional, kind)) less the submission's own; paths
    made absolute."""
    own = {"slurm_submit", "wait", "partition", "reservation", "account", "qos", "time", "slurm_job"}
    # --nodes chose the nodes looked up; the job's sweep runs on the job's nodes (and reports the
    # others from skipped.json), so it is not passed on
    own |= {"slurm_skipped", "sweep_options", "command", "version", "nodes"}
    paths = {"inventory", "config", "output_dir", "history", "metrics", "pins", "log_file"}
    argv: list[str] = []
    positionals: list[str] = []
    for dest, option, kind in options:
        if dest in own:
            continue
        value = getattr(args, dest, None)
        if value is None or value is False or value == [] or value == ():
            continue
        values = list(value) if kind == "append" else [value]
        if dest in paths:
            values = [os.path.abspath(str(v)) for v in values]
        elif dest == "playbook" and (os.sep in str(value) or Path(str(value)).is_file()):
            values = [os.path.abspath(str(value))]
        for v in values:
            if not option:
                positionals.append(str(v))
            elif kind == "flag":
                argv.append(option)
            else:
                argv += [option, ",".join(v) if isinstance(v, (tuple, list)) else str(v)]
    return [python or sys.executable, "-m", "nodecheck", "sweep", *positionals, *argv]


def batch_script(argv: Sequence[str], workdir: str, state_dir: str) -> str:
    """The batch script: the sweep in the job's allocation, its exit code kept for --wait. Every
    word quoted (shlex); nothing secret: the sweep's own options, paths."""
    state, skipped = shlex.quote(state_dir), f"{state_dir}/{SKIPPED_FILE}"
    return (
        "#!/bin/sh\n"
        "# written by nodecheck sweep --slurm-submit: the sweep, inside its own exclusive allocation\n"
        f"cd {shlex.quote(workdir)} || exit 3\n"
        f'{shlex.join(argv)} --slurm-job "$SLURM_JOB_ID" --slurm-skipped {shlex.quote(skipped)}\n'
        "code=$?\n"
        f"printf '%s\\n' \"$code\" > {state}/{EXIT_FILE}.tmp && mv -f {state}/{EXIT_FILE}.tmp {state}/{EXIT_FILE}\n"
        'exit "$code"\n'
    )


# ---- the submission ----------------------------------------------------------------------------


def submit_command(args: Namespace) -> int:
    from nodecheck.app.slurm import Slurm, SlurmError
    from nodecheck.app.targets import select_targets
    from nodecheck.config.playbook import load_playbook
    from nodecheck.report import EXIT_UNKNOWN

    if getattr(args, "slurm_job", None) or args.local:
        raise ConfigError("--slurm-submit submits a job of its own: give no --slurm-job or --local", file="arguments")
    if not args.inventory:
        raise ConfigError("--slurm-submit needs the inventory (hosts.yml) whose nodes it sweeps", file="arguments")
    chosen = settings(args)
    playbook = load_playbook(args.playbook, tuple(args.pins))
    env_job = os.environ.pop("SLURM_JOB_ID", None)  # the submitter may sit in an allocation: not the sweep's
    try:
        nodes, _excluded, _ = select_targets(args, playbook)
    finally:
        if env_job is not None:
            os.environ["SLURM_JOB_ID"] = env_job
    names = [n.name for n in nodes]
    slurm = Slurm(scontrol=getattr(args, "scontrol", None) or "scontrol")
    try:
        states = slurm.node_states(names)
        reserved = slurm.reservation_nodes(chosen.reservation) if chosen.reservation else None
    except SlurmError as e:
        raise ConfigError(
            f"cannot read the nodes' states from Slurm: {e}",
            file="--slurm-submit",
            hint="are scontrol and sbatch on PATH, with SLURM_CONF set? (inventory names must be Slurm's node names)",
        ) from None
    usable, skipped = classify(names, states, reserved)
    for why, group in _grouped(skipped).items():
        print(f"{fold(group)}: {why}", file=sys.stderr)
    if not usable:
        print(
            f"nodecheck: no node to sweep: all {len(names)} are busy or down in Slurm; nothing submitted",
            file=sys.stderr,
        )
        return EXIT_UNKNOWN
    state_dir = _state_dir(args.output_dir)
    _write_private(state_dir / SKIPPED_FILE, json.dumps(skipped, sort_keys=True))
    argv = child_argv(args, getattr(args, "sweep_options", ()), chosen.python)
    script = state_dir / SCRIPT
    _write_private(script, batch_script(argv, os.getcwd(), str(state_dir)), mode=0o700)
    options = [
        *chosen.sbatch_options(),
        f"--nodelist={','.join(usable)}",
        f"--nodes={len(usable)}",
        "--no-kill",  # a node that dies during the sweep is its finding, not the end of the sweep
        "--job-name=nodecheck-sweep",
        f"--output={state_dir}/slurm-%j.out",
    ]
    try:
        job_id = slurm.submit(options, str(script))
    except SlurmError as e:
        raise ConfigError(f"sbatch refused the sweep: {e}", file="--slurm-submit") from None
    print(f"submitted sweep job {job_id} on {fold(usable)} ({len(usable)} nodes; {len(skipped)} not tested)")
    print(f"report: under {os.path.abspath(args.output_dir)}; job output and exit code: {state_dir}")
    if not getattr(args, "wait", False):
        return 0
    return wait_for(slurm, job_id, state_dir)


def wait_for(slurm, job_id: str, state_dir: Path, poll_s: float = 2.0, limit_s: float | None = None) -> int:
    """--wait: until Slurm says the job ended, then the sweep's exit code from the state dir (3 when
    the job ended without writing it: killed, timed out, failed to start)."""
    from nodecheck.app.slurm import SlurmError
    from nodecheck.report import EXIT_UNKNOWN

    give_up = None if limit_s is None else time.monotonic() + limit_s
    misses = 0
    while True:
        try:
            record = slurm.job(job_id)
            misses = 0
            if record.ended:
                break
        except SlurmError as e:
            if "Invalid job id" in str(e):
                break  # slurmctld already forgot it
            misses += 1
            if misses >= 5:
                print(f"nodecheck: error: cannot follow job {job_id}: {e}", file=sys.stderr)
                return EXIT_UNKNOWN
        if give_up is not None and time.monotonic() > give_up:
            print(f"nodecheck: error: job {job_id} still running after {limit_s:g} s; not waited for", file=sys.stderr)
            return EXIT_UNKNOWN
        time.sleep(poll_s)
    code = _exit_code(state_dir / EXIT_FILE)
    if code is None:
        print(
            f"nodecheck: error: job {job_id} ended without the sweep's exit code ({state_dir}/{EXIT_FILE}); see "
            f"{state_dir}/slurm-{job_id}.out",
            file=sys.stderr,
        )
        return EXIT_UNKNOWN
    return code


def _exit_code(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace")[:16].strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) < 256 else None


# ---- the job's side: the nodes it did not get ----------------------------------------------------


def not_tested(args: Namespace, playbook, nodes) -> dict[str, str]:
    """{node: reason} for the inventory's nodes (the playbook's selection) outside the sweep's job:
    empty when the sweep runs on the inventory itself (no --slurm-job, no $SLURM_JOB_ID)."""
    from nodecheck.config.inventory import load_inventory
    from nodecheck.config.playbook import split_selected

    if getattr(args, "job_target", None) is None or not args.inventory:  # not in a job (app.targets.reach)
        return {}
    given = getattr(args, "slurm_skipped", None)
    recorded = _read_skipped(given)
    ran = {n.name for n in nodes}
    selected, _ = split_selected(playbook, load_inventory(args.inventory))
    # submitted by --slurm-submit: the nodes it looked up (the job's and those it wrote down);
    # else every node of the inventory the job did not get
    wanted = (ran | set(recorded)) if given else None
    return {
        n.name: recorded.get(n.name, NOT_IN_ALLOCATION)
        for n in selected
        if n.name not in ran and (wanted is None or n.name in wanted)
    }


def _read_skipped(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_SKIPPED_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"--slurm-skipped {path}: {e.strerror or e}", file="--slurm-skipped") from None
    if len(raw) > MAX_SKIPPED_BYTES:
        raise ConfigError(f"--slurm-skipped {path}: larger than {MAX_SKIPPED_BYTES} bytes", file="--slurm-skipped")
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise ConfigError(f"--slurm-skipped {path}: not JSON: {e}", file="--slurm-skipped") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ConfigError(f"--slurm-skipped {path}: not a mapping of node to reason", file="--slurm-skipped")
    # what we wrote says "not tested: ...": anything else is not ours to print
    return {k: one_line(v)[:200] if v.startswith("not tested: ") else UNREADABLE for k, v in data.items()}


def _grouped(skipped: Mapping[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for node, why in skipped.items():
        out.setdefault(why, []).append(node)
    return out


def _state_dir(output_dir: str) -> Path:
    root = Path(output_dir).absolute() / "submit"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    path = root / stamp
    path.mkdir(mode=0o700)  # a new one each time: never follow what someone put there
    os.chmod(path, 0o700)
    return path


def _write_private(path: Path, text: str, mode: int = 0o600) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, mode)

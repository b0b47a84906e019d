"""A real Slurm (see "Slurm" in tests/harness/README.md): slurm_up() starts slurmctld and one slurmd per
node through tests/harness/slurm_cluster.sh, each slurmd inside its node's namespaces, so a Prolog on
node3 runs node3's fake tools with hostname node3; sbatch(), wait_job(), node(), drain()/resume(),
slurm_reset(), run_on_node() drive it from tests."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from harness.sim.common import SLURM_SCRIPT, HarnessError, alive, atomic_write, natural, read_pid
from harness.sim.nodes import Nodes


class Slurm(Nodes):
    """A real Slurm over the nodes, and the client commands tests drive it with."""

    @property
    def slurm_dir(self) -> Path:
        return self.state_dir / "slurm"

    @property
    def slurm_conf(self) -> Path:
        """slurm.conf of the running Slurm cluster (SLURM_CONF for sbatch, scontrol, ...)."""
        return self.slurm_dir / "slurm.conf"

    @property
    def slurm_is_up(self) -> bool:
        return self.slurm_conf.is_file()

    def slurm_up(
        self,
        nodes: int | Sequence[str] | None = None,
        prolog: str | os.PathLike | None = None,
        prolog_slurmctld: str | os.PathLike | None = None,
        health_check_program: str | os.PathLike | None = None,
        extra_conf: Sequence[str] = (),
        prolog_flags: str = "Alloc",
        timeout: float = 30,
        etc_files: Mapping[str, str] | None = None,
        reboot_program: bool = False,
        resume_timeout: int = 90,
    ) -> Path:
        """Start slurmctld and a slurmd on each node (default: every node; an int n = node1..node<n>)
        and wait until all are idle; returns slurm.conf. Already up with the same configuration:
        nothing happens; with another one, the whole Slurm cluster restarts (jobs are lost).
        prolog and health_check_program run inside the nodes: they must not live under /root (each
        node has its own). extra_conf: slurm.conf lines; KEY=... replaces our default for KEY
        (e.g. "HealthCheckInterval=5", "SchedulerParameters=sched_interval=1"). etc_files: {name: text}
        put beside slurm.conf (and in /etc/slurm on the nodes) before any daemon starts, e.g. the
        gate's nodecheck.yml, which a HealthCheckProgram reads when slurmd starts. reboot_program:
        RebootProgram= the harness's (tests/harness/slurm_reboot.sh) and ResumeTimeout=resume_timeout, so
        `scontrol reboot` "reboots" a node: its slurmd restarts as after a boot (README, "Reboot");
        reboots() counts them, on_reboot() says what a reboot of a node clears."""
        if nodes is None:
            names = self.nodes
        elif isinstance(nodes, int):
            names = [f"node{i}" for i in range(1, nodes + 1)]
        else:
            names = [f"node{self._index(n)}" for n in nodes]
        env = {
            "PROLOG": "",
            "PROLOG_SLURMCTLD": "",
            "HEALTH_CHECK_PROGRAM": "",
            "PROLOG_FLAGS": prolog_flags,
            "EXTRA_CONF": "\n".join(extra_conf),
            "SLURM_UP_TIMEOUT": str(max(1, int(timeout))),
            "REBOOT_PROGRAM": "1" if reboot_program else "0",
            "RESUME_TIMEOUT": str(max(1, int(resume_timeout))),
        }
        for key, program, on_node in (
            ("PROLOG", prolog, True),
            ("PROLOG_SLURMCTLD", prolog_slurmctld, False),
            ("HEALTH_CHECK_PROGRAM", health_check_program, True),
        ):
            if program is None:
                continue
            path = os.path.abspath(program)
            if on_node and _under_hidden_dir(path):
                raise HarnessError(
                    f"{key.lower()} {path} is under /root (or /usr/local/sbin), which every simulated node "
                    "replaces with its own: slurmd could not run it there. Keep the repository, its .venv "
                    "and temp files elsewhere (e.g. /work, /tmp; pytest's tmp_path honours $TMPDIR)."
                )
            env[key] = path
        if etc_files:
            staged = self.state_dir / ".slurm-etc"
            shutil.rmtree(staged, ignore_errors=True)
            staged.mkdir()
            for name, text in etc_files.items():
                (staged / name).write_text(text)
            env["SLURM_ETC_FILES"] = str(staged)
        self._slurm_sh("up", *names, env=env, timeout=timeout + 30)
        return self.slurm_conf

    def reboots(self, node: str) -> list[dict[str, str]]:
        """The reboots the RebootProgram did on the node since slurm_up(reboot_program=True), oldest first:
        {"time", "State", "Reason"}, the node as slurmctld showed it when the reboot began, e.g. State
        "DOWN+DRAIN+REBOOT_ISSUED", Reason "R : reboot issued [root@2026-12-07T17:55:06]"."""
        log = self.slurm_dir / "reboots" / f"node{self._index(node)}.log"
        try:
            lines = log.read_text().splitlines()
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            m = re.fullmatch(r"(\S+) node\d+ State=(\S*) Reason=(.*)", line)
            if not m:
                raise HarnessError(f"{log}: unexpected line {line!r}")
            found.append(dict(zip(("time", "State", "Reason"), m.groups(), strict=True)))
        return found

    NODE_STAYS_OFF = 75  # an on_reboot() hook exiting with this: the node does not come back

    def on_reboot(self, node: str, script: str | None) -> Path:
        """What a reboot of the node clears: this /bin/sh script runs (as root, inside the node, on the
        harness's files by absolute paths) each time the RebootProgram reboots the node, after its slurmd
        stopped and before it starts again; exit 75: the node does not come back (its slurmd stays
        stopped until slurm_revive). None: no hook. It lives with the node's fake tools (clear_tools()
        removes it)."""
        hook = self.node_dir(node) / "data" / "on-reboot.sh"
        if script is None:
            hook.unlink(missing_ok=True)
        else:
            atomic_write(hook, script.encode(), 0o644)
        return hook

    def slurm_down(self, reaped_within_s: float = 30) -> None:
        """Stop slurmctld, every slurmd, their jobs and the harness's munged; remove slurm_dir. Returns
        once this cluster's daemons are gone from /proc, reaped too: until PID 1 reaps it, a dead slurmd
        is a zombie that `pgrep -x slurmd` still lists, and the idle guard of the disruptive checks
        rightly reads a node with a slurmd and no squeue answer as busy."""
        daemons = self._daemon_pids()
        self._slurm_sh("down", timeout=60)
        deadline = time.monotonic() + reaped_within_s
        while left := [p for p in daemons if Path(f"/proc/{p}").exists()]:
            if time.monotonic() > deadline:
                raise HarnessError(f"slurm down: daemons {left} not reaped after {reaped_within_s:g} s")
            time.sleep(0.05)

    def _daemon_pids(self) -> list[int]:
        """slurmctld and the slurmd of this cluster (their command line names its slurm.conf)."""
        conf = str(self.slurm_conf).encode()
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                comm = (proc / "comm").read_text().strip()
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:  # gone meanwhile
                continue
            if comm in ("slurmctld", "slurmd") and conf in cmdline:
                found.append(int(proc.name))
        return found

    def slurm_revive(self, timeout: float = 30) -> None:
        """Start again the slurmd of nodes that were stopped and started (stop()/reset()); a dead
        slurmctld or munged restarts the whole Slurm cluster with the same slurm.conf."""
        self._slurm_sh("revive", env={"SLURM_UP_TIMEOUT": str(max(1, int(timeout)))}, timeout=timeout + 30)

    def slurmctld_kill(self) -> int:
        """slurmctld dies (SIGKILL), slurmd and munged stay: every scontrol gets "Unable to contact
        slurm controller". slurm_up() again (or slurm_down()) brings it back / cleans up."""
        pid = read_pid(self.slurm_dir / "slurmctld.pid")
        if not alive(pid):
            raise HarnessError("slurmctld is not running")
        os.kill(pid, signal.SIGKILL)
        for _ in range(50):
            if not alive(pid):
                break
            time.sleep(0.1)
        return pid

    def slurm_env(self) -> dict[str, str]:
        """os.environ plus SLURM_CONF, for running Slurm's clients (sbatch, sinfo, nodecheck)."""
        return dict(os.environ, SLURM_CONF=str(self.slurm_conf))

    def slurm_command(self, *argv: str, timeout: float = 10, check: bool = True) -> subprocess.CompletedProcess:
        """Run a Slurm client (argv[0]: sinfo, squeue, scancel, ...) against the cluster, from the
        jobs directory (where sbatch's slurm-%j.out files go)."""
        jobs = self.slurm_dir / "jobs"
        jobs.mkdir(parents=True, exist_ok=True)
        try:
            r = subprocess.run(
                list(argv),
                env=self.slurm_env(),
                cwd=jobs,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            raise HarnessError(f"{shlex.join(argv)}: timed out after {timeout} s\n{self.slurm_logs()}") from e
        if check and r.returncode != 0:
            raise HarnessError(
                f"{shlex.join(argv)} failed (exit {r.returncode}): {r.stderr.strip() or r.stdout.strip()}"
            )
        return r

    def scontrol(self, *args: str, timeout: float = 10) -> str:
        """stdout of `scontrol ARGS` (raises HarnessError on failure)."""
        return self.slurm_command("scontrol", *args, timeout=timeout).stdout

    def sbatch(self, *args: str, wrap: str | None = "true", timeout: float = 10) -> int:
        """Submit a batch job (`sbatch --parsable ARGS --wrap=WRAP`; wrap=None: ARGS name a script)
        and return its id. Output goes to slurm_dir/jobs/slurm-<id>.out unless ARGS say otherwise."""
        argv = ["sbatch", "--parsable", *args] + ([f"--wrap={wrap}"] if wrap is not None else [])
        out = self.slurm_command(*argv, timeout=timeout).stdout.strip()
        return int(out.split(";")[0])

    def job(self, jobid: int) -> dict[str, str]:
        """`scontrol show job JOBID` as {key: value}: JobState, Reason, NodeList, BatchHost,
        Restarts, ExitCode, ... (a job array or het job: its first record)."""
        return _scontrol_record(self.scontrol("show", "job", str(int(jobid))))

    def wait_job(self, jobid: int, states: Collection[str] = ("COMPLETED",), timeout: float = 60) -> dict[str, str]:
        """Poll until the job's JobState is one of `states`; returns job(). Raises HarnessError (with
        the job and the daemons' log tails) on timeout, or as soon as the job ends in another state."""
        final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(jobid)
            state = job.get("JobState", "")
            if state in states:
                return job
            if state in final or time.monotonic() > deadline:
                why = f"ended {state}" if state in final else f"still {state} after {timeout} s"
                raise HarnessError(f"job {jobid} {why}, wanted {sorted(states)}: {job}\n{self.slurm_logs()}")
            time.sleep(0.2)

    def node(self, name: str) -> dict[str, str]:
        """`scontrol show node NAME` as {key: value}. State e.g. "IDLE+DRAIN"; Reason is the whole text
        as Slurm shows it ("Prolog error [root@2026-11-29T14:12:26]"), ReasonText / ReasonUser /
        ReasonTime its parts ("" when the node has no reason)."""
        node = _scontrol_record(self.scontrol("show", "node", f"node{self._index(name)}"))
        node.setdefault("Reason", "")
        m = re.fullmatch(r"(.*) \[([^\]@]*)@([0-9T:-]+)\]", node.get("Reason", ""), re.S)
        parts = m.groups() if m else (node.get("Reason", ""), "", "")
        node["ReasonText"], node["ReasonUser"], node["ReasonTime"] = parts
        return node

    def wait_node(self, name: str, predicate: Callable[[dict[str, str]], bool], timeout: float = 30) -> dict[str, str]:
        """Poll node(name) until predicate(node) is true; returns it. HarnessError on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            node = self.node(name)
            if predicate(node):
                return node
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"{name}: condition not met after {timeout} s: State={node.get('State')} "
                    f"Reason={node.get('Reason')!r}\n{self.slurm_logs()}"
                )
            time.sleep(0.2)

    def drain(self, name: str, reason: str) -> None:
        """As an operator would: scontrol update nodename=NAME state=drain reason=REASON."""
        self.scontrol("update", f"nodename=node{self._index(name)}", "state=drain", f"reason={reason}")

    def resume(self, name: str) -> None:
        """scontrol update nodename=NAME state=resume (drained or down: back in service)."""
        self.scontrol("update", f"nodename=node{self._index(name)}", "state=resume")

    def slurm_nodes(self) -> dict[str, str]:
        """{node: State} of every Slurm node (e.g. "IDLE", "IDLE+DRAIN", "MIXED+DRAIN")."""
        out = self.slurm_command("sinfo", "-h", "-N", "-O", "NodeList:64,StateComplete:128").stdout
        return {f[0]: f[1].upper() for f in (line.split() for line in out.splitlines()) if len(f) == 2}

    def slurm_reset(self, timeout: float = 30) -> None:
        """Between tests: slurmd of restarted nodes started again, every job cancelled, every drained or
        down node resumed (whatever its reason), every node idle again. Every node must be running:
        call it after reset() (which starts stopped nodes), e.g. at the start of each test."""
        self.slurm_revive(timeout=timeout)
        self.slurm_command("scancel", "--user=root", check=False)
        deadline = time.monotonic() + timeout
        while self.slurm_command("squeue", "-h", "-o", "%i").stdout.strip():
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"jobs left after scancel: {self.slurm_command('squeue').stdout}\n{self.slurm_logs()}"
                )
            time.sleep(0.1)
        self._end_reboots()
        stuck = [n for n, st in self.slurm_nodes().items() if re.search(r"DRAIN|DOWN|FAIL|NOT_RESPONDING", st)]
        if stuck:
            self.scontrol("update", f"nodename={','.join(stuck)}", "state=resume")
        while True:
            states = self.slurm_nodes()
            if all(st == "IDLE" for st in states.values()):
                return
            if time.monotonic() > deadline:
                raise HarnessError(f"nodes not idle after reset: {states}\n{self.slurm_logs()}")
            time.sleep(0.1)

    def _end_reboots(self) -> None:
        """A reboot a test left behind: requested ones cancelled; an issued one (a node that stays off)
        ended by marking the node DOWN, which the caller then resumes."""
        states = self.slurm_nodes()
        requested = [n for n, st in states.items() if "REBOOT_REQUESTED" in st]
        issued = [n for n, st in states.items() if "REBOOT_ISSUED" in st]
        if requested:
            self.scontrol("cancel_reboot", ",".join(requested))
        if issued:
            self.scontrol("update", f"nodename={','.join(issued)}", "state=down", "reason=harness: slurm_reset")

    def slurm_logs(self, lines: int = 15) -> str:
        """The last lines of slurmctld's log and of each slurmd's log (for assertion messages)."""
        parts = []
        logs = self.slurm_dir / "log"
        for f in [logs / "slurmctld.log", *sorted(logs.glob("slurmd-*.log"), key=lambda p: natural(p.name))]:
            try:
                tail = f.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            parts.append(f"--- {f.name}\n" + "\n".join(tail))
        return "\n".join(parts) or f"(no Slurm logs under {logs})"

    def run_on_node(
        self, node: str, argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 60
    ) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of argv run "on" the node as slurmd runs its HealthCheckProgram:
        inside the node's UTS + mount + network namespaces, with ONLY `env` in the environment
        (default: what Slurm 22.05 gives a HealthCheckProgram, SLURMD_NODENAME=<node>; no PATH, so give
        argv[0] as an absolute path), in slurmd's log directory (/ without Slurm). /etc/slurm/slurm.conf
        is there while Slurm is up."""
        name = f"node{self._index(node)}"
        env = {"SLURMD_NODENAME": name} if env is None else dict(env)
        cwd = self.slurm_dir / "log" if self.slurm_is_up else Path("/")
        cmd = [
            "nsenter",
            "-t",
            str(self.pid(name)),
            "-u",
            "-m",
            "-n",
            f"--wd={cwd}",
            "--",
            "/usr/bin/env",
            "-i",
            *[f"{k}={v}" for k, v in env.items()],
            *argv,
        ]
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise HarnessError(f"{shlex.join(argv)} on {name}: timed out after {timeout} s") from e
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")

    def _slurm_sh(self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> str:
        full = dict(os.environ, NODECHECK_HARNESS_DIR=str(self.state_dir), **(env or {}))
        try:
            r = subprocess.run(
                ["bash", str(SLURM_SCRIPT), *args],
                env=full,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as e:
            raise HarnessError(f"slurm_cluster.sh {' '.join(args)}: timed out after {timeout} s") from e
        if r.returncode != 0:
            raise HarnessError(
                f"slurm_cluster.sh {' '.join(args)} failed (exit {r.returncode}): "
                f"{r.stderr.strip() or r.stdout.strip()}"
            )
        return r.stdout


_WHOLE_LINE_KEYS = (
    "Reason",
    "OS",
    "Comment",
    "AdminComment",
    "SystemComment",
    "Extra",
    "Command",
    "WorkDir",
    "StdErr",
    "StdIn",
    "StdOut",
)


_KEY_START = re.compile(r"\s+(?=[A-Za-z][A-Za-z0-9_:/]*=)")


def _scontrol_record(text: str) -> dict[str, str]:
    """The first record of `scontrol show job|node` (multi-line form) as {key: value}."""
    record: dict[str, str] = {}
    for line in text.split("\n\n")[0].splitlines():
        line = line.strip()
        if not line:
            continue
        key = line.split("=", 1)[0]
        fields = [line] if key in _WHOLE_LINE_KEYS else _KEY_START.split(line)
        for field in fields:
            k, sep, v = field.partition("=")
            if sep:
                record[k] = v.strip() if k in _WHOLE_LINE_KEYS else v
    return record


def _under_hidden_dir(path: str) -> bool:
    """Is path (or what it resolves to) under a directory each simulated node replaces with its own?"""
    return any(
        p == d or p.startswith(d + "/") for p in (path, os.path.realpath(path)) for d in ("/root", "/usr/local/sbin")
    )

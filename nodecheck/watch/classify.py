"""Samples over time → one verdict per tick: is the job progressing, saving a checkpoint, slow, hung?

Pure and deterministic: time comes only from Tick.at (the watcher's clock), never from the host.
The Tracker keeps what the bounds need (the last step and when it changed, the heartbeat's mtime,
the processes each node had, when each condition began, a bounded history) and survives the
watcher's restarts through to_json/from_json: a watcher restarted during a hang keeps the hang clock.

Verdicts, most severe first (the first that applies is the tick's verdict):
  completed      Slurm says COMPLETED, or the log said done and every node's processes are gone
  crashed        Slurm says FAILED/CANCELLED/TIMEOUT/...; or processes gone on some nodes while others
                 run or the job is still allocated; or gone on every node without the log saying done
  hung           progress frozen longer than hang_after_s (checkpoint_max_s while a checkpoint explains
                 the freeze: its GPU pattern or the log's checkpoint line); the power-deadlock signature
                 (every GPU near idle power, one or a few ranks idle, the rest busy) is named with the odd
                 ranks; no progress at all within startup_grace_s; processes still running hang_after_s
                 after the log said done. Once hung, hung until progress resumes (or a new run starts).
  unresponsive   a node's samples have failed for unresponsive_after_s, or kept failing again and again
                 for that long (a node that comes back once is quiet at once); or NO node answers for
                 that long: the watcher's own network may be down, so that is never called "hung" (a
                 verdict already reached stands)
  slow           throughput (the lowest node's) under throughput_floor for slow_for_s
  straggler      a node's ranks' median step time more than straggler_pct above the median of the
                 other nodes' ranks
  checkpointing  progress paused and a checkpoint explains it, within checkpoint_max_s: quiet
  progressing    progress has been seen (a step or heartbeat changed) and is within its bounds
  starting       no progress seen yet, within startup_grace_s (or Slurm: PENDING)

GPU utilization is not progress (a rank blocked in a collective reads 100%): only a changed step or
heartbeat is; a log that grows with other lines (NCCL WARN spam) is not. The first sample of a node is
a baseline, not progress, so "progressing" needs a change. A step that goes back (a restart from a
checkpoint) is a new baseline, not progress. Heartbeat mtimes are compared with each other only, never
with a clock, so skew between nodes, file server and watcher neither fakes nor hides progress.
A node whose processes never matched --match is not "gone" (a wrong pattern and a job that never
started look alike): the log decides, and the message says that nothing matched. Processes replaced
on every node after progress are a new run (a requeue the watcher did not see pending): its clocks
start over, once per progress, so a crash loop gets no endless grace.
Ranks are laid out as node position in `nodes` x gpus_per_node + GPU index.

The Tracker's inputs and outputs (Observation, Tick, Assessment) and the verdict names are in
verdicts.py; what one tick's readings show on their own (the GPU pattern, the ranks' medians) in
readings.py; how messages write durations and numbers in wording.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, cast

from nodecheck.core.hostlist import fold
from nodecheck.judging.drift import group_by_value
from nodecheck.parsers.watch_sample import GpuSample, ProgressReading
from nodecheck.watch.config import WatchConfig
from nodecheck.watch.readings import LowPowerPattern, RankGpu, low_power_pattern, median_without, procs_errors
from nodecheck.watch.verdicts import FAILED_STATES, VERDICTS, WAITING_STATES, Assessment, Tick
from nodecheck.watch.wording import duration, fold_ranks

STATE_VERSION = 1
PIDS_KEPT = 64


@dataclass
class _NodeState:
    """What the Tracker remembers of one node between ticks (all JSON-able)."""

    log_seen: bool = False  # a readable log was sampled: its step is the baseline
    step: int | None = None
    beat_seen: bool = False
    beat: float | None = None
    had_procs: int = 0  # the most live processes ever seen (0: never any)
    procs: int | None = None  # live processes in the last sample (None: unknown)
    fail_since: float | None = None
    failure: str = ""  # the last failure (kept while the node is flaky)
    gpus: int = 0  # GPUs in the last sample
    # a node that fails every other tick never fails for unresponsive_after_s in a row: its failures
    # are counted from the first one until it has answered for that long without one
    flaky_since: float | None = None
    flaky_streaks: int = 0  # separate runs of failed samples since flaky_since
    flaky_failed: int = 0
    flaky_samples: int = 0
    flaky_upto: int = 0  # flaky_samples at the last failure (the ratio's base)
    ok_since: float | None = None  # the current run of answered samples began
    # the live pids last seen (at most PIDS_KEPT): none of them left on every node is a new run
    pids: list = field(default_factory=list)
    replaced_at: float | None = None  # when its processes were last found replaced


class Tracker:
    def __init__(self, cfg: WatchConfig, nodes: Sequence[str]) -> None:
        self.cfg = cfg
        self.nodes: list[str] = list(dict.fromkeys(nodes))
        self.position: dict[str, int] = {n: i for i, n in enumerate(self.nodes)}  # rank layout, sort key
        self.node: dict[str, _NodeState] = {n: _NodeState() for n in self.nodes}
        self.first_at: float | None = None  # first tick of this run (startup grace counts from it)
        self.progressed = False  # a step or heartbeat ever changed in this run
        self.last_progress_at: float | None = None
        self.step: int | None = None  # the highest step any node showed last
        self.step_at_change: int | None = None  # the step when progress last changed
        self.gpus_per_node: int | None = cfg.gpus_per_node
        self.signature_since: float | None = None
        self.pattern_since: float | None = None
        self.slow_since: float | None = None
        self.done_since: float | None = None
        # the last tick a checkpoint explained the freeze: once the save ends (its "saved" line is
        # no longer a "saving" line, the GPUs leave the pattern) the hang clock counts from here,
        # not from the last step, or every save longer than hang_after_s would read as a hang
        self.checkpoint_seen_at: float | None = None
        self.verdict = "starting"
        self.since: float | None = None
        self.history: list[dict] = []
        self.rate = ""  # "(+12 in 30 s)" for this tick's message
        self.restarted: list[str] = []  # nodes whose step went back this tick
        self.new_run: list[str] = []  # nodes whose processes were all replaced this tick
        self.last_gpus: dict[str, tuple[float, tuple[GpuSample, ...]]] = {}  # node -> (when, readings)
        self.last_rank_seconds: dict[str, tuple[float, Mapping[int, float]]] = {}  # node -> (when, times)
        self.log_problems: dict[str, str] = {}  # this tick's: why a node's log could not be read

    # -- one tick --------------------------------------------------------------------------------

    def update(self, tick: Tick) -> Assessment:
        at = tick.at
        # "CANCELLED+" (scontrol), "CANCELLED by 1000" (sacct/squeue): the state is the first word
        state = ((tick.job_state or "").upper().split() or [""])[0].rstrip("+") or None
        if state in WAITING_STATES:
            self._run_starts_over()
        elif self.first_at is None:
            self.first_at = at
            self.last_progress_at = at
        before = (self.step_at_change, self.last_progress_at)
        moved = self._observe(tick)
        self.rate = ""
        if (
            moved
            and before[0] is not None
            and self.step is not None
            and before[1] is not None
            and self.step > before[0]
        ):
            self.rate = f" (+{self.step - before[0]} in {duration(at - before[1])})"
        if moved:
            self.progressed, self.last_progress_at = True, at
        if moved or self.restarted:
            self.step_at_change = self.step
        self.new_run = self._new_run(at) if state not in WAITING_STATES else []
        gpus = self._gpus(tick)
        pattern = low_power_pattern(gpus, self.cfg)
        self.signature_since = _hold(self.signature_since, pattern.signature, at, moved)
        self.pattern_since = _hold(self.pattern_since, pattern.checkpoint, at, moved)
        readings = [o.progress for o in tick.nodes if o.sample is not None and o.progress is not None]
        if moved:
            self.checkpoint_seen_at = None
        elif self._checkpoint(pattern, readings):
            self.checkpoint_seen_at = at
        done = any(p.done for p in readings)
        self.done_since = _hold(self.done_since, True, at, False) if done else (None if moved else self.done_since)
        throughput = self._throughput(tick)
        floor = self.cfg.bounds.throughput_floor
        below = floor is not None and throughput is not None and throughput[0] < floor
        self.slow_since = _hold(self.slow_since, below, at, False)

        verdict, message, nodes, ranks = self._decide(tick, state, moved, pattern, readings, throughput)
        if verdict != self.verdict or self.since is None:
            self.verdict, self.since = verdict, at
        facts = self._facts(tick, pattern, throughput)
        self._remember(at, verdict, facts)
        return Assessment(verdict, f"{verdict}: {message}", tuple(nodes), tuple(ranks), self.since, facts)

    def _run_starts_over(self) -> None:
        """Pending or requeued: the processes seen belonged to the last run; the clocks restart."""
        for node in self.node.values():
            node.had_procs, node.procs = 0, None
        self.first_at = self.last_progress_at = None
        self.progressed = False
        self.signature_since = self.pattern_since = self.slow_since = self.done_since = None
        self.checkpoint_seen_at = None

    def _observe(self, tick: Tick) -> bool:
        """Fold the tick's samples into the node states; True when any step or heartbeat changed."""
        moved = False
        self.restarted = []
        self.log_problems = {}
        for obs in tick.nodes:
            if obs.node not in self.node:
                self.position[obs.node] = len(self.nodes)
                self.nodes.append(obs.node)
                self.node[obs.node] = _NodeState()
            node = self.node[obs.node]
            sample = obs.sample
            self._answered(node, tick.at, sample is not None, obs.failure)
            if sample is None:
                node.procs = None
                continue
            node.gpus = len(sample.gpus)
            node.procs = len(sample.alive) if sample.processes_known else None
            if node.procs:
                node.had_procs = max(node.had_procs, node.procs)
            if sample.processes_known:
                pids = sorted(p.pid for p in sample.alive)
                if node.pids and pids and not set(node.pids) & set(pids):
                    node.replaced_at = tick.at
                node.pids = pids[:PIDS_KEPT]
            if sample.log_watched and sample.log_error:
                self.log_problems[obs.node] = sample.log_error
            if sample.log_watched and not sample.log_error and obs.progress is not None:
                step = obs.progress.step
                if node.log_seen and step is not None and node.step is not None and step < node.step:
                    # the job restarted from a checkpoint (or a new run writes the log): a new baseline,
                    # not progress; its next step is
                    self.restarted.append(obs.node)
                elif node.log_seen and step != node.step and step is not None:
                    moved = True
                node.log_seen, node.step = True, step if step is not None else node.step
            if sample.heartbeat_watched:
                # a changed mtime is a touch, whichever way it moved: mtimes are only compared with
                # each other, never with a clock, so skew between the nodes, the file server and the
                # watcher cannot fake or hide progress
                beat = sample.heartbeat_mtime
                if node.beat_seen and beat is not None and beat != node.beat:
                    moved = True
                if beat is not None or not node.beat_seen:
                    node.beat_seen, node.beat = True, beat if beat is not None else node.beat
        steps = [n.step for n in self.node.values() if n.step is not None]
        self.step = max(steps) if steps else None
        return moved

    def _answered(self, node: _NodeState, at: float, ok: bool, failure: str) -> None:
        """Count a node's sample as answered or failed (see _NodeState's flaky_* fields)."""
        if not ok:
            if node.fail_since is None:
                node.fail_since = at
                node.flaky_since = node.flaky_since if node.flaky_since is not None else at
                node.flaky_streaks += 1
            node.failure = failure or "no sample"
            node.flaky_failed += 1
            node.flaky_samples += 1
            node.flaky_upto = node.flaky_samples
            node.ok_since = None
            return
        node.fail_since = None
        if node.flaky_since is None:
            return
        node.flaky_samples += 1
        if node.ok_since is None:
            node.ok_since = at
        if at - node.ok_since >= self.cfg.bounds.unresponsive_after_s:  # steady again
            node.flaky_since, node.ok_since, node.failure = None, None, ""
            node.flaky_streaks = node.flaky_failed = node.flaky_samples = node.flaky_upto = 0

    def _new_run(self, at: float) -> list[str]:
        """The nodes whose processes were all replaced since the last progress, when that is every node
        that ran any (a requeue onto the same nodes, a relaunch): the old run's clocks no longer apply.
        Only after progress: a crash loop that never steps keeps its one startup grace."""
        ran = [n for n in self.nodes if self.node[n].had_procs]
        if (
            not ran
            or not self.progressed
            or self.last_progress_at is None
            or any((replaced := self.node[n].replaced_at) is None or replaced <= self.last_progress_at for n in ran)
        ):
            return []
        for n in ran:
            self.node[n].replaced_at = None
        self.first_at = self.last_progress_at = at
        self.progressed = False
        self.signature_since = self.pattern_since = self.slow_since = self.done_since = None
        self.checkpoint_seen_at = None
        self.verdict, self.since = "starting", None
        return ran

    def _gpus(self, tick: Tick) -> list[RankGpu]:
        counts = [len(o.sample.gpus) for o in tick.nodes if o.sample is not None and o.sample.gpus]
        if self.cfg.gpus_per_node is None and counts:
            self.gpus_per_node = max([self.gpus_per_node or 0, *counts])
        per_node = self.gpus_per_node or 0
        out = []
        for obs in tick.nodes:
            if obs.sample is not None and obs.sample.gpus:
                self.last_gpus[obs.node] = (tick.at, obs.sample.gpus)
            # a node that missed this sample (busy sshd, a slow nvidia-smi) keeps its last readings for
            # unresponsive_after_s: without them the odd rank of a deadlock can vanish from the pattern
            # for one tick, and the hang is called without naming it
            at, gpus = self.last_gpus.get(obs.node, (None, ()))
            if at is None or tick.at - at > self.cfg.bounds.unresponsive_after_s:
                continue
            position = self.position[obs.node]
            out += [RankGpu(obs.node, position * per_node + g.index, g) for g in gpus]
        return out

    def _throughput(self, tick: Tick) -> tuple[float, str] | None:
        """(the lowest node's throughput, that node): the job runs at its slowest node's pace."""
        found = [
            (o.progress.throughput, o.node)
            for o in tick.nodes
            if o.sample is not None and o.progress is not None and o.progress.throughput is not None
        ]
        return min(found) if found else None

    # -- the verdict -----------------------------------------------------------------------------

    def _decide(
        self,
        tick: Tick,
        state: str | None,
        moved: bool,
        pattern: LowPowerPattern,
        readings: list[ProgressReading],
        throughput,
    ) -> tuple[str, str, list, list]:
        at, b = tick.at, self.cfg.bounds
        step = self._step_words()
        if state == "COMPLETED":
            return "completed", f"Slurm says COMPLETED; {step}", [], []
        if state in FAILED_STATES:
            reason = f" ({tick.job_reason})" if tick.job_reason and tick.job_reason != "None" else ""
            return "crashed", f"Slurm says {state}{reason}; {step}", [], []
        if state in WAITING_STATES:
            reason = f" ({tick.job_reason})" if tick.job_reason and tick.job_reason != "None" else ""
            return "starting", f"Slurm says {state}{reason}", [], []
        # not waiting: update() started this run's clocks
        assert self.first_at is not None and self.last_progress_at is not None

        ran = [n for n in self.nodes if self.node[n].had_procs]
        known = [n for n in self.nodes if self.node[n].procs is not None]
        gone = [n for n in ran if self.node[n].procs == 0]
        running = [n for n in self.nodes if self.node[n].procs]
        done_line = next((p.last_line for p in readings if p.done), "")
        all_gone = bool(ran) and len(known) == len(self.nodes) and not running
        if all_gone and self.done_since is not None:
            return (
                "completed",
                f"the log says done ({done_line!r}) and the processes are gone on every node; {step}",
                [],
                [],
            )
        if all_gone and state != "COMPLETING":
            return "crashed", f"processes gone on every node; {step}", sorted(gone, key=self.position.__getitem__), []
        if gone and self.done_since is None and state != "COMPLETING":
            had = ", ".join(f"{n} had {self.node[n].had_procs}" for n in gone)
            if running:
                live = sum(self.node[n].procs or 0 for n in running)  # (running: procs > 0)
                still = f"{fold(running)} still run{'s' if len(running) == 1 else ''} {live}"
            elif state:
                still = f"the job is still allocated (Slurm {state})"
            else:
                still = f"{fold(sorted(set(self.nodes) - set(gone), key=self.position.__getitem__))} cannot be sampled"
            return "crashed", f"processes gone on {fold(gone)} ({had}) while {still}; {step}", gone, []

        if tick.nodes and not any(o.sample is not None for o in tick.nodes):
            return self._lost(at, step)
        unresponsive = [n for n in self.nodes if self._unresponsive(self.node[n], at)]
        hung = self._hung(at, moved, pattern, readings, unresponsive, step, running)
        if hung is not None:
            return hung
        if self.done_since is not None:
            return (
                "progressing" if self.progressed else "starting",
                f"the log says done ({done_line!r}) {duration(at - self.done_since)} ago; processes "
                f"still on {fold(running) if running else 'nodes not sampled'} ({step})",
                [],
                [],
            )
        if unresponsive:
            return (
                "unresponsive",
                f"{self._silence(unresponsive, at)}; the job still progresses ({step})",
                unresponsive,
                [],
            )
        if self.slow_since is not None and at - self.slow_since >= b.slow_for_s:
            value, node = throughput
            return (
                "slow",
                f"throughput {value:,.0f} below the floor {b.throughput_floor:,.0f} for "
                f"{duration(at - self.slow_since)} (lowest on {node}; {step})",
                [node],
                [],
            )
        straggler = self._straggler(tick)
        if straggler is not None:
            return straggler
        frozen = at - self.last_progress_at
        explained = self._checkpoint(pattern, readings)
        if explained and not moved:
            return (
                "checkpointing",
                f"no progress for {duration(frozen)} (bound {duration(b.checkpoint_max_s)}): {explained}; {step}",
                [],
                [],
            )
        if self.progressed:
            tail = "" if moved else f"; no change for {duration(frozen)} (hung after {duration(b.hang_after_s)})"
            rate = f", throughput {throughput[0]:,.0f}" if throughput else ""
            now = f"step {self.step}" if self.step is not None else "heartbeat changing"
            return "progressing", f"{now}{self.rate}{rate}{tail}{self._never_matched()}", [], []
        waited = at - self.first_at
        new_run = f"a new run: the processes were replaced on {fold(self.new_run)}; " if self.new_run else ""
        return (
            "starting",
            f"{new_run}no progress yet ({duration(waited)} of the {duration(b.startup_grace_s)} "
            f"startup grace); {self._procs_words(running, tick)}",
            [],
            [],
        )

    def _unresponsive(self, node: _NodeState, at: float) -> bool:
        """Silent for the bound, or failing again and again for it (a node that comes back once is not)."""
        bound = self.cfg.bounds.unresponsive_after_s
        if node.fail_since is not None and at - node.fail_since >= bound:
            return True
        # intermittent: at least two separate outages, and at least half of the samples from the
        # first failure to the last failed (two blips on a busy node are not a node that stopped
        # answering); it stays so until the node has answered for the whole bound (_answered)
        return (
            node.flaky_streaks >= 2
            and node.flaky_since is not None
            and at - node.flaky_since >= bound
            and 2 * node.flaky_failed >= node.flaky_upto
        )

    def _lost(self, at: float, step: str):
        """No node answered this tick: the tick holds no evidence about the job, and the cause may be the
        watcher's own network. Never a new "hung" (--on-hang would act on a job that may be fine): a
        verdict already reached stands; otherwise "unresponsive" once the silence lasts the bound."""
        silent = [n for n in self.nodes if self.node[n].fail_since is not None]
        longest = max((at - since for n in silent if (since := self.node[n].fail_since) is not None), default=0.0)
        failures = sorted({self.node[n].failure for n in silent})
        why = failures[0] + (f"; and {len(failures) - 1} other failure(s)" if len(failures) > 1 else "")
        ago = duration(at - self.last_progress_at) if self.last_progress_at is not None else "?"
        lost = (
            f"the watcher reaches none of the {len(silent)} node(s) for {duration(longest)} ({why}): its "
            f"own network or SSH may be down, or every node is; the job's progress is unknown ({step}, "
            f"last change {ago} ago)"
        )
        if self.verdict in ("hung", "crashed", "completed"):
            return self.verdict, f"{lost}; the verdict stands until a node answers", silent, []
        if longest >= self.cfg.bounds.unresponsive_after_s:
            return "unresponsive", lost, silent, []
        return self.verdict, f"no node answered this tick ({why}); {step}", [], []

    def _hung(
        self,
        at: float,
        moved: bool,
        pattern: LowPowerPattern,
        readings: list[ProgressReading],
        unresponsive: list[str],
        step: str,
        running: list[str],
    ):
        b = self.cfg.bounds
        assert self.first_at is not None and self.last_progress_at is not None  # _decide's caller set them
        frozen = at - self.last_progress_at
        suspects = f"; suspect {self._silence(unresponsive, at)}" if unresponsive else ""
        suspects += "".join(
            f"; the log cannot be read on {fold(nodes)}: {why}"
            for why, nodes in group_by_value(self.log_problems).items()
        )
        if self.done_since is not None and running and at - self.done_since > b.hang_after_s:
            done_line = next((p.last_line for p in readings if p.done), "")
            return (
                "hung",
                f"the log said done {duration(at - self.done_since)} ago ({done_line!r}) "
                f"but processes still run on {fold(running)}{suspects}",
                running,
                [],
            )
        if self.done_since is not None:
            return None
        if not self.progressed:
            waited = at - self.first_at
            if waited <= b.startup_grace_s and not (self.verdict == "hung" and not moved):
                return None
            what = f"step stayed at {self.step}" if self.step is not None else self._no_signal()
            return (
                "hung",
                f"no progress within the startup grace ({duration(waited)} > "
                f"{duration(b.startup_grace_s)}): {what}{self._never_matched()}{suspects}",
                unresponsive,
                [],
            )
        explained = self._checkpoint(pattern, readings)
        # unexplained: frozen since the last step, or since a checkpoint last explained the freeze
        quiet = at - max(self.last_progress_at, self.checkpoint_seen_at or self.last_progress_at)
        within = frozen <= b.checkpoint_max_s if explained else quiet <= b.hang_after_s
        if within and not (self.verdict == "hung" and not moved):
            return None
        since_words = self._since_words(at)
        if pattern.signature:
            odd = pattern.idle
            assert self.signature_since is not None  # update() holds it while the signature shows
            held = at - self.signature_since
            return (
                "hung",
                f"power-deadlock signature for {duration(held)}: {pattern.describe(odd=True)}; {since_words}{suspects}",
                sorted({g.node for g in odd} | set(unresponsive), key=self.position.__getitem__),
                [g.rank for g in odd],
            )
        if explained:
            return (
                "hung",
                f"{explained} for {duration(frozen)}, longer than a checkpoint may take "
                f"({duration(b.checkpoint_max_s)}); {since_words}{suspects}",
                unresponsive,
                [],
            )
        saved = (
            ""
            if self.checkpoint_seen_at is None
            else f" (a checkpoint explained it until {duration(at - self.checkpoint_seen_at)} ago)"
        )
        return (
            "hung",
            f"{since_words}{saved}, longer than {duration(b.hang_after_s)}, while {pattern.busy_words()}{suspects}",
            unresponsive,
            [],
        )

    def _checkpoint(self, pattern: LowPowerPattern, readings: list[ProgressReading]) -> str:
        """What explains a pause as a checkpoint save ("" when nothing does)."""
        line = next((p.last_line for p in readings if p.checkpointing), "")
        if line:
            return f"the log says {line!r}"
        if pattern.checkpoint:
            return pattern.describe(odd=False)
        return ""

    def _straggler(self, tick: Tick):
        times: dict[int, tuple[str, float]] = {}
        per_node = self.gpus_per_node
        for obs in tick.nodes:
            if obs.sample is not None and obs.progress is not None and obs.progress.rank_seconds:
                self.last_rank_seconds[obs.node] = (tick.at, obs.progress.rank_seconds)
            # as the GPU readings: a node that missed this sample keeps its last times for a while, or
            # a straggler verdict would flap to progressing and back (an alarm and a "resolved" each)
            at, seconds_of = self.last_rank_seconds.get(obs.node, (None, {}))
            if at is None or tick.at - at > self.cfg.bounds.unresponsive_after_s:
                continue
            for rank, seconds in seconds_of.items():
                node = obs.node
                if per_node and rank // per_node < len(self.nodes):
                    node = self.nodes[rank // per_node]
                times[rank] = (node, seconds)
        by_node: dict[str, list[int]] = {}
        for rank, (node, _) in times.items():
            by_node.setdefault(node, []).append(rank)
        if len(by_node) < 2:
            return None
        # against the other nodes' ranks: with the node itself in the median, a 2-node job's slow
        # half would drag the median halfway to itself and hide
        slow = {}
        every = sorted(s for _, s in times.values())
        for node, ranks in by_node.items():
            mine = sorted(times[r][1] for r in ranks)
            median, others = statistics.median(mine), median_without(every, mine)
            if others > 0 and median > others * (1 + self.cfg.bounds.straggler_pct / 100):
                slow[node] = (median, others, sorted(ranks))
        if not slow:
            return None
        parts = []
        for node in sorted(slow, key=self.position.__getitem__):
            median, others, ranks = slow[node]
            each = ", ".join(f"{r}: {times[r][1]:.3g} s" for r in ranks[:8]) + (", ..." if len(ranks) > 8 else "")
            parts.append(
                f"{node} ranks {fold_ranks(ranks)} median {median:.3g} s per step, "
                f"{(median / others - 1) * 100:.0f}% above the other ranks' median {others:.3g} s "
                f"({each})"
            )
        ranks = sorted(r for *_, rs in slow.values() for r in rs)
        return "straggler", "; ".join(parts), sorted(slow, key=self.position.__getitem__), ranks

    # -- words -----------------------------------------------------------------------------------

    def _step_words(self) -> str:
        return f"last step {self.step}" if self.step is not None else "no step seen"

    def _since_words(self, at: float) -> str:
        assert self.last_progress_at is not None  # only while the run's clocks run
        ago = duration(at - self.last_progress_at)
        if self.step is not None:
            return f"no step since {self.step} ({ago} ago)"
        if any(n.beat_seen for n in self.node.values()):
            return f"no heartbeat since {ago} ago"
        return f"no progress for {ago}"

    def _no_signal(self) -> str:
        if self.cfg.progress.log is not None:
            return "no step line in the log yet"
        return "the heartbeat never changed"

    def _silence(self, nodes: list[str], at: float, most: int = 5) -> str:
        """Nodes that fail the same way for as long, folded: a rack that went away is one phrase."""
        groups: dict[str, list[str]] = {}
        for n in nodes:
            s = self.node[n]
            silent_s = at - s.fail_since if s.fail_since is not None else None
            if (
                s.flaky_streaks >= 2
                and s.flaky_since is not None
                and (silent_s is None or silent_s < self.cfg.bounds.unresponsive_after_s)
            ):
                words = (
                    f"failed {s.flaky_failed} of its {s.flaky_samples} samples in "
                    f"{duration(at - s.flaky_since)}, {'not ' if silent_s is not None else ''}answering "
                    f"now (last failure: {s.failure})"
                )
            else:
                words = f"not answering for {duration(silent_s or 0.0)} ({s.failure})"
            groups.setdefault(words, []).append(n)
        parts = [f"{fold(names)} {words}" for words, names in groups.items()]
        more = f"; and {len(parts) - most} more" if len(parts) > most else ""
        return "; ".join(parts[:most]) + more

    def _procs_words(self, running: list[str], tick: Tick) -> str:
        if not any(self.node[n].procs is not None for n in self.nodes):
            errors = procs_errors(tick)
            if errors:  # pgrep/ps failed: a crash cannot be seen, say why
                first = next(iter(errors.values()))
                return f"processes unknown: the process listing failed on {fold(errors)} ({first})"
            return "processes not sampled"
        if not running:
            return "no job processes yet"
        return f"processes on {fold(running)}"

    # -- evidence and history --------------------------------------------------------------------

    def _never_matched(self) -> str:
        """A --match that no node's processes ever matched, though processes were listed: a job that
        never started and a pattern that does not match it look alike, and neither can show a crash.
        Not a verdict of its own (the log decides: starting, then hung without progress); said."""
        if (
            not self.cfg.match
            or any(s.had_procs for s in self.node.values())
            or not any(s.procs is not None for s in self.node.values())
        ):
            return ""
        return f"; no process has matched --match {self.cfg.match!r} on any node (is it the job's command line?)"

    def _facts(self, tick: Tick, pattern: LowPowerPattern, throughput) -> dict[str, Any]:
        at = tick.at
        facts: dict[str, Any] = {
            "step": self.step,
            "last_progress_at": self.last_progress_at,
            "frozen_s": round(at - self.last_progress_at, 3) if self.last_progress_at is not None else None,
            "throughput": throughput[0] if throughput else None,
            "processes": {n: self.node[n].procs for n in self.nodes},
            "failing": {
                n: {"since": s.fail_since, "failure": s.failure}
                for n, s in self.node.items()
                if s.fail_since is not None
            },
        }
        gpu_errors = {o.node: o.sample.gpu_error for o in tick.nodes if o.sample is not None and o.sample.gpu_error}
        if gpu_errors:
            facts["gpu_errors"] = gpu_errors
        listing_errors = procs_errors(tick)
        if listing_errors:
            facts["procs_errors"] = listing_errors
        if self.restarted:
            facts["step_went_back"] = {n: self.node[n].step for n in self.restarted}
        if pattern.gpus:
            facts["gpus"] = pattern.summary()
        if pattern.checkpoint:
            facts["low_power_idle_ranks"] = [
                {
                    "rank": g.rank,
                    "node": g.node,
                    "gpu": g.gpu.index,
                    "util_pct": g.gpu.util_pct,
                    "power_w": g.gpu.power_w,
                }
                for g in pattern.idle
            ]
        if tick.job_state:
            facts["job_state"] = tick.job_state
        return facts

    def _remember(self, at: float, verdict: str, facts: Mapping[str, Any]) -> None:
        gpus = facts.get("gpus") or {}
        self.history.append(
            {
                "at": at,
                "verdict": verdict,
                "step": self.step,
                "throughput": facts["throughput"],
                "power_max_w": gpus.get("power_max_w"),
                "util_min_pct": gpus.get("util_min_pct"),
                "failing": fold(sorted(facts["failing"], key=self.position.__getitem__)) if facts["failing"] else "",
            }
        )  # folded: 1,000 silent nodes in a few bytes
        del self.history[: -self.cfg.history]

    # -- state on disk ---------------------------------------------------------------------------

    _SCALARS: ClassVar[dict[str, str]] = {
        "first_at": "float | None",
        "progressed": "bool",
        "last_progress_at": "float | None",
        "step": "int | None",
        "step_at_change": "int | None",
        "gpus_per_node": "int | None",
        "signature_since": "float | None",
        "pattern_since": "float | None",
        "slow_since": "float | None",
        "done_since": "float | None",
        "checkpoint_seen_at": "float | None",
        "verdict": "str",
        "since": "float | None",
    }

    def to_json(self) -> dict:
        # a node's fields at their defaults are left out (from_json restores them): 1,000 nodes
        return {
            "version": STATE_VERSION,
            "nodes": list(self.nodes),
            "node": {n: {k: v for k, v in vars(s).items() if v != _NODE_DEFAULTS[k]} for n, s in self.node.items()},
            **{k: getattr(self, k) for k in self._SCALARS},
            "history": [dict(h) for h in self.history],
        }

    @classmethod
    def from_json(cls, cfg: WatchConfig, nodes: Sequence[str], data: Mapping) -> Tracker:
        """A tracker resumed from to_json's dict; ValueError when the data is not one, is for other
        nodes (a requeue onto others: their ranks, baselines and processes are not these), or holds a
        field of the wrong type (it would fail every later tick, and a restart would resume it again)."""
        if not isinstance(data, Mapping) or data.get("version") != STATE_VERSION:
            raise ValueError(f"not watch tracker state version {STATE_VERSION}")
        tracker = cls(cfg, nodes)
        saved_nodes = data.get("nodes")
        if saved_nodes != tracker.nodes:
            raise ValueError(f"watch tracker state is for the nodes {_names(saved_nodes)}, not {_names(tracker.nodes)}")
        try:
            if not isinstance(data["node"], Mapping) or set(data["node"]) != set(tracker.node):
                raise TypeError("the per-node states do not match its node list")
            for name, saved in data["node"].items():
                state = _NodeState(**dict(saved))
                for f in fields(_NodeState):
                    # a string: this module's annotations are postponed (from __future__ import annotations)
                    _check(f"node {name} {f.name}", cast(str, f.type), getattr(state, f.name))
                tracker.node[name] = state
            for key, kind in cls._SCALARS.items():
                _check(key, kind, data[key])
                setattr(tracker, key, data[key])
            if not isinstance(data["history"], list) or not all(isinstance(h, Mapping) for h in data["history"]):
                raise TypeError("history is not a list of ticks")
            tracker.history = [dict(h) for h in data["history"]][-cfg.history :]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"watch tracker state is incomplete or malformed: {e}") from None
        if tracker.verdict not in VERDICTS:
            raise ValueError(f"watch tracker state has an unknown verdict {tracker.verdict!r}")
        if cfg.gpus_per_node is not None:
            tracker.gpus_per_node = cfg.gpus_per_node
        return tracker


def _check(name: str, kind: str, value: object) -> None:
    """TypeError unless `value` is of `kind` ("float | None", "int", "bool", "str", "list": of pids)."""
    optional, base = kind.endswith(" | None"), kind.removesuffix(" | None")
    if value is None:
        ok = optional
    elif base == "bool" or isinstance(value, bool):
        ok = base == "bool" and isinstance(value, bool)
    elif base == "int":
        ok = isinstance(value, int)
    elif base == "float":
        ok = isinstance(value, (int, float)) and math.isfinite(value)
    elif base == "str":
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if not ok:
        raise TypeError(f"{name} is {value!r}, not {kind}")


def _names(nodes: object) -> str:
    if isinstance(nodes, list) and all(isinstance(n, str) for n in nodes):
        return fold(nodes) if nodes else "(none)"
    return repr(nodes)[:80]


_NODE_DEFAULTS = vars(_NodeState())


def _hold(since: float | None, holds: bool, at: float, moved: bool) -> float | None:
    """When a condition began: kept while it holds, restarted by progress, cleared when it ends."""
    if not holds:
        return None
    if since is None or moved:
        return at
    return since

"""The job's invariants: pure judges over the job probe's facts, JOB.yml and the rank counts.

Each is a CheckSpec of scope "fleet" (it sees every node at once) built here and NOT registered in
nodecheck.core.registry's CHECKS: a playbook cannot list them, only `nodecheck job-check` runs them. Every
verdict says what was observed, what was expected and the fix.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from nodecheck.core.errors import ParseError
from nodecheck.core.hostlist import fold
from nodecheck.core.model import Capture, Status, Verdict
from nodecheck.core.registry import CheckSpec
from nodecheck.core.thresholds import fmt
from nodecheck.job.counts import RankCounts
from nodecheck.job.probe import CHECKPOINT, PROBE_NAME, JobNodeFacts, job_probe, parse_job_probe
from nodecheck.job.spec import PYTORCH_DEFAULT_TIMEOUT_S, JobSpec
from nodecheck.judging.drift import group_by_value, strict_majority
from nodecheck.judging.nccl_env_rules import flight_recorder as fr_verdicts
from nodecheck.judging.nccl_env_rules import timeouts as watchdog_verdicts
from nodecheck.judging.nccl_settings import effective_env
from nodecheck.judging.nccl_settings import said as said_setting
from nodecheck.parsers.slurm import JobRecord

Grouped = tuple[tuple[str, ...], Verdict]
# the keys whose value must be the same for every rank (the issue: NCCL_*, TORCH_NCCL_*, CUDA_*;
# TORCH_FR_* are the flight recorder's newer names)
CONSISTENT_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_FR_", "CUDA_")


@dataclass(frozen=True)
class JobContext:
    """What every job judge gets as its params."""

    spec: JobSpec
    order: tuple[str, ...]  # the job's nodes in rank order (rank // gpus_per_node)
    counts: RankCounts | None = None
    slurm: JobRecord | None = None


# --- helpers ----------------------------------------------------------------------------------------


def _facts(by_node: Mapping[str, Mapping[str, Capture]]) -> tuple[dict[str, JobNodeFacts], list[Grouped]]:
    facts: dict[str, JobNodeFacts] = {}
    problems: list[Grouped] = []
    for node, captures in by_node.items():
        try:
            facts[node] = parse_job_probe(captures[PROBE_NAME].stdout)
        except ParseError as e:
            problems.append(
                ((node,), Verdict(Status.ERROR, f"cannot read {e.tool} output: {e.reason}", excerpt=e.excerpt))
            )
    return facts, problems


def _grouped(per_node: Mapping[str, Sequence[Verdict]]) -> Iterator[Grouped]:
    """Nodes with the same verdict share one result (the table folds them)."""
    groups: dict[tuple, tuple[list[str], Verdict]] = {}
    for node, verdicts in per_node.items():
        for v in verdicts:
            groups.setdefault((v.status, v.message, v.subject), ([], v))[0].append(node)
    for nodes, verdict in groups.values():
        yield tuple(nodes), verdict


def _all(nodes, verdict: Verdict) -> Grouped:
    return tuple(nodes), verdict


def _n(value: int) -> str:
    return f"{value:,}"


def _ranks(ranks: Sequence[int]) -> str:
    """[12, 13, 14, 15, 20] -> "12-15, 20"."""
    out, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out.append(f"{start}" if start == r else f"{start}-{r}")
            start = None
    return ", ".join(out)


def _node_of(ctx: JobContext, rank: int) -> str:
    i = rank // ctx.spec.gpus_per_node
    return ctx.order[i] if i < len(ctx.order) else "no node"


# --- job.data_balance -------------------------------------------------------------------------------


def data_balance(by_node: Mapping[str, Mapping[str, Capture]], ctx: JobContext) -> Iterator[Grouped]:
    """Every rank runs the same number of steps: its count // (per_step x grad_accum). A rank that runs
    out first enters the next collective (a checkpoint barrier) while the others are still in the
    training step's: the job hangs with GPUs reading busy (incident: 30,835 vs 30,888 blocks)."""
    nodes = list(by_node)
    want, counts = ctx.spec.data_balance, ctx.counts
    if want is None or counts is None:
        yield _all(
            nodes,
            Verdict(
                Status.WARN,
                "no data_balance: in JOB.yml: nodecheck cannot tell whether every "
                "rank runs the same number of steps; add data_balance: {counts_file: ..., "
                "per_step: N}",
                "data_balance",
            ),
        )
        return
    unit, per = want.unit, want.items_per_step
    expected = set(range(ctx.spec.world_size))
    missing = sorted(expected - set(counts.counts))
    extra = sorted(set(counts.counts) - expected)
    if missing or extra:
        parts = ([f"no count for rank{'s' if len(missing) > 1 else ''} {_ranks(missing)}"] if missing else []) + (
            [f"counts for rank{'s' if len(extra) > 1 else ''} {_ranks(extra)} beyond world_size {ctx.spec.world_size}"]
            if extra
            else []
        )
        yield _all(
            nodes,
            Verdict(
                Status.FAIL,
                f"{counts.source}: {'; '.join(parts)}: the counts are not this "
                f"job's (ranks 0-{ctx.spec.world_size - 1}); write the counts of every rank",
                "data_balance",
                {"missing": missing, "extra": extra},
                {"ranks": f"0-{ctx.spec.world_size - 1}"},
            ),
        )
        return
    steps = {r: c // per for r, c in counts.counts.items()}
    lo_rank = min(counts.counts, key=lambda r: (counts.counts[r], r))
    hi_rank = max(counts.counts, key=lambda r: (counts.counts[r], -r))
    lo, hi = counts.counts[lo_rank], counts.counts[hi_rank]
    s_lo, s_hi = min(steps.values()), max(steps.values())
    per_words = f"{want.per_step} per step" + (f" x {want.grad_accum} accumulation" if want.grad_accum > 1 else "")
    observed = {"min": {"rank": lo_rank, unit: lo, "steps": s_lo}, "max": {"rank": hi_rank, unit: hi, "steps": s_hi}}
    if s_hi == 0:  # equal, but zero: nothing to train on is no pass
        yield _all(
            nodes,
            Verdict(
                Status.FAIL,
                f"no rank has a full step (at most {_n(hi)} {unit}, {per_words}): the "
                f"job would train on nothing; check {counts.source} and data_balance.per_step",
                "data_balance",
                observed,
                {"steps": ">= 1 on every rank"},
            ),
        )
        return
    if s_lo == s_hi:
        micro = {r: c // want.per_step for r, c in counts.counts.items()}
        m_lo, m_hi = min(micro, key=lambda r: (micro[r], r)), max(micro, key=lambda r: (micro[r], -r))
        if micro[m_lo] != micro[m_hi]:
            # a loop that pulls micro-batches until the data ends (torchtitan's, most hand-written
            # ones) starts a partial step on the ranks with more: its forward's collectives (FSDP's
            # all-gather) wait for ranks that already left the loop, the incident's hang again
            yield _all(
                nodes,
                Verdict(
                    Status.WARN,
                    f"all {len(steps)} ranks run {_n(s_lo)} steps ({counts.source}, "
                    f"{per_words}), but micro-steps differ: rank {m_lo}: {_n(micro[m_lo])}, rank "
                    f"{m_hi}: {_n(micro[m_hi])}: a loop that takes micro-batches until the data ends "
                    "starts a partial step on some ranks only and hangs in its collectives; truncate "
                    f"every rank to {_n(s_lo * per)} {unit}",
                    "data_balance",
                    {**observed, "micro_steps": {"min": micro[m_lo], "max": micro[m_hi]}},
                    {"micro_steps": "equal on every rank"},
                ),
            )
            return
        left = (
            f"; the counts differ by {_n(hi - lo)} {unit} ({_n(lo)}-{_n(hi)}), less than one step, which "
            "each rank leaves unused"
            if hi != lo
            else ""
        )
        yield _all(
            nodes,
            Verdict(
                Status.PASS,
                f"all {len(steps)} ranks run {_n(s_lo)} steps ({counts.source}, {per_words}){left}",
                "data_balance",
                observed,
            ),
        )
        return
    spread = hi - lo
    total = sum(counts.counts.values())
    drops = sum(c - lo for c in counts.counts.values())
    apart = (
        f"ranks would stop ~{_steps(s_hi - s_lo)} apart (rank {lo_rank} on {_node_of(ctx, lo_rank)}, rank "
        f"{hi_rank} on {_node_of(ctx, hi_rank)}"
    )
    hang = "the first rank out of data enters the next collective alone and the job hangs"
    if s_lo == 0:  # truncating to the minimum would leave no step at all
        message = (
            f"rank {lo_rank}: {_n(lo)} {unit}, rank {hi_rank}: {_n(hi)}; rank {lo_rank} has no full step "
            f"({per_words}) while rank {hi_rank} runs {_n(s_hi)}: {apart}): {hang}; re-split the data so "
            "every rank gets the same number of steps"
        )
    else:
        of = "tokens" if unit in ("blocks", "tokens") else f"the {unit}"  # packed blocks: equal tokens each
        message = (
            f"rank {lo_rank}: {_n(lo)} {unit}, rank {hi_rank}: {_n(hi)}; {_n(spread)} {unit} = "
            f"{_pct(spread, lo, 2)}; {apart}; {per_words}): {hang}; truncate all ranks to the global minimum "
            f"({_n(lo)}): drop {_n(spread)} {unit} max, {_pct(drops, total, 3)} of {of}"
        )
    yield _all(nodes, Verdict(Status.FAIL, message, "data_balance", observed, {"steps": "equal on every rank"}))


def _steps(n: int) -> str:
    return f"{n:,} step" + ("s" if n != 1 else "")


def _pct(part: int, whole: int, digits: int) -> str:
    """A share rounded to `digits` places, never to a misleading 0: 8 of 10,000,000 is "<0.01%"."""
    value, floor = 100 * part / whole, 10**-digits
    return f"<{floor:.{digits}f}%" if 0 < value < floor else f"{value:.{digits}f}%"


# --- job.world_size ---------------------------------------------------------------------------------


def world_size(by_node: Mapping[str, Mapping[str, Capture]], ctx: JobContext) -> Iterator[Grouped]:
    """world_size == nodes x gpus_per_node; every node shows at least gpus_per_node GPUs; with a Slurm
    job, its allocation (node count, gres/gpu) agrees."""
    spec, nodes = ctx.spec, list(by_node)
    n = len(ctx.order)
    have = n * spec.gpus_per_node
    job = f"Slurm job {ctx.slurm.job_id}'s " if ctx.slurm else ""
    if have != spec.world_size:
        yield _all(
            nodes,
            Verdict(
                Status.FAIL,
                f"world_size {spec.world_size} but {job}{n} node{'s' * (n != 1)} x "
                f"{spec.gpus_per_node} GPUs per node = {have} ranks: the launcher starts {have} "
                f"ranks, or the job waits forever for the missing ones; allocate "
                f"{spec.nodes_needed} nodes or fix world_size",
                "world_size",
                {"nodes": n, "ranks": have},
                {"world_size": spec.world_size},
            ),
        )
    if ctx.slurm is not None and ctx.slurm.gpus is not None and ctx.slurm.gpus != spec.world_size:
        yield _all(
            nodes,
            Verdict(
                Status.FAIL,
                f"Slurm job {ctx.slurm.job_id} holds {ctx.slurm.gpus} GPUs "
                f"(gres/gpu) but world_size is {spec.world_size}: ask for "
                f"--gpus-per-node={spec.gpus_per_node} on {spec.nodes_needed} nodes",
                "slurm_gpus",
                {"gres/gpu": ctx.slurm.gpus},
                {"gres/gpu": spec.world_size},
            ),
        )
    facts, problems = _facts(by_node)
    yield from problems
    per_node: dict[str, list[Verdict]] = {}
    for node, f in facts.items():
        if f.gpu_count is None:
            per_node[node] = [Verdict(Status.ERROR, f"cannot count the GPUs: {f.gpu_error}", "gpus")]
            continue
        # nvidia-smi lists the node's GPUs whatever CUDA_VISIBLE_DEVICES says; the ranks see only those
        # it names (the job's value over the node's)
        env = effective_env(spec.env, f.node_env, True, f.conf)
        visible, seen = f.gpu_count, ""
        if "CUDA_VISIBLE_DEVICES" in env:
            visible = cuda_visible(env["CUDA_VISIBLE_DEVICES"].value, f.gpu_count)
            seen = f" ({said_setting(env, 'CUDA_VISIBLE_DEVICES')} of {f.gpu_count} on the node)"
        if visible < spec.gpus_per_node:
            per_node[node] = [
                Verdict(
                    Status.FAIL,
                    f"{visible} GPUs visible{seen}, the job puts {spec.gpus_per_node} "
                    "ranks on each node: ranks without a GPU fail at start or share one",
                    "gpus",
                    {"gpus": visible},
                    {"gpus": f">= {spec.gpus_per_node}"},
                )
            ]
        elif have == spec.world_size:
            per_node[node] = [
                Verdict(
                    Status.PASS,
                    f"world_size {spec.world_size} = {n} nodes x "
                    f"{spec.gpus_per_node} GPUs; {visible} GPUs visible{seen}",
                    "gpus",
                    {"gpus": visible},
                )
            ]
        else:
            per_node[node] = [Verdict(Status.PASS, f"{visible} GPUs visible{seen}", "gpus", {"gpus": visible})]
    yield from _grouped(per_node)


def cuda_visible(value: str, gpus: int) -> int:
    """How many GPUs CUDA_VISIBLE_DEVICES lets a process see on a node with `gpus`: indices below
    `gpus` or GPU-/MIG- UUIDs, up to the first entry CUDA cannot use (it ignores the rest: "0,1,9,2"
    is 2 GPUs on 8), a repeated entry included; "" is none."""
    count, seen = 0, set()
    for entry in value.split(","):
        entry = entry.strip()
        usable = (entry.isascii() and entry.isdigit() and int(entry) < gpus) or entry.startswith(("GPU-", "MIG-"))
        if not usable or entry in seen:
            break
        seen.add(entry)
        count += 1
    return count


# --- job.env_consistency ----------------------------------------------------------------------------


def env_consistency(by_node: Mapping[str, Mapping[str, Capture]], ctx: JobContext) -> Iterator[Grouped]:
    """Every rank's NCCL_*, TORCH_NCCL_*, TORCH_FR_* and CUDA_* variables are the same: JOB.yml's env over
    the node's session over NCCL's conf files. A value that differs on some node is drift, named with
    the node, both values and where each came from."""
    facts, problems = _facts(by_node)
    yield from problems
    envs = {node: effective_env(ctx.spec.env, f.node_env, True, f.conf) for node, f in facts.items()}
    keys = sorted({k for env in envs.values() for k in env if k.startswith(CONSISTENT_PREFIXES)})
    odd: dict[str, list[str]] = {}
    for key in keys:
        values = {node: env[key].value if key in env else None for node, env in envs.items()}
        groups = group_by_value({node: "\0unset" if v is None else v for node, v in values.items()})
        if len(groups) == 1:
            continue
        reference = strict_majority(groups)

        def said(value: str, nodes: Sequence[str]) -> str:
            if value == "\0unset":
                return f"unset on {fold(nodes)}"
            sources = sorted({envs[n][key].source for n in nodes})  # noqa: B023 - called in this iteration only
            return f"{key}={value} on {fold(nodes)} ({', '.join(sources)})"  # noqa: B023 - called in this iteration only

        if reference is None:
            text = "; ".join(said(v, n) for v, n in groups.items())
            for node in values:
                odd.setdefault(node, []).append(f"{key} differs with no majority: {text}")
            continue
        for value, nodes in groups.items():
            if value != reference:
                for node in nodes:
                    odd.setdefault(node, []).append(
                        f"{said(value, nodes)}, expected {said(reference, groups[reference])}"
                    )
    per_node: dict[str, list[Verdict]] = {}
    for node in facts:
        if node in odd:
            per_node[node] = [
                Verdict(
                    Status.FAIL,
                    f"drift: {'; '.join(odd[node])}: ranks that disagree on these "
                    "choose different transports or algorithms and hang or slow the job; set them "
                    "in JOB.yml's env or make the nodes agree",
                    "env",
                    {"drift": odd[node]},
                )
            ]
        else:
            per_node[node] = [
                Verdict(
                    Status.PASS,
                    f"{len(keys)} NCCL_/TORCH_NCCL_/TORCH_FR_/CUDA_ variables, the same on every node judged"
                    if len(facts) > 1
                    else f"{len(keys)} NCCL_/TORCH_NCCL_/TORCH_FR_/CUDA_ variables (one node: nothing to compare with)",
                    "env",
                    {"keys": len(keys)},
                )
            ]
    yield from _grouped(per_node)


# --- job.timeouts -----------------------------------------------------------------------------------


def timeouts(by_node: Mapping[str, Mapping[str, Capture]], ctx: JobContext) -> Iterator[Grouped]:
    """The collective (watchdog) timeout is not shorter than the longest blocking phase (a checkpoint
    save) and not longer than limits.timeout_max_s; async error handling is on, so the watchdog ends a
    hung collective (the incident moved 10 -> 30 min)."""
    spec = ctx.spec
    t = spec.timeouts.collective_s
    said = (
        f"collective timeout {fmt(t)} s (init_process_group(timeout=))"
        if t is not None
        else f"collective timeout unset: PyTorch's default {fmt(PYTORCH_DEFAULT_TIMEOUT_S)} s (10 min)"
    )
    t = t if t is not None else PYTORCH_DEFAULT_TIMEOUT_S
    phases = {
        name: v
        for name, v in (
            ("checkpoint.save_s", spec.checkpoint.save_s if spec.checkpoint else None),
            ("timeouts.longest_blocking_s", spec.timeouts.longest_blocking_s),
        )
        if v is not None
    }
    common: list[Verdict] = []
    if phases:
        name, longest = max(phases.items(), key=lambda kv: kv[1])
        if t < longest:
            common.append(
                Verdict(
                    Status.FAIL,
                    f"{said} is shorter than the longest blocking phase, {fmt(longest)} s "
                    f"({name}): the waiting ranks time out while one rank saves; pass "
                    f"timeout=timedelta(seconds={fmt(max(longest * 1.5, longest + 60))}) or more and set "
                    "timeouts.collective_s",
                    "collective_timeout",
                    {"timeout_s": t},
                    {"timeout_s": f">= {fmt(longest)}"},
                )
            )
        elif spec.timeouts.collective_s is None:  # the issue: a timeout is *set*, not left to a default
            common.append(
                Verdict(
                    Status.WARN,
                    f"{said} covers the longest blocking phase, {fmt(longest)} s ({name}), "
                    "by luck of the default: pass timeout= to init_process_group and say it in "
                    "timeouts.collective_s, so a change of default or of save time is caught",
                    "collective_timeout",
                    {"timeout_s": t},
                    {"timeout_s": "set"},
                )
            )
        else:
            common.append(
                Verdict(
                    Status.PASS,
                    f"{said} covers the longest blocking phase, {fmt(longest)} s ({name})",
                    "collective_timeout",
                    {"timeout_s": t},
                )
            )
    else:
        common.append(
            Verdict(
                Status.WARN,
                f"{said}; the longest blocking phase is not known: set checkpoint.save_s "
                "(or timeouts.longest_blocking_s) so nodecheck can tell whether a save outlasts it",
                "collective_timeout",
                {"timeout_s": t},
            )
        )
    if t < spec.limits.timeout_min_s:
        common.append(
            Verdict(
                Status.FAIL,
                f"{said} is shorter than limits.timeout_min_s "
                f"{fmt(spec.limits.timeout_min_s)} s: the first slow collective (NCCL's setup, a compilation, "
                "a data stall) ends the job; "
                "is it in minutes? give seconds",
                "collective_timeout_min",
                {"timeout_s": t},
                {"timeout_s": f">= {fmt(spec.limits.timeout_min_s)}"},
            )
        )
    if t > spec.limits.timeout_max_s:
        common.append(
            Verdict(
                Status.FAIL,
                f"{said} is longer than limits.timeout_max_s {fmt(spec.limits.timeout_max_s)} "
                "s: a hang holds every GPU that long before the watchdog ends it; lower it",
                "collective_timeout_max",
                {"timeout_s": t},
                {"timeout_s": f"<= {fmt(spec.limits.timeout_max_s)}"},
            )
        )
    facts, problems = _facts(by_node)
    yield from problems
    per_node = {
        node: [*common, *watchdog_verdicts(effective_env(spec.env, f.node_env, True, f.conf), "fail")]
        for node, f in facts.items()
    }
    yield from _grouped(per_node)


# --- job.flight_recorder ----------------------------------------------------------------------------


def flight_recorder(by_node: Mapping[str, Mapping[str, Capture]], ctx: JobContext) -> Iterator[Grouped]:
    """The flight recorder is on (trace buffer > 0, dump on timeout) and its dump directory is writable
    on every node, so a hang leaves the record of which rank stopped where."""
    facts, problems = _facts(by_node)
    yield from problems
    yield from _grouped(
        {
            node: fr_verdicts(effective_env(ctx.spec.env, f.node_env, True, f.conf), f.writable, "fail")
            for node, f in facts.items()
        }
    )


# --- job.checkpoints --------------------------------------------------------------------------------


def checkpoints(by_node: Mapping[str, Mapping[str, Capture]], ctx: JobContext) -> Iterator[Grouped]:
    """Checkpoints are periodic (interval within limits, in minutes or steps), the directory exists and
    is writable with min_free_gb free on every node, and the resume point exists when the job resumes."""
    spec, nodes = ctx.spec, list(by_node)
    ck = spec.checkpoint
    if ck is None:
        yield _all(
            nodes,
            Verdict(
                Status.FAIL,
                "no checkpoint: block in JOB.yml: a hang or a crash loses all the "
                "work since the start (the incident saved only at epoch end and lost ~130 GPU-h); "
                "add checkpoint: {dir: ..., every_minutes: 30}",
                "interval",
            ),
        )
        return
    yield _all(nodes, _interval(spec))
    facts, problems = _facts(by_node)
    yield from problems
    shared = _sharing(facts)
    per_node: dict[str, list[Verdict]] = {}
    for node, f in facts.items():
        out: list[Verdict] = []
        # made as the job's user (job/probe.py); root's view is said, and none is given in the user's place
        as_root = " (checked as root: the job's user is not known)" if f.checked_as == "root" else ""
        if f.checked_as.startswith("!"):
            out.append(
                Verdict(
                    Status.ERROR,
                    f"checkpoint directory {ck.dir}: {f.checked_as[1:]}",
                    "dir",
                    {"checked_as": f.checked_as},
                )
            )
            if ck.resume:
                out.append(
                    Verdict(Status.ERROR, f"resume point: {f.checked_as[1:]}", "resume", {"checked_as": f.checked_as})
                )
            per_node[node] = out
            continue
        if f.ckpt_exists is None:
            out.append(Verdict(Status.ERROR, f"the probe did not report on {ck.dir} (output cut off?)", "dir"))
        elif f.ckpt_not_dir:
            out.append(
                Verdict(
                    Status.FAIL,
                    f"checkpoint directory {ck.dir} is a file on this node, not a directory: "
                    "the first save fails; remove it or point checkpoint.dir elsewhere",
                    "dir",
                    {"directory": False},
                    {"directory": True},
                )
            )
        elif not f.ckpt_exists:
            out.append(
                Verdict(
                    Status.FAIL,
                    f"checkpoint directory {ck.dir} does not exist on this node: the first "
                    "save fails (or lands on local disk); create it or mount the shared filesystem",
                    "dir",
                    {"exists": False},
                    {"exists": True},
                )
            )
        else:
            w = f.writable.get(CHECKPOINT)
            if w != "ok":
                out.append(
                    Verdict(
                        Status.FAIL,
                        f"checkpoint directory {ck.dir} is not writable on this node "
                        f"({(w or '!not tested')[1:]}){as_root}: the first save fails",
                        "dir",
                        {"writable": w},
                        {"writable": "ok"},
                    )
                )
            if f.ckpt_free_bytes is None:
                out.append(Verdict(Status.ERROR, f"cannot read the free space of {ck.dir}: {f.ckpt_df_error}", "free"))
            elif f.ckpt_free_bytes < ck.min_free_gb * 1e9:
                out.append(
                    Verdict(
                        Status.FAIL,
                        f"{ck.dir}: {f.ckpt_free_bytes / 1e9:.1f} {GB} free, checkpoint."
                        f"min_free_gb is {fmt(ck.min_free_gb)}: a save fails half-written; free space or "
                        "move the directory",
                        "free",
                        {"free_gb": round(f.ckpt_free_bytes / 1e9, 1)},
                        {"free_gb": f">= {fmt(ck.min_free_gb)}"},
                    )
                )
            elif w == "ok":
                out.append(
                    Verdict(
                        Status.PASS,
                        f"{ck.dir} writable, {f.ckpt_free_bytes / 1e9:.1f} {GB} free"
                        + (f" (>= {fmt(ck.min_free_gb)} GB)" if ck.min_free_gb else "")
                        + shared
                        + as_root,
                        "dir",
                        {"free_gb": round(f.ckpt_free_bytes / 1e9, 1)},
                    )
                )
        if ck.resume:
            what = ck.resume_from or f"a checkpoint in {ck.dir}"
            # an entry of the directory counts only where it is one (a file's own name is no resume point)
            if f.resume == "exists" or (f.resume.startswith("entry ") and f.ckpt_exists):
                out.append(Verdict(Status.PASS, f"resumes from {what}: present on this node{as_root}", "resume"))
            else:
                out.append(
                    Verdict(
                        Status.FAIL,
                        f"checkpoint.resume is true but {what} is not there on this node: "
                        "the job starts from scratch (or fails to load); fix resume_from or copy the "
                        "checkpoint",
                        "resume",
                        {"resume": f.resume or "not checked"},
                        {"resume": "exists"},
                    )
                )
        per_node[node] = out
    yield from _grouped(per_node)


GB = "GB (10^9 bytes)"  # min_free_gb's unit, said where a reader could take GiB
# stat -f's names of filesystems that live on one node's own disks or memory
LOCAL_FILESYSTEMS = frozenset(
    {"ext2/ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "tmpfs", "ramfs", "overlayfs", "squashfs", "vfat", "devtmpfs"}
)


def _sharing(facts: Mapping[str, JobNodeFacts]) -> str:
    """Words for the PASS: a shared filesystem only when it is one (the same device name on every node,
    /dev/nvme0n1p1, is as many different disks), node-local when stat -f says so."""
    seen = [f for f in facts.values() if f.ckpt_exists]
    if len(seen) < 2:
        return ""
    types = {f.ckpt_fstype for f in seen}
    if "" not in types and types <= LOCAL_FILESYSTEMS:
        return (
            f" (node-local {', '.join(sorted(types))} filesystem on each node: a checkpoint stays on the node "
            "that wrote it)"
        )
    places = {(f.ckpt_fstype, f.ckpt_filesystem) for f in seen}
    if len(places) != 1:
        return ""
    fstype, place = next(iter(places))
    source = place.split(" on ")[0]
    remote = ":" in source or source.startswith("//")  # nfs host:/path, lustre ip@tcp:/fs, cifs //host
    if fstype in LOCAL_FILESYSTEMS or not (fstype or remote) or not place:
        return ""
    return f" (shared {fstype + ' ' if fstype else ''}filesystem on every node: {place})"


def _interval(spec: JobSpec) -> Verdict:
    ck, lim = spec.checkpoint, spec.limits
    assert ck is not None  # the caller judged a JOB.yml without a checkpoint: block
    minutes = ck.every_minutes
    how = f"every {fmt(ck.every_minutes)} min" if ck.every_minutes else ""
    if minutes is None and ck.every_steps and ck.step_seconds:
        minutes = ck.every_steps * ck.step_seconds / 60
        how = f"every {ck.every_steps} steps x {fmt(ck.step_seconds)} s = {minutes:.1f} min"
    if ck.every_steps is None and ck.every_minutes is None:
        return Verdict(
            Status.FAIL,
            "checkpoint has neither every_steps nor every_minutes: saves only at the end (or "
            "epoch end, as in the incident); save every <= "
            f"{fmt(lim.checkpoint_max_minutes)} min",
            "interval",
        )
    if (
        lim.checkpoint_max_steps is not None
        and ck.every_steps is not None
        and ck.every_steps > lim.checkpoint_max_steps
    ):
        return Verdict(
            Status.FAIL,
            f"checkpoint every {ck.every_steps} steps, more than limits.checkpoint_max_steps "
            f"{lim.checkpoint_max_steps}: a failure loses up to {ck.every_steps} steps; save more often",
            "interval",
            {"every_steps": ck.every_steps},
            {"every_steps": f"<= {lim.checkpoint_max_steps}"},
        )
    if minutes is None:
        if lim.checkpoint_max_steps is not None:
            return Verdict(
                Status.PASS,
                f"checkpoint every {ck.every_steps} steps (<= {lim.checkpoint_max_steps})",
                "interval",
                {"every_steps": ck.every_steps},
            )
        return Verdict(
            Status.WARN,
            f"checkpoint every {ck.every_steps} steps, but how long a step takes is not "
            f"known: set checkpoint.step_seconds so nodecheck can bound the loss to "
            f"{fmt(lim.checkpoint_max_minutes)} min",
            "interval",
            {"every_steps": ck.every_steps},
        )
    if minutes > lim.checkpoint_max_minutes:
        return Verdict(
            Status.FAIL,
            f"checkpoint {how}, more than limits.checkpoint_max_minutes "
            f"{fmt(lim.checkpoint_max_minutes)}: a hang or crash loses up to {minutes:.0f} min of every GPU; "
            "save more often",
            "interval",
            {"minutes": round(minutes, 1)},
            {"minutes": f"<= {fmt(lim.checkpoint_max_minutes)}"},
        )
    return Verdict(
        Status.PASS,
        f"checkpoint {how} (<= {fmt(lim.checkpoint_max_minutes)} min)",
        "interval",
        {"minutes": round(minutes, 1)},
    )


# --- job.retries ------------------------------------------------------------------------------------


def retries(by_node: Mapping[str, Mapping[str, Capture]], ctx: JobContext) -> Iterator[Grouped]:
    """A failed start is retried: torchrun --max-restarts > 0, Slurm Requeue=1, or the launcher requeues
    (launcher.requeue); else WARN."""
    nodes, launcher = list(by_node), ctx.spec.launcher
    if launcher.kind == "torchrun" and (launcher.max_restarts or 0) > 0:
        yield _all(
            nodes,
            Verdict(
                Status.PASS,
                f"torchrun --max-restarts={launcher.max_restarts}: a failed start is retried",
                "retries",
                {"max_restarts": launcher.max_restarts},
            ),
        )
    elif ctx.slurm is not None and ctx.slurm.requeue:
        yield _all(
            nodes,
            Verdict(
                Status.PASS,
                f"Slurm job {ctx.slurm.job_id} has Requeue=1: Slurm requeues it after a node failure",
                "retries",
                {"requeue": True},
            ),
        )
    elif launcher.requeue:
        yield _all(
            nodes,
            Verdict(
                Status.PASS, "launcher.requeue: the batch script requeues a failed start", "retries", {"requeue": True}
            ),
        )
    else:
        how = (
            f"launcher {launcher.kind}"
            + (f", max_restarts {launcher.max_restarts}" if launcher.max_restarts is not None else "")
            + (f", Slurm job {ctx.slurm.job_id} Requeue=0" if ctx.slurm is not None else "")
        )
        yield _all(
            nodes,
            Verdict(
                Status.WARN,
                f"a failed start is not retried ({how}): one flaky node at start "
                "costs a person's attention; use torchrun --max-restarts=3, or sbatch --requeue "
                "and say launcher.requeue: true",
                "retries",
                {"kind": launcher.kind, "max_restarts": launcher.max_restarts},
                {"retries": "> 0"},
            ),
        )


# --- the specs --------------------------------------------------------------------------------------


def specs(spec: JobSpec, job_user: str = "") -> tuple[CheckSpec, ...]:
    """The job's checks in report order; the probe depends on JOB.yml (its paths are arguments) and
    on the job's user (whose files it names are read as theirs: job_probe)."""
    probe = (job_probe(spec, job_user),)
    return tuple(
        CheckSpec(name, judge, probes, JobContext, scope="fleet")
        for name, judge, probes in (
            ("job.data_balance", data_balance, ()),
            ("job.world_size", world_size, probe),
            ("job.env_consistency", env_consistency, probe),
            ("job.timeouts", timeouts, probe),
            ("job.flight_recorder", flight_recorder, probe),
            ("job.checkpoints", checkpoints, probe),
            ("job.retries", retries, ()),
        )
    )

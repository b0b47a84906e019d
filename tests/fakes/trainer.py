"""A fake training process for the simulated cluster: it follows a scenario's clock and writes
torchtitan-like step lines to a log, so `nodecheck watch` has a real process and a real log to watch.

Started by SimCluster.start_training() (tests/harness/sim/training.py) inside a node's namespaces as

    /usr/bin/python3 -I <node dir>/training/trainer.py train.py --scenario <file> --proc K

("train.py" is in argv so that `pgrep -f 'train\\.py'` finds it). The scenario (JSON, one per node;
schema in tests/fakes/README.md, "trainer.py") is read once at start; the log at any moment is a
function of the clock only, so a trainer started late first writes the lines it "missed".
tests/fakes/gpu_telemetry.py (the node's fake nvidia-smi) imports this file for gpu_readings(), so
the log and the GPU telemetry follow one clock and one phase table.

Python >= 3.9 standard library only: it runs under the nodes' /usr/bin/python3 with -I.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

MODES = ("train", "checkpoint", "deadlock", "exit", "complete")
TERMINAL = ("exit", "complete")  # the process ends when one of these starts
DEFAULTS = {
    "gpus": 8,
    "power_limit_w": 700.0,
    "idle_power_w": 70.0,
    "log": "/root/train.log",
    "first_rank": 0,
    "procs": 1,
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "memory_total_mib": 81559,
    "memory_used_mib": 62000,
}
PHASE_KEYS = {
    "train": {"until", "mode", "step_s", "throughput", "util", "power", "rank_seconds", "mfu"},
    "checkpoint": {"until", "mode", "writer_gpu", "util", "power"},
    "deadlock": {"until", "mode", "odd_gpu", "power"},
    "exit": {"until", "mode", "code", "message"},
    "complete": {"until", "mode"},
}
STEP_EPS = 1e-9  # a step due exactly at a phase's end still belongs to it


class ScenarioError(ValueError):
    """The scenario does not follow the schema (the message names the phase and key)."""


def check_scenario(scn: dict) -> dict:
    """The scenario with defaults filled in; ScenarioError when it does not follow the schema."""
    if not isinstance(scn, dict):
        raise ScenarioError("a scenario is a JSON object")
    unknown = set(scn) - set(DEFAULTS) - {"start", "phases", "_comment"}
    if unknown:
        raise ScenarioError(f"unknown scenario keys {sorted(unknown)}")
    if not isinstance(scn.get("start"), (int, float)):
        raise ScenarioError("'start' (epoch seconds) is required")
    out = dict(DEFAULTS, **scn)
    if int(out["gpus"]) < 1 or not 1 <= int(out["procs"]) <= int(out["gpus"]):
        raise ScenarioError("need gpus >= 1 and 1 <= procs <= gpus")
    phases = out.get("phases")
    if not isinstance(phases, list) or not phases:
        raise ScenarioError("'phases' must be a non-empty list")
    last_until = 0.0
    for i, ph in enumerate(phases):
        mode = ph.get("mode")
        if mode not in MODES:
            raise ScenarioError(f"phase {i}: mode must be one of {MODES}, not {mode!r}")
        extra = set(ph) - PHASE_KEYS[mode]
        if extra:
            raise ScenarioError(f"phase {i} ({mode}): unknown keys {sorted(extra)}")
        until = ph.get("until")
        if mode in TERMINAL and i != len(phases) - 1:
            raise ScenarioError(f"phase {i} ({mode}) ends the process: it must be the last phase")
        if until is None and mode not in TERMINAL and i != len(phases) - 1:
            raise ScenarioError(f"phase {i}: only the last phase may last for ever (until null)")
        if until is not None and mode not in TERMINAL:
            if i == len(phases) - 1:
                raise ScenarioError(
                    f"phase {i} ({mode}): the last phase lasts for ever (until null) "
                    "or ends the process (exit, complete)"
                )
            if until < last_until:
                raise ScenarioError(f"phase {i}: until {until} is before the previous phase's end {last_until}")
            last_until = float(until)
        if mode == "train" and not float(ph.get("step_s", 0)) > 0:
            raise ScenarioError(f"phase {i}: a train phase needs step_s > 0")
        for key in ("writer_gpu", "odd_gpu"):
            g = ph.get(key)
            if g is not None and not 0 <= int(g) < int(out["gpus"]):
                raise ScenarioError(f"phase {i}: {key} {g} is not a GPU of this node (0..{int(out['gpus']) - 1})")
    return out


def phase_spans(scn: dict) -> list[tuple[float, float | None, dict]]:
    """(begin, end, phase) in seconds after start; a terminal phase is the instant it begins."""
    spans, begin = [], 0.0
    for ph in scn["phases"]:
        if ph["mode"] in TERMINAL:
            spans.append((begin, begin, ph))
            break
        end = None if ph.get("until") is None else float(ph["until"])
        spans.append((begin, end, ph))
        if end is None:
            break
        begin = end
    return spans


def steps_in(begin: float, end: float | None, ph: dict, t: float) -> int:
    """Steps a train phase [begin, end) has completed by time t (seconds after start)."""
    if ph["mode"] != "train" or t < begin:
        return 0
    upto = t if end is None else min(t, end)
    return math.floor((upto - begin) / float(ph["step_s"]) + STEP_EPS)


def state_at(scn: dict, t: float) -> tuple[str, dict | None, int]:
    """(what, phase, steps done) at t seconds after start. what: "before" (not started), "running"
    (phase is current), "ended" (an exit/complete phase has begun, or the phases ran out)."""
    if t < 0:
        return "before", None, 0
    steps = 0
    for begin, end, ph in phase_spans(scn):
        if ph["mode"] in TERMINAL:
            return "ended", ph, steps  # t >= begin: an earlier phase would have returned
        steps += steps_in(begin, end, ph, t)
        if end is None or t < end:
            return "running", ph, steps
    raise AssertionError("check_scenario: the last phase lasts for ever or ends the process")


def gpu_readings(scn: dict, t: float) -> list[dict]:
    """Per GPU {index, util, power, memory_used}: what nvidia-smi shows t seconds after start.
    train: every GPU at the phase's util (100) and power; checkpoint: the writer GPU at 0 %, the others
    at util 100, all at the phase's (low) power; deadlock: all at the phase's power, odd_gpu at 0 %,
    the others 100 %; before start and after exit/complete: 0 % at idle power, no memory used."""
    what, ph, _ = state_at(scn, t)
    gpus, idle = int(scn["gpus"]), float(scn["idle_power_w"])
    if what != "running" or ph is None:
        return [{"index": g, "util": 0, "power": idle, "memory_used": 0} for g in range(gpus)]
    odd = ph.get("writer_gpu") if ph["mode"] == "checkpoint" else ph.get("odd_gpu")
    busy = int(ph.get("util", 100))
    power = float(ph.get("power", scn["power_limit_w"] * 0.85))
    return [
        {
            "index": g,
            "util": 0 if odd is not None and g == int(odd) else busy,
            "power": power,
            "memory_used": int(scn["memory_used_mib"]),
        }
        for g in range(gpus)
    ]


# ---- the log -------------------------------------------------------------------------------------


def step_line(scn: dict, ph: dict, step: int) -> str:
    """torchtitan's metrics line (without colours), e.g.
    "[rank0]: step: 42  loss: 7.1234  memory: 60.55GiB(76.02%)  tps: 5,400  mfu: 41.20%"."""
    loss = 2.0 + 9.0 * math.exp(-step / 400.0)
    used, total = float(scn["memory_used_mib"]), float(scn["memory_total_mib"])
    tps = float(ph.get("throughput", 5400.0))
    mfu = float(ph.get("mfu", 41.2 * tps / 5400.0))
    return (
        f"[rank{scn['first_rank']}]: step: {step}  loss: {loss:.4f}  memory: {used / 1024:.2f}GiB"
        f"({100 * used / total:.2f}%)  tps: {round(tps):,}  mfu: {mfu:.2f}%"
    )


def rank_line(scn: dict, ph: dict, gpu: int, step: int) -> str:
    """Per-rank step time, e.g. "rank 11 step 42 time 0.130s" (rank_seconds: slow_gpus take factor x step_s)."""
    rs = ph.get("rank_seconds") or {}
    slow = gpu in set(rs.get("slow_gpus") or [])
    seconds = float(ph["step_s"]) * (float(rs.get("factor", 1.0)) if slow else 1.0)
    return f"rank {int(scn['first_rank']) + gpu} step {step} time {seconds:.3f}s"


def events(scn: dict, proc: int):
    """(t, lines, exit code or None) in time order for process `proc` of the node; infinite for a
    last phase that lasts for ever. Process 0 writes the node's step/checkpoint/end lines, every
    process its own GPUs' rank lines."""
    gpus, procs = int(scn["gpus"]), int(scn["procs"])
    mine = range(proc * gpus // procs, (proc + 1) * gpus // procs)
    lead = proc == 0
    rank0 = f"[rank{scn['first_rank']}]:"
    step = 0
    for begin, end, ph in phase_spans(scn):
        mode = ph["mode"]
        if mode == "train":
            k = 1
            while end is None or k * float(ph["step_s"]) <= end - begin + STEP_EPS:
                step += 1
                lines = [step_line(scn, ph, step)] if lead else []
                if ph.get("rank_seconds"):
                    lines += [rank_line(scn, ph, g, step) for g in mine]
                yield begin + k * float(ph["step_s"]), lines, None
                k += 1
        elif mode == "checkpoint":
            yield begin, [f"{rank0} saving checkpoint at step {step}"] if lead else [], None
            if end is not None:
                yield end, [f"{rank0} checkpoint saved at step {step} in {end - begin:.2f} s"] if lead else [], None
        elif mode == "deadlock":
            if end is None:
                return  # alive, silent, for ever
        elif mode == "exit":
            code = int(ph.get("code", 1))
            msg = ph.get("message") or f"RuntimeError: simulated rank failure (exit code {code})"
            yield begin, [f"[rank{int(scn['first_rank']) + mine[0]}]: {msg}"], code
            return
        elif mode == "complete":
            yield begin, [f"{rank0} training complete"] if lead else [], 0
            return


def run(scenario_path: Path, proc: int) -> int:
    scn = check_scenario(json.loads(scenario_path.read_text()))
    log = Path(scn["log"])
    log.parent.mkdir(parents=True, exist_ok=True)
    pid_file = scenario_path.parent / f"trainer-{proc}.pid"
    pid_file.write_text(f"{os.getpid()}\n")
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    start = float(scn["start"])
    for at, lines, code in events(scn, proc):
        while True:  # wait for the event's time; give up when the scenario goes (state dir removed)
            left = start + at - time.time()
            if left <= 0:
                break
            time.sleep(min(left, 0.5))
            if not scenario_path.exists():
                return 0
        if lines:  # one write per line: O_APPEND keeps the node's processes' lines whole
            for line in lines:
                os.write(fd, (line + "\n").encode())
        if code is not None:
            os.close(fd)
            return code
    while scenario_path.exists():  # deadlock for ever: alive and silent
        time.sleep(0.5)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="train.py", description="nodecheck's fake training process")
    ap.add_argument("name", nargs="?", help='"train.py", so that pgrep -f train\\.py finds the process')
    ap.add_argument("--scenario", required=True, type=Path)
    ap.add_argument("--proc", type=int, default=0, help="which of the node's `procs` processes this is")
    args = ap.parse_args(argv)
    return run(args.scenario.resolve(), args.proc)


if __name__ == "__main__":
    sys.exit(main())

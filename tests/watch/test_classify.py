"""Tracker: tick sequences that produce each verdict, and the near misses that must not."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodecheck.parsers.watch_sample import GpuSample, NodeSample, Proc, ProgressReading
from nodecheck.watch.classify import Tracker
from nodecheck.watch.config import Bounds, ProgressSource, WatchConfig
from nodecheck.watch.verdicts import ALARM, QUIET, VERDICTS, Observation, Tick, exit_code
from tests.growth import assert_linear

NODES = ("node1", "node2")
BUSY, BUSY_W = 100.0, 1000.0  # training: every GPU busy at high power (of 1100 W)


def cfg(**bounds) -> WatchConfig:
    base = dict(hang_after_s=60, checkpoint_max_s=100, startup_grace_s=120, unresponsive_after_s=30, slow_for_s=40)
    base.update(bounds)
    return WatchConfig(match="train", progress=ProgressSource(log="/root/train.log"), bounds=Bounds(**base))


def sample(utils=None, powers=None, *, limit=1100.0, procs=8, gpus=8) -> NodeSample:
    utils = utils if utils is not None else [BUSY] * gpus
    powers = powers if powers is not None else [BUSY_W] * len(utils)
    return NodeSample(
        clock=0.0,
        gpus=tuple(GpuSample(i, u, p, limit, 70000.0, 81559.0) for i, (u, p) in enumerate(zip(utils, powers))),
        gpu_error="",
        processes=tuple(Proc(1000 + i, "Sl", 60, "python3 train.py") for i in range(procs)),
        log_size=1000,
        log_mtime=0.0,
        log_tail="",
        log_error="",
        heartbeat_mtime=None,
        heartbeat_error="",
        heartbeat_watched=False,
    )


def reading(step, *, tput=5400.0, ckpt=False, done=False, ranks=None) -> ProgressReading:
    line = "training complete" if done else "[rank0]: Saving checkpoint" if ckpt else f"step: {step}"
    return ProgressReading(step, tput, ranks or {}, done, ckpt, line)


def obs(node, step, **kw) -> Observation:
    reading_kw = {k: kw.pop(k) for k in ("tput", "ckpt", "done", "ranks") if k in kw}
    return Observation(node, sample(**kw), progress=reading(step, **reading_kw))


def both(at, step, **kw) -> Tick:
    return Tick(at, tuple(obs(n, step, **kw) for n in NODES))


def run(tracker, ticks):
    return [tracker.update(t) for t in ticks]


def training(tracker, until=50, step0=100):
    """Steps every 10 s from t=0 to `until`; returns the last assessment."""
    return run(tracker, [both(t, step0 + t // 10) for t in range(0, until + 1, 10)])[-1]


# -- starting / progressing -------------------------------------------------------------------------


def test_first_sample_is_a_baseline_then_progress():
    t = Tracker(cfg(), NODES)
    first, second = run(t, [both(0, 100), both(10, 101)])
    assert first.verdict == "starting"
    assert first.message == "starting: no progress yet (0.0 s of the 2 min startup grace); processes on node[1-2]"
    assert second.verdict == "progressing" and second.since == 10
    assert second.message == "progressing: step 101, throughput 5,400"
    third = t.update(both(20, 103))
    assert third.message == "progressing: step 103 (+2 in 10 s), throughput 5,400" and third.since == 10


def test_a_short_pause_stays_progressing():
    t = Tracker(cfg(), NODES)
    training(t)  # step 105 at t=50
    a = run(t, [both(at, 105) for at in (60, 70, 80, 90, 100, 110)])[-1]
    assert a.verdict == "progressing"
    assert a.message == "progressing: step 105, throughput 5,400; no change for 60 s (hung after 60 s)"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([0, 5, 100]), st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=25
    )
)
def test_never_progressing_without_a_change(steps):
    """Whatever GPUs, checkpoint lines and failures show, an unchanging step is never "progressing"."""
    t = Tracker(cfg(), NODES)
    for i, (util, ckpt, fail, idle) in enumerate(steps):
        node2 = (
            Observation("node2", None, failure="timed out after 20 s")
            if fail
            else obs("node2", 7, utils=[util] * 8, powers=[100.0 if idle else BUSY_W] * 8)
        )
        tick = Tick(i * 10.0, (obs("node1", 7, ckpt=ckpt), node2))
        assert t.update(tick).verdict != "progressing"


# -- checkpointing and the deadlock signature -------------------------------------------------------


def save_pattern(at, step=105, odd=(("node1", 0),), power=150.0):
    """A save: the writer rank idle, the rest busy at low power (the same shape as the deadlock)."""
    out = []
    for node in NODES:
        utils = [0.0 if (node, g) in odd else BUSY for g in range(8)]
        out.append(obs(node, step, utils=utils, powers=[power] * 8))
    return Tick(at, tuple(out))


def test_normal_checkpoint_of_08_bound_stays_quiet_then_progresses():
    t = Tracker(cfg(), NODES)
    training(t)  # last step change at t=50
    during = run(t, [save_pattern(at) for at in range(60, 131, 10)])  # frozen 80 s = 0.8 x 100 s
    assert {a.verdict for a in during} == {"checkpointing"}
    assert during[-1].message == (
        "checkpointing: no progress for 80 s (bound 100 s): rank 0 (node1 GPU0) "
        "idle, the other 15 at low power (max 150 W of 1100 W); last step 105"
    )
    after = t.update(both(140, 106))
    assert after.verdict == "progressing" and after.since == 140


def test_the_hang_clock_restarts_when_a_save_longer_than_hang_after_ends():
    """A save of 80 s with hang_after_s 60: once its line is no longer the log's last and the GPUs
    leave the pattern, the freeze since the last step (90 s) is the save's, not a hang."""
    t = Tracker(cfg(), NODES)
    training(t)  # last step change at t=50
    during = run(t, [save_pattern(at) for at in range(60, 131, 10)])
    assert {a.verdict for a in during} == {"checkpointing"}
    saved = t.update(both(140, 105))  # saved, busy again, no step line yet: frozen 90 s
    assert saved.verdict == "progressing"
    assert t.update(both(150, 106)).verdict == "progressing"
    # a freeze after the save still ends as hung: hang_after_s after the save was last seen
    t2 = Tracker(cfg(), NODES)
    training(t2)
    run(t2, [save_pattern(at) for at in range(60, 131, 10)])
    after = run(t2, [both(at, 105) for at in range(140, 201, 10)])
    assert [a.verdict for a in after] == ["progressing"] * 6 + ["hung"]  # 200 - 130 = 70 s > 60 s
    assert after[-1].message == (
        "hung: no step since 105 (2 min 30 s ago) (a checkpoint explained it until "
        "70 s ago), longer than 60 s, while GPUs read busy (16 of 16 at >= 90%, "
        "max 1000 W)"
    )


def test_checkpoint_of_12_bound_is_hung_with_the_signature():
    t = Tracker(cfg(), NODES)
    training(t)
    verdicts = run(t, [save_pattern(at) for at in range(60, 171, 10)])  # 120 s = 1.2 x 100 s
    assert [a.verdict for a in verdicts[:5]] == ["checkpointing"] * 5  # frozen 10..50 s
    hung = [a for a in verdicts if a.verdict == "hung"]
    assert hung[0].since == 160  # frozen 110 s > 100 s
    assert hung[0].message == (
        "hung: power-deadlock signature for 100 s: every GPU near idle power (max 150 W of 1100 W), "
        "rank 0 (node1 GPU0) at 0% while the other 15 ranks read 100%; no step since 105 (110 s ago)"
    )
    assert (hung[0].nodes, hung[0].ranks) == (("node1",), (0,))


def test_incident_signature_names_rank_3_node1_gpu3():
    """§3: 16 ranks on 2 nodes, one at 0%, the rest at 100%, board power fallen to about 190 W of 1100 W."""
    c = cfg(hang_after_s=600, checkpoint_max_s=900, startup_grace_s=900)
    t = Tracker(c, NODES)
    run(t, [both(at, 3850 + at // 30) for at in range(0, 121, 30)])  # step 3854 at t=120
    ticks = [save_pattern(at, step=3854, odd=(("node1", 3),), power=190.0) for at in range(150, 1081, 30)]
    last = run(t, ticks)[-1]
    assert last.verdict == "hung"
    assert last.message == (
        "hung: power-deadlock signature for 16 min: every GPU near idle power (max 190 W of 1100 W), "
        "rank 3 (node1 GPU3) at 0% while the other 15 ranks read 100%; no step since 3854 (16 min ago)"
    )
    assert last.nodes == ("node1",) and last.ranks == (3,)
    assert last.facts["low_power_idle_ranks"] == [
        {"rank": 3, "node": "node1", "gpu": 3, "util_pct": 0.0, "power_w": 190.0}
    ]
    assert last.facts["gpus"] == {
        "count": 16,
        "util_min_pct": 0.0,
        "util_max_pct": 100.0,
        "power_max_w": 190.0,
        "busy": 15,
        "idle": 1,
        "all_low_power": True,
    }
    assert exit_code(last.verdict) == 2


def test_the_odd_ranks_node_missing_a_sample_keeps_its_last_readings_in_the_pattern():
    """node1 (holding the idle rank 3) misses samples while the save bound runs out: its last readings
    still make the pattern, so the hang names rank 3 instead of "GPUs read busy"."""
    c = cfg(hang_after_s=30, checkpoint_max_s=60, unresponsive_after_s=30)
    t = Tracker(c, NODES)
    training(t)  # last step change at t=50
    ticks = []
    for at in range(60, 131, 10):
        full = save_pattern(at, odd=(("node1", 3),), power=190.0)
        ticks.append(full if at % 20 == 0 else Tick(at, (silent("node1"), full.nodes[1])))
    last = run(t, ticks)[-1]
    assert last.verdict == "hung" and last.ranks == (3,) and last.nodes == ("node1",)
    assert "rank 3 (node1 GPU3) at 0%" in last.message


def test_signature_on_node2_names_its_global_rank():
    t = Tracker(cfg(), NODES)
    training(t)
    last = run(t, [save_pattern(at, odd=(("node2", 5), ("node2", 6)), power=190.0) for at in range(60, 171, 10)])[-1]
    assert last.verdict == "hung" and last.ranks == (13, 14) and last.nodes == ("node2",)
    assert "ranks 13-14 (node2 GPU5, node2 GPU6) at 0% while the other 14 ranks read 100%" in last.message


def test_checkpoint_line_explains_a_pause_at_full_power():
    t = Tracker(cfg(), NODES)
    training(t)
    a = run(t, [both(at, 105, ckpt=True) for at in range(60, 161, 10)])
    assert [x.verdict for x in a] == ["checkpointing"] * 10 + ["hung"]
    assert a[0].message == (
        "checkpointing: no progress for 10 s (bound 100 s): the log says '[rank0]: Saving checkpoint'; last step 105"
    )
    assert a[-1].message == (
        "hung: the log says '[rank0]: Saving checkpoint' for 110 s, longer than a checkpoint "
        "may take (100 s); no step since 105 (110 s ago)"
    )


def test_low_power_pattern_with_an_unknown_limit_and_no_low_power_w_is_not_a_checkpoint():
    t = Tracker(cfg(), NODES)
    training(t)
    tick = save_pattern(60)
    no_limit = Tick(
        60,
        tuple(
            Observation(
                o.node,
                NodeSample(
                    **{
                        **vars(o.sample),
                        "gpus": tuple(
                            GpuSample(g.index, g.util_pct, g.power_w, None, None, None) for g in o.sample.gpus
                        ),
                    }
                ),
                progress=o.progress,
            )
            for o in tick.nodes
        ),
    )
    assert t.update(no_limit).verdict == "progressing"
    t2 = Tracker(cfg(low_power_w=200.0), NODES)
    training(t2)
    a = t2.update(no_limit)
    assert a.verdict == "checkpointing" and "(max 150 W <= 200 W)" in a.message


# -- hung without the signature ---------------------------------------------------------------------


def test_frozen_while_busy_is_hung_and_stays_hung_until_progress():
    t = Tracker(cfg(), NODES)
    training(t)
    a = run(t, [both(at, 105) for at in range(60, 141, 10)])
    assert [x.verdict for x in a[:6]] == ["progressing"] * 6  # frozen 10..60 s
    assert a[6].verdict == "hung" and a[6].since == 120
    assert a[6].message == (
        "hung: no step since 105 (70 s ago), longer than 60 s, while GPUs read busy (16 of 16 at >= 90%, max 1000 W)"
    )
    # a save-shaped pattern after the hang began does not turn it back into a checkpoint
    assert t.update(save_pattern(150)).verdict == "hung"
    back = t.update(both(160, 106))
    assert back.verdict == "progressing" and back.since == 160


def test_frozen_with_idle_gpus_is_hung_too():
    t = Tracker(cfg(), NODES)
    training(t)
    a = run(t, [both(at, 105, utils=[0.0] * 8, powers=[80.0] * 8) for at in range(60, 121, 10)])[-1]
    assert a.message == "hung: no step since 105 (70 s ago), longer than 60 s, while GPUs read idle (max 0%, max 80 W)"


def test_startup_without_progress():
    t = Tracker(cfg(), NODES)
    a = run(t, [both(at, None) for at in range(0, 131, 10)])
    assert [x.verdict for x in a[:13]] == ["starting"] * 13  # 0..120 s: within grace
    assert a[-1].verdict == "hung"
    assert a[-1].message == (
        "hung: no progress within the startup grace (2 min 10 s > 2 min): no step line in the log yet"
    )
    # a first step line after the grace is progress
    assert t.update(both(140, 1)).verdict == "progressing"


def test_watcher_started_on_a_frozen_job():
    t = Tracker(cfg(), NODES)
    a = run(t, [both(at, 3854) for at in range(0, 131, 10)])
    assert a[-2].verdict == "starting" and a[-1].verdict == "hung"
    assert a[-1].message == ("hung: no progress within the startup grace (2 min 10 s > 2 min): step stayed at 3854")


def test_frozen_with_a_silent_node_names_it_as_the_suspect():
    t = Tracker(cfg(), NODES)
    training(t)
    silent = Observation("node2", None, failure="timed out after 20 s")
    a = run(t, [Tick(at, (obs("node1", 105), silent)) for at in range(60, 121, 10)])[-1]
    assert a.verdict == "hung" and a.nodes == ("node2",)
    assert a.message == (
        "hung: no step since 105 (70 s ago), longer than 60 s, while GPUs read busy (8 of 8 at "
        ">= 90%, max 1000 W); suspect node2 not answering for 60 s (timed out after 20 s)"
    )


def test_done_but_processes_never_exit():
    t = Tracker(cfg(), NODES)
    training(t)
    a = run(t, [both(at, 105, done=True) for at in range(60, 131, 10)])
    assert a[0].verdict == "progressing"
    assert a[0].message == (
        "progressing: the log says done ('training complete') 0.0 s ago; processes still on node[1-2] (last step 105)"
    )
    assert a[-1].verdict == "hung"
    assert (
        a[-1].message == "hung: the log said done 70 s ago ('training complete') but processes still run on node[1-2]"
    )


# -- unresponsive -----------------------------------------------------------------------------------


def test_node_that_stops_answering_while_the_job_progresses():
    t = Tracker(cfg(), NODES)
    training(t)
    a = run(
        t,
        [
            Tick(at, (obs("node1", 100 + at // 10), Observation("node2", None, failure="timed out after 20 s")))
            for at in range(60, 91, 10)
        ],
    )
    assert [x.verdict for x in a] == ["progressing", "progressing", "progressing", "unresponsive"]
    assert a[0].facts["failing"] == {"node2": {"since": 60, "failure": "timed out after 20 s"}}
    assert a[-1].message == (
        "unresponsive: node2 not answering for 30 s (timed out after 20 s); the job still progresses (last step 109)"
    )
    assert a[-1].nodes == ("node2",) and exit_code("unresponsive") == 1
    assert t.update(both(100, 110)).verdict == "progressing"


# -- slow and straggler -----------------------------------------------------------------------------


def test_throughput_under_the_floor_for_the_bound():
    t = Tracker(cfg(throughput_floor=4000.0), NODES)
    training(t)
    a = run(
        t,
        [
            Tick(at, (obs("node1", 100 + at // 10), obs("node2", 100 + at // 10, tput=1350.0)))
            for at in range(60, 101, 10)
        ],
    )
    assert [x.verdict for x in a] == ["progressing"] * 4 + ["slow"]
    assert a[-1].message == "slow: throughput 1,350 below the floor 4,000 for 40 s (lowest on node2; last step 110)"
    assert a[-1].nodes == ("node2",)


def test_a_dip_shorter_than_the_bound_is_not_slow():
    t = Tracker(cfg(throughput_floor=4000.0), NODES)
    training(t)
    a = run(
        t,
        [
            both(60, 106, tput=1000.0),
            both(70, 107, tput=1000.0),
            both(80, 108),
            both(90, 109, tput=1000.0),
            both(100, 110, tput=1000.0),
        ],
    )
    assert {x.verdict for x in a} == {"progressing"}


def rank_times(node_factor):
    """Per-rank times for 16 ranks: node1 ranks 0-7, node2 ranks 8-15 (each node logs its own)."""
    out = []
    for pos, node in enumerate(NODES):
        ranks = {pos * 8 + g: round(0.130 * node_factor.get(node, 1.0), 3) for g in range(8)}
        out.append(ranks)
    return out


def test_straggler_node_named_with_its_ranks_and_times():
    t = Tracker(cfg(), NODES)
    training(t)
    r1, r2 = rank_times({"node2": 1.3})
    a = t.update(Tick(60, (obs("node1", 106, ranks=r1), obs("node2", 106, ranks=r2))))
    assert a.verdict == "straggler" and a.nodes == ("node2",) and a.ranks == tuple(range(8, 16))
    assert a.message == (
        "straggler: node2 ranks 8-15 median 0.169 s per step, 30% above the other ranks' "
        "median 0.13 s (8: 0.169 s, 9: 0.169 s, 10: 0.169 s, 11: 0.169 s, 12: 0.169 s, 13: 0.169 s, "
        "14: 0.169 s, 15: 0.169 s)"
    )


def test_a_straggler_missing_one_sample_stays_a_straggler():
    """node2's sample times out for one tick: its last per-rank times still count (no flap to
    progressing and back, which would page twice)."""
    t = Tracker(cfg(), NODES)
    training(t)
    r1, r2 = rank_times({"node2": 1.3})
    first = t.update(Tick(60, (obs("node1", 106, ranks=r1), obs("node2", 106, ranks=r2))))
    missed = t.update(Tick(70, (obs("node1", 107, ranks=r1), silent("node2"))))
    assert (first.verdict, missed.verdict) == ("straggler", "straggler")
    assert missed.nodes == ("node2",) and missed.since == 60


def test_ten_percent_slower_is_not_a_straggler():
    t = Tracker(cfg(), NODES)
    training(t)
    r1, r2 = rank_times({"node2": 1.1})
    assert t.update(Tick(60, (obs("node1", 106, ranks=r1), obs("node2", 106, ranks=r2)))).verdict == "progressing"


# -- crashed / completed, inventory and Slurm -------------------------------------------------------


def test_processes_gone_on_one_node_while_the_other_runs():
    t = Tracker(cfg(), NODES)
    training(t)
    a = t.update(Tick(60, (obs("node1", 105), obs("node2", 105, procs=0))))
    assert a.verdict == "crashed" and a.nodes == ("node2",)
    assert a.message == "crashed: processes gone on node2 (node2 had 8) while node1 still runs 8; last step 105"


def test_a_node_that_never_had_processes_is_not_gone():
    t = Tracker(cfg(), ("node1", "node2", "node3"))
    run(
        t,
        [
            Tick(at, (obs("node1", 100 + at // 10), obs("node2", 100 + at // 10), obs("node3", None, procs=0)))
            for at in range(0, 31, 10)
        ],
    )
    assert (
        t.update(Tick(40, (obs("node1", 104), obs("node2", 104), obs("node3", None, procs=0)))).verdict == "progressing"
    )


def test_gone_everywhere_without_done_is_a_crash_inventory_mode():
    t = Tracker(cfg(), NODES)
    training(t)
    a = t.update(both(60, 105, procs=0))
    assert a.verdict == "crashed" and a.message == "crashed: processes gone on every node; last step 105"
    assert a.nodes == NODES


def test_gone_everywhere_after_done_is_completed_inventory_mode():
    t = Tracker(cfg(), NODES)
    training(t)
    assert t.update(Tick(60, (obs("node1", 105, done=True), obs("node2", 105, procs=0)))).verdict == "progressing"
    a = t.update(both(70, 105, procs=0, done=True))
    assert a.verdict == "completed"
    assert a.message == (
        "completed: the log says done ('training complete') and the processes are gone on every node; last step 105"
    )
    assert exit_code("completed") == 0


def slurm(at, state, step=105, reason="", **kw):
    return Tick(at, tuple(obs(n, step, **kw) for n in NODES), job_state=state, job_reason=reason)


def test_slurm_states():
    t = Tracker(cfg(), NODES)
    pending = t.update(Tick(0, (), job_state="PENDING", job_reason="Resources"))
    assert (pending.verdict, pending.message) == ("starting", "starting: Slurm says PENDING (Resources)")
    run(t, [slurm(at, "RUNNING", step=100 + at // 10) for at in range(10, 51, 10)])
    assert t.update(slurm(60, "COMPLETED", procs=0)).message == "completed: Slurm says COMPLETED; last step 105"
    t2 = Tracker(cfg(), NODES)
    run(t2, [slurm(at, "RUNNING", step=100 + at // 10) for at in range(0, 51, 10)])
    failed = t2.update(slurm(60, "FAILED", reason="NonZeroExitCode", procs=0))
    assert failed.message == "crashed: Slurm says FAILED (NonZeroExitCode); last step 105"
    t3 = Tracker(cfg(), NODES)
    run(t3, [slurm(at, "RUNNING", step=100 + at // 10) for at in range(0, 51, 10)])
    a = t3.update(Tick(60, (obs("node1", 105, procs=0), obs("node2", 105, procs=0)), job_state="RUNNING"))
    assert a.message == "crashed: processes gone on every node; last step 105"
    timeout = t3.update(slurm(70, "TIMEOUT+", procs=0))
    assert timeout.message == "crashed: Slurm says TIMEOUT; last step 105"


def test_slurm_job_still_allocated_while_one_node_is_gone_and_the_other_is_silent():
    t = Tracker(cfg(), NODES)
    run(t, [slurm(at, "RUNNING", step=100 + at // 10) for at in range(0, 51, 10)])
    a = t.update(
        Tick(60, (obs("node1", 105, procs=0), Observation("node2", None, failure="timed out")), job_state="RUNNING")
    )
    assert a.message == (
        "crashed: processes gone on node1 (node1 had 8) while the job is still allocated (Slurm RUNNING); last step 105"
    )


def test_requeue_starts_the_run_over():
    t = Tracker(cfg(), NODES)
    run(t, [slurm(at, "RUNNING", step=100 + at // 10) for at in range(0, 51, 10)])
    assert t.update(Tick(60, (), job_state="REQUEUED")).verdict == "starting"
    t.update(Tick(70, (), job_state="PENDING"))
    # running again, its processes not up yet: not a crash, a start
    a = t.update(slurm(80, "RUNNING", step=None, procs=0))
    assert a.verdict == "starting"
    assert a.message == "starting: no progress yet (0.0 s of the 2 min startup grace); no job processes yet"


# -- restarts ---------------------------------------------------------------------------------------


def roundtrip(t: Tracker, c: WatchConfig) -> Tracker:
    data = json.loads(json.dumps(t.to_json()))
    again = Tracker.from_json(c, NODES, data)
    assert again.to_json() == t.to_json()
    return again


def test_restart_mid_hang_keeps_the_hang_clock_and_since():
    c = cfg()
    t = Tracker(c, NODES)
    training(t)
    hung = run(t, [both(at, 105) for at in range(60, 131, 10)])[-1]
    assert hung.verdict == "hung" and hung.since == 120
    resumed = roundtrip(t, c)
    a = resumed.update(both(400, 105))  # the watcher was down for 270 s
    assert a.verdict == "hung" and a.since == 120
    assert a.message.startswith("hung: no step since 105 (5 min 50 s ago)")


def test_restart_during_a_freeze_does_not_reset_the_clock():
    c = cfg()
    t = Tracker(c, NODES)
    training(t)
    run(t, [both(at, 105) for at in (60, 70, 80)])
    resumed = roundtrip(t, c)
    assert resumed.update(both(111, 105)).verdict == "hung"  # frozen 61 s, counted from t=50


def test_from_json_refuses_other_data():
    with pytest.raises(ValueError, match="not watch tracker state version 1"):
        Tracker.from_json(cfg(), NODES, {"version": 99})
    with pytest.raises(ValueError, match="incomplete or malformed"):
        Tracker.from_json(cfg(), NODES, {"version": 1, "nodes": list(NODES), "node": {}})


def test_history_is_bounded():
    c = WatchConfig(history=5, progress=ProgressSource(log="/l"))
    t = Tracker(c, NODES)
    run(t, [both(at, at) for at in range(0, 100, 10)])
    assert [h["at"] for h in t.history] == [50, 60, 70, 80, 90]
    assert t.history[-1] == {
        "at": 90,
        "verdict": "progressing",
        "step": 90,
        "throughput": 5400.0,
        "power_max_w": 1000.0,
        "util_min_pct": 100.0,
        "failing": "",
    }


def test_heartbeat_only_progress():
    c = WatchConfig(progress=ProgressSource(heartbeat="/hb"))
    t = Tracker(c, ("n1",))

    def beat(at, mtime):
        s = NodeSample(**{**vars(sample()), "heartbeat_watched": True, "heartbeat_mtime": mtime, "log_watched": False})
        return Tick(at, (Observation("n1", s),))

    a = run(t, [beat(0, 1.0), beat(10, 9.0), beat(20, 19.0)])
    assert [x.verdict for x in a] == ["starting", "progressing", "progressing"]
    assert a[-1].message == "progressing: heartbeat changing"
    frozen = run(t, [beat(at, 19.0) for at in range(30, 700, 30)])[-1]
    assert frozen.verdict == "hung" and frozen.message.startswith("hung: no heartbeat since 11 min ago")


def test_verdict_tables():
    assert VERDICTS == (
        "starting",
        "progressing",
        "checkpointing",
        "slow",
        "straggler",
        "unresponsive",
        "hung",
        "crashed",
        "completed",
    )
    assert {"starting", "progressing", "checkpointing"} == QUIET
    assert {"slow", "straggler", "unresponsive", "hung", "crashed"} == ALARM
    assert [exit_code(v) for v in VERDICTS] == [0, 0, 0, 1, 1, 1, 2, 2, 0]
    with pytest.raises(ValueError):
        exit_code("fine")


# -- hostile review (R2): each test below failed before its fix, or pins a decision ----------------


def silent(node, why="timed out after 20 s"):
    return Observation(node, None, failure=why)


def test_every_node_silent_is_never_hung_and_says_the_watcher_lost_them():
    """The watcher's own network down: no evidence about the job, and --on-hang must not act on it."""
    t = Tracker(cfg(), NODES)
    training(t)  # step 105 at t=50
    a = run(t, [Tick(at, (silent("node1"), silent("node2"))) for at in range(60, 141, 10)])
    assert [x.verdict for x in a] == ["progressing"] * 3 + ["unresponsive"] * 6  # never "hung"
    assert a[0].message == "progressing: no node answered this tick (timed out after 20 s); last step 105"
    assert a[-1].message == (
        "unresponsive: the watcher reaches none of the 2 node(s) for 80 s (timed out after 20 s): its own "
        "network or SSH may be down, or every node is; the job's progress is unknown (last step 105, last "
        "change 90 s ago)"
    )
    assert a[-1].nodes == NODES and exit_code(a[-1].verdict) == 1
    # back, and the step did not move while the watcher was blind: now that is evidence of a hang
    back = t.update(both(150, 105))
    assert back.verdict == "hung" and back.message.startswith("hung: no step since 105 (100 s ago)")


def test_a_hang_stands_while_every_node_is_silent():
    t = Tracker(cfg(), NODES)
    training(t)
    assert run(t, [both(at, 105) for at in range(60, 121, 10)])[-1].verdict == "hung"
    a = t.update(Tick(130, (silent("node1", "connection refused"), silent("node2"))))
    assert a.verdict == "hung" and a.since == 120
    assert a.message.startswith(
        "hung: the watcher reaches none of the 2 node(s) for 0.0 s (connection refused; and 1 other failure(s))"
    )
    assert a.message.endswith("; the verdict stands until a node answers")


def test_a_node_failing_every_other_tick_is_unresponsive():
    """Its failures never last unresponsive_after_s in a row; they keep coming back for that long."""
    t = Tracker(cfg(), NODES)
    training(t)
    ticks = [
        Tick(at, (obs("node1", 100 + at // 10), silent("node2") if at % 20 == 0 else obs("node2", 100 + at // 10)))
        for at in range(60, 131, 10)
    ]
    a = run(t, ticks)
    assert [x.verdict for x in a] == ["progressing"] * 3 + ["unresponsive"] * 5  # 60 s + 30 s bound
    assert a[3].message == (
        "unresponsive: node2 failed 2 of its 4 samples in 30 s, answering now (last failure: "
        "timed out after 20 s); the job still progresses (last step 109)"
    )
    assert a[-1].message.startswith("unresponsive: node2 failed 4 of its 8 samples in 70 s, answering now")
    # steady again only after answering for the whole bound (its last failure was at 120)
    steady = run(t, [both(at, 100 + at // 10) for at in range(140, 181, 10)])
    assert [x.verdict for x in steady] == ["unresponsive", "unresponsive", "progressing", "progressing", "progressing"]


def test_two_blips_among_many_answered_samples_are_not_unresponsive():
    """A busy node that misses 2 of 7 samples (60 s apart, the bound is 30 s) has not stopped answering."""
    t = Tracker(cfg(), NODES)
    training(t)
    ticks = [
        Tick(at, (obs("node1", 100 + at // 10), silent("node2") if at in (60, 120) else obs("node2", 100 + at // 10)))
        for at in range(60, 131, 10)
    ]
    assert {x.verdict for x in run(t, ticks)} == {"progressing"}


def test_a_node_that_comes_back_once_is_quiet_at_once():
    t = Tracker(cfg(), NODES)
    training(t)
    a = run(t, [Tick(at, (obs("node1", 100 + at // 10), silent("node2"))) for at in range(60, 101, 10)])
    assert a[-1].verdict == "unresponsive"
    assert t.update(both(110, 111)).verdict == "progressing"
    run(t, [both(at, 100 + at // 10) for at in (120, 130, 140)])  # steady for the 30 s bound
    assert t.update(Tick(150, (obs("node1", 115), silent("node2")))).verdict == "progressing"  # one blip
    # failing again soon after coming back is the flapping of the test above
    t2 = Tracker(cfg(), NODES)
    training(t2)
    run(t2, [Tick(at, (obs("node1", 100 + at // 10), silent("node2"))) for at in range(60, 101, 10)])
    t2.update(both(110, 111))
    assert t2.update(Tick(120, (obs("node1", 112), silent("node2")))).verdict == "unresponsive"


def test_a_step_that_goes_back_is_a_restart_not_progress():
    """Decision: the job restarted from a checkpoint (3854 -> 3500). Not progress: a new baseline, so
    the hang clock keeps running from the last real step; the next step after it is progress."""
    t = Tracker(cfg(), NODES)
    run(t, [both(at, 3850 + at // 10) for at in range(0, 41, 10)])  # 3854 at t=40
    a = run(
        t,
        [
            both(50, 3854),
            both(60, 3500),
            both(70, 3500),
            both(80, 3500),
            both(90, 3500),
            both(100, 3500),
            both(110, 3500),
        ],
    )
    assert [x.verdict for x in a] == ["progressing"] * 6 + ["hung"]  # frozen 70 s > 60 s
    assert a[1].facts["step_went_back"] == {"node1": 3500, "node2": 3500}
    assert a[-1].message.startswith("hung: no step since 3500 (70 s ago)")
    again = t.update(both(120, 3501))
    assert again.verdict == "progressing" and again.message == "progressing: step 3501 (+1 in 80 s), throughput 5,400"


def heartbeat_tick(at, *mtimes, clock=0.0):
    out = []
    for node, mtime in zip(NODES, mtimes):
        s = NodeSample(
            **{
                **vars(sample()),
                "clock": clock,
                "heartbeat_watched": True,
                "heartbeat_mtime": mtime,
                "log_watched": False,
            }
        )
        out.append(Observation(node, s))
    return Tick(at, tuple(out))


def test_heartbeat_is_judged_by_its_changes_whatever_the_clocks_say():
    """Decision: mtimes are compared with each other only, never with the watcher's or the node's
    clock: one an hour in the future (a file server ahead), one stepping back (NTP) is still a touch,
    and a future mtime that stops changing is still a hang."""
    c = WatchConfig(
        match="train",
        progress=ProgressSource(heartbeat="/hb/{node}"),
        bounds=Bounds(hang_after_s=60, startup_grace_s=120),
    )
    t = Tracker(c, NODES)
    future = 1767229200.0  # node clock 1767225600: the mtime is 1 h ahead
    a = run(t, [heartbeat_tick(at, future + at, future - 5 + at, clock=1767225600.0 + at) for at in (0, 10, 20)])
    assert [x.verdict for x in a] == ["starting", "progressing", "progressing"]
    assert t.update(heartbeat_tick(30, future - 100, future - 80, clock=1767225630.0)).verdict == "progressing"
    frozen = run(
        t, [heartbeat_tick(at, future - 100, future - 80, clock=1767225600.0 + at) for at in range(40, 101, 10)]
    )
    assert frozen[-1].verdict == "hung" and frozen[-1].message.startswith("hung: no heartbeat since 70 s ago")


def test_log_spam_that_pushed_the_step_line_out_is_not_progress():
    """NCCL WARN lines keep the log growing (size, mtime, last line all change) while steps are frozen;
    once they fill the 64 KiB tail there is no step line at all: neither is progress."""
    t = Tracker(cfg(), NODES)
    training(t)
    ticks = []
    for i, at in enumerate(range(60, 131, 10)):
        spam = ProgressReading(
            None if i >= 2 else 105,
            None,
            {},
            False,
            False,
            f"node1:1234:1290 [3] NCCL WARN NET/IB : Got completion with error 12 ({i})",
        )
        ticks.append(
            Tick(
                at,
                tuple(
                    Observation(n, NodeSample(**{**vars(sample()), "log_size": 10_000 * (i + 2)}), progress=spam)
                    for n in NODES
                ),
            )
        )
    a = run(t, ticks)
    assert [x.verdict for x in a] == ["progressing"] * 6 + ["hung"] * 2
    assert a[-2].message.startswith("hung: no step since 105 (70 s ago), longer than 60 s")


def test_slurm_state_with_a_plus_or_a_by_uid_is_read_by_its_first_word():
    t = Tracker(cfg(), NODES)
    run(t, [slurm(at, "RUNNING", step=100 + at // 10) for at in range(0, 51, 10)])
    a = t.update(slurm(60, "CANCELLED by 1000"))  # processes still up: Slurm is signalling
    assert (a.verdict, a.message) == ("crashed", "crashed: Slurm says CANCELLED; last step 105")
    t2 = Tracker(cfg(), NODES)
    run(t2, [slurm(at, "RUNNING", step=100 + at // 10) for at in range(0, 51, 10)])
    assert t2.update(slurm(60, "completed+", procs=0)).message == "completed: Slurm says COMPLETED; last step 105"


def test_no_process_ever_matched_is_said_not_called_a_crash():
    """Decision: a node with no matching process from the first sample is not 'gone' (a --match that
    misses the job looks the same as a job that never started): the log decides, and the message says
    the pattern matched nothing, since a crash cannot be seen without processes."""
    t = Tracker(cfg(), NODES)
    a = run(t, [both(at, 100 + at // 10, procs=0) for at in range(0, 21, 10)])
    assert a[-1].verdict == "progressing"
    assert a[-1].message == (
        "progressing: step 102 (+1 in 10 s), throughput 5,400; no process has matched --match "
        "'train' on any node (is it the job's command line?)"
    )
    t2 = Tracker(cfg(), NODES)
    b = run(t2, [both(at, None, procs=0) for at in range(0, 131, 10)])
    assert b[-2].verdict == "starting" and b[-1].verdict == "hung"
    assert b[-1].message == (
        "hung: no progress within the startup grace (2 min 10 s > 2 min): no step line in the "
        "log yet; no process has matched --match 'train' on any node (is it the job's command "
        "line?)"
    )


def test_process_listing_failure_is_said_not_taken_for_no_processes():
    t = Tracker(cfg(), NODES)
    broken = NodeSample(**{**vars(sample()), "processes": (), "procs_error": "ps: unknown option etimes"})
    a = t.update(Tick(0, tuple(Observation(n, broken, progress=reading(None)) for n in NODES)))
    assert a.verdict == "starting" and a.facts["procs_errors"] == {
        "node1": "ps: unknown option etimes",
        "node2": "ps: unknown option etimes",
    }
    assert a.message.endswith("processes unknown: the process listing failed on node[1-2] (ps: unknown option etimes)")


def with_pids(tick: Tick, base: int) -> Tick:
    return Tick(
        tick.at,
        tuple(
            Observation(
                o.node,
                NodeSample(
                    **{
                        **vars(o.sample),
                        "processes": tuple(
                            Proc(base + i, "Sl", 5, "python3 train.py") for i in range(len(o.sample.processes))
                        ),
                    }
                ),
                progress=o.progress,
            )
            for o in tick.nodes
        ),
        tick.job_state,
    )


def test_processes_replaced_on_every_node_start_a_new_run():
    """After --on-hang requeue the job comes back on the same nodes, and the watcher may never see it
    pending: new processes everywhere are a new run (startup grace), not the old run still hung."""
    t = Tracker(cfg(), NODES)
    training(t)
    assert run(t, [both(at, 105) for at in range(60, 121, 10)])[-1].verdict == "hung"
    a = t.update(with_pids(both(130, 105), 5000))  # relaunched, loading: the log not yet written
    assert (a.verdict, a.since) == ("starting", 130)
    assert a.message == (
        "starting: a new run: the processes were replaced on node[1-2]; no progress yet (0.0 s of "
        "the 2 min startup grace); processes on node[1-2]"
    )
    # relaunched again at 200 without a step (a crash loop): no second grace, the first ends at 250
    quiet = run(t, [with_pids(both(at, 105), 5000 if at < 200 else 9000) for at in range(140, 261, 10)])
    assert [x.verdict for x in quiet] == ["starting"] * 12 + ["hung"]
    assert quiet[-1].message.startswith("hung: no progress within the startup grace (2 min 10 s > 2 min)")


def test_replaced_on_one_node_only_is_not_a_new_run():
    t = Tracker(cfg(), NODES)
    training(t)
    run(t, [both(at, 105) for at in range(60, 121, 10)])
    tick = both(130, 105)
    mixed = Tick(130, (with_pids(tick, 5000).nodes[0], tick.nodes[1]))
    assert t.update(mixed).verdict == "hung"


def test_gpus_without_utilization_or_with_some_power_limits_unknown():
    """MIG prints [N/A] utilization: no pattern can be read, so a freeze is judged by hang_after_s alone,
    and the words do not call unknown utilization idle. Some boards print [N/A] power.limit: judged
    against the limit the others print (it used to hide the pattern: a normal save hung at 60 s)."""
    t = Tracker(cfg(), NODES)
    training(t)
    mig = [None] * 8
    a = run(t, [both(at, 105, utils=mig, powers=[190.0] * 8) for at in range(60, 121, 10)])
    assert [x.verdict for x in a] == ["progressing"] * 6 + ["hung"]
    assert a[-1].message == (
        "hung: no step since 105 (70 s ago), longer than 60 s, while GPU utilization unknown "
        "([N/A] on 16 GPUs, max 190 W)"
    )
    t2 = Tracker(cfg(), NODES)
    training(t2)
    tick = save_pattern(60, power=190.0)
    node2 = tick.nodes[1]
    no_limit = Observation(
        "node2",
        NodeSample(
            **{
                **vars(node2.sample),
                "gpus": tuple(GpuSample(g.index, g.util_pct, g.power_w, None, None, None) for g in node2.sample.gpus),
            }
        ),
        progress=node2.progress,
    )
    # node2's boards print no power.limit: judged against node1's 1100 W, the pattern still shows
    b = run(t2, [Tick(at, (save_pattern(at, power=190.0).nodes[0], no_limit)) for at in range(60, 171, 10)])
    assert [x.verdict for x in b] == ["checkpointing"] * 10 + ["hung"] * 2
    assert b[-1].message.startswith(
        "hung: power-deadlock signature for 110 s: every GPU near idle power (max 190 W "
        "of 1100 W), rank 0 (node1 GPU0) at 0%"
    )


def test_mixed_gpu_counts_keep_the_rank_layout_of_the_widest_node():
    t = Tracker(cfg(), NODES)

    def node1(at, utils):
        return obs("node1", 105, utils=utils, powers=[190.0] * 8)

    def node2(at):
        return obs("node2", 105, utils=[BUSY] * 4, powers=[190.0] * 4, gpus=4)

    run(t, [Tick(at, (obs("node1", 100 + at // 10), obs("node2", 100 + at // 10, gpus=4))) for at in range(0, 51, 10)])
    odd = [BUSY] * 8
    odd[3] = 0.0
    a = run(t, [Tick(at, (node1(at, odd), node2(at))) for at in range(60, 171, 10)])[-1]
    assert a.verdict == "hung" and a.ranks == (3,) and a.nodes == ("node1",)
    assert "rank 3 (node1 GPU3) at 0% while the other 11 ranks read 100%" in a.message
    assert a.facts["gpus"]["count"] == 12


def test_from_json_refuses_state_for_other_nodes():
    """A requeue onto other nodes: their ranks, baselines and processes are not the saved ones."""
    t = Tracker(cfg(), NODES)
    training(t)
    data = json.loads(json.dumps(t.to_json()))
    with pytest.raises(ValueError, match=r"state is for the nodes node\[1-2\], not node\[3-4\]"):
        Tracker.from_json(cfg(), ("node3", "node4"), data)
    with pytest.raises(ValueError, match=r"state is for the nodes node\[1-2\], not node\[1-2\]"):
        Tracker.from_json(cfg(), ("node2", "node1"), data)  # another order is another rank layout


@pytest.mark.parametrize(
    "path, value, why",
    [
        (("last_progress_at",), "yesterday", "last_progress_at is 'yesterday', not float | None"),
        (("last_progress_at",), float("nan"), "last_progress_at is nan, not float | None"),
        (("progressed",), 1, "progressed is 1, not bool"),
        (("step",), True, "step is True, not int | None"),
        (("step",), 7.5, "step is 7.5, not int | None"),
        (("node", "node1", "fail_since"), "x", "node node1 fail_since is 'x', not float | None"),
        (("node", "node1", "pids"), ["1"], "node node1 pids is ['1'], not list"),
        (("node", "node1", "rogue"), 1, "unexpected keyword argument 'rogue'"),
        (("node", "node3"), {}, "the per-node states do not match its node list"),
        (("history",), {"at": 1}, "history is not a list of ticks"),
    ],
)
def test_from_json_refuses_corrupted_fields(path, value, why):
    """A field of the wrong type would fail every later tick, and each restart would resume it again."""
    t = Tracker(cfg(), NODES)
    training(t)
    data = json.loads(json.dumps(t.to_json()))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValueError, match="incomplete or malformed") as e:
        Tracker.from_json(cfg(), NODES, data)
    assert why in str(e.value)


def test_from_json_accepts_state_without_the_newer_node_fields():
    t = Tracker(cfg(), NODES)
    training(t)
    data = json.loads(json.dumps(t.to_json()))
    data["node"] = {n: {"log_seen": True, "step": 105, "had_procs": 8, "procs": 8, "gpus": 8} for n in NODES}
    again = Tracker.from_json(cfg(), NODES, data)
    assert again.node["node1"].flaky_since is None and again.update(both(60, 106)).verdict == "progressing"


@pytest.mark.growth
def test_1000_nodes_x_8_gpus_state_and_tick_stay_bounded():
    """The state is rewritten every tick: it must not grow with time, nor a tick with nodes squared
    (proved by growth, tests/growth.py: a tick of 1,000 nodes against one of 250). Measured on the dev
    machine: update ~80 ms with per-rank times (was 440 ms), state ~320 KB at history 240 (the history
    is folded; the per-node part dominates)."""
    c = WatchConfig(match="train", history=20, progress=ProgressSource(log="/l"))

    def tick(nodes, i, fail):
        return Tick(
            i * 30.0,
            tuple(
                silent(n)
                if fail and p % 2
                else Observation(n, sample(), progress=reading(100 + i, ranks={p * 8 + g: 0.13 for g in range(8)}))
                for p, n in enumerate(nodes)
            ),
        )

    built: dict[int, tuple[Tracker, list[Tick]]] = {}

    def watched(n: int) -> tuple[Tracker, list[Tick]]:
        """A tracker of n nodes whose history is full, and its next ticks (a failing one among them)."""
        if n not in built:
            nodes = [f"gpu{i:04d}" for i in range(n)]
            t = Tracker(c, nodes)
            for i in range(20):
                t.update(tick(nodes, i, fail=i % 3 == 0))
            built[n] = t, [tick(nodes, i, fail=i % 3 == 0) for i in range(20, 30)]
        return built[n]

    def next_tick(tracked: tuple[Tracker, list[Tick]]) -> None:
        t, ticks = tracked
        t.update(ticks.pop(0))

    assert_linear(next_tick, watched, 250)
    t, _ = watched(1000)  # the 1,000-node tracker just timed
    size = len(json.dumps(t.to_json()))
    assert len(t.history) == 20
    assert size < 400_000, size

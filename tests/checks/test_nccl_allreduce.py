"""nccl.allreduce_single / nccl.allreduce_multi: the judge of one run on real recorded outputs, the
parameters, and the commands (the launcher's orchestration runs on the simulated cluster in
tests/integration/test_nccl.py)."""

from __future__ import annotations

import threading
import time

import pytest
from pydantic import ValidationError

from nodecheck.checks import all_checks, nccl_allreduce
from nodecheck.checks.nccl_allreduce import NcclMulti, NcclSingle
from nodecheck.core.model import Capture, Node, Outcome, Status
from nodecheck.judging import nccl_runs
from nodecheck.judging.nccl_runs import judge_output
from nodecheck.probes import nccl_tests as nccltest
from nodecheck.probes.env_policy import LOADS_OR_WRITES
from nodecheck.run.active import CheckContext, CommandRunner
from tests.helpers import captures, data

A3MEGA = "nccl-tests/a3mega-h100-2node-16rank-all_reduce_perf-8G-wrong-col.txt"
OLIVIA = "nccl-tests/olivia-gh200-slingshot-2.17.9-all_reduce-int8-wrong-nonzero-corruption.txt"
FAILURE_219 = "nccl-tests/nccl-tests-219-test-nccl-failure-internal-error-mpirun-truncated.txt"
RTX5090 = "nccl-tests/nccl-tests-287-rtx5090-alltoall-bogus-algbw-avg-busbw-0.txt"
K80 = "nccl-tests/azureml-k80-old-error-col-2e-07-launch-mode-interleaved.txt"


def wrapped(text: str, rc: int | None) -> str:
    """What the probe script prints around a test's output (rc None: the end marker never came)."""
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"@@nodecheck begin test\n{body}" + (f"@@nodecheck end test rc={rc}\n" if rc is not None else "")


def judge(text: str, rc: int | None = 0, ranks: int | None = None, **params):
    return judge_output(wrapped(text, rc), NcclSingle(**params), "all_reduce", ranks)


def test_a_run_judged_without_its_env_assumes_the_probes_nccl_debug():
    # judging cannot import the probes (one layer): the two constants are kept equal here
    assert nccl_runs.ASSUMED_NCCL_DEBUG == nccltest.DEFAULT_NCCL_DEBUG
    assert nccltest.DEFAULT_NCCL_DEBUG in nccl_runs.PRINTS_VERSION


def cut_after(text: str, marker: str) -> str:
    """The text up to and including the first line that contains `marker`."""
    lines = text.splitlines(keepends=True)
    i = next(i for i, ln in enumerate(lines) if marker in ln)
    return "".join(lines[: i + 1])


def test_plateau_busbw_is_the_slowest_row_at_or_above_1_GiB_of_a_real_2_node_run():
    v = judge(data(A3MEGA), ranks=16, busbw_gbps={"fail_below": 300})
    assert v.status is Status.FAIL
    assert v.message == (
        "all_reduce: busbw 298.82 GB/s, expected >= 300 GB/s at >= 1 GiB (slowest of 4 sizes), "
        "avg busbw 70.742 GB/s, 16 ranks"
    )
    assert v.busbw == 298.82 and v.observed["busbw_plateau_gbs"] == 298.82
    assert v.observed["hosts"] == {"ztan-mig-235z": "0-7", "ztan-mig-gq73": "8-15"}
    assert v.observed["ranks"][9] == {
        "rank": 9,
        "host": "ztan-mig-gq73",
        "gpu": 1,
        "bus_id": "0000:05:00",
        "model": "NVIDIA H100 80GB HBM3",
    }
    ok = judge(data(A3MEGA), ranks=16, busbw_gbps={"fail_below": 250, "warn_below": 290})
    assert ok.status is Status.PASS and ok.message.startswith("all_reduce: busbw 298.82 GB/s (>= 290 GB/s) at >= 1 GiB")
    warn = judge(data(A3MEGA), busbw_gbps={"fail_below": 250, "warn_below": 320})
    assert warn.status is Status.WARN and "expected >= 320 GB/s" in warn.message


def test_nonzero_wrong_is_data_corruption_even_in_an_output_that_stops_after_the_rows():
    v = judge(data(OLIVIA), busbw_gbps={"fail_below": 1})
    assert v.status is Status.FAIL
    assert v.message.startswith("all_reduce: data corruption: 3935945 wrong elements in 6 sizes (2 MiB..64 MiB)")
    assert v.observed["wrong"][0] == [2097152, 18134 + 9609]


def test_a_test_nccl_failure_names_the_host_and_the_source_line():
    v = judge(data(FAILURE_219), rc=1)
    assert v.status is Status.FAIL
    assert v.message.startswith("all_reduce: nccl failure on fengyun: internal error"), v.message
    assert "(common.cu:959)" in v.message


def test_a_run_killed_mid_sweep_is_a_collective_hang_at_the_size_after_the_last_row():
    v = judge(cut_after(data(A3MEGA), "8388608       2097152"), rc=124, test_timeout_s=60)
    assert v.status is Status.FAIL and v.hang == "collective"
    assert v.message.startswith("all_reduce: a collective hung mid-sweep after 8388608 B (8 MiB)")
    assert "8388608" in v.message and v.message.endswith("killed after 60 s")


def test_a_run_killed_after_the_nccl_version_line_hung_in_nccl_init():
    text = cut_after(data(A3MEGA), "Rank 15") + "NCCL version 2.21.5+cuda12.4\n"
    v = judge(text, rc=124)
    assert v.status is Status.FAIL and v.hang == "init"
    assert v.message.startswith("all_reduce: hung in NCCL init: 'NCCL version' printed, no result row")
    assert "stale image" in v.message


def test_a_run_killed_after_its_table_header_hung_in_the_first_collective_not_in_init():
    # issue 17: the table header without an 'NCCL version' line (NCCL_DEBUG unset) was "hung in NCCL init"
    lines = data("nccl-tests/autodl-2x2080ti-pcie-all_reduce_perf-single-node.txt").splitlines(True)
    header = next(i for i, ln in enumerate(lines) if "redop" in ln and "root" in ln)
    text = "".join(ln for ln in lines[: header + 2] if "NCCL version" not in ln)
    v = judge(text, rc=124, test_timeout_s=60)
    assert v.status is Status.FAIL and v.hang == "collective"
    assert v.message == (
        "all_reduce: a collective hung after the table header, before the first data row "
        "(the first collective never finished); killed after 60 s"
    )


def test_two_runs_in_one_output_say_they_cannot_be_judged():
    text = data(A3MEGA)
    v = judge(text + text, ranks=32)
    assert v.status is Status.ERROR
    host = "ztan-mig-235z"
    assert v.message == (
        f"all_reduce: the output cannot be judged: rank 0 is listed twice (on {host} and {host}): "
        "two runs in one output, not one run of their ranks together"
    ), v.message


def test_a_run_killed_before_the_rank_list_never_got_its_ranks_together():
    v = judge(cut_after(data(A3MEGA), "# nThread"), rc=124)
    assert v.hang == "init" and "before the rank list" in v.message
    nothing = judge("", rc=124)
    assert nothing.status is Status.FAIL and nothing.hang == "init"
    assert nothing.message.startswith("all_reduce: hung before printing anything")
    after_ranks = judge(cut_after(data(A3MEGA), "Rank 15"), rc=137)
    assert after_ranks.hang == "init" and "before NCCL init began" in after_ranks.message


def test_output_that_is_not_nccl_tests_is_an_error_not_a_pass():
    v = judge("sh: 1: all_reduce_perf: not found\n", rc=127)
    assert v.status is Status.ERROR and "not found" in v.message
    garbage = judge("Segmentation fault\n", rc=0)
    assert garbage.status is Status.ERROR and garbage.message.startswith("all_reduce: no nccl-tests output")


def test_a_launcher_that_refuses_to_start_is_an_error_that_quotes_it_not_a_failure():
    refusal = (
        "-" * 74 + "\nmpirun has detected an attempt to run as root.\nRunning at root is *strongly* "
        "discouraged\n" + "-" * 74 + "\n"
    )
    v = judge(refusal, rc=1)
    assert v.status is Status.ERROR
    assert v.message.endswith("exit 1: mpirun has detected an attempt to run as root."), v.message


def test_no_plateau_row_is_an_error_when_a_threshold_is_set_and_not_judged_otherwise():
    v = judge(data(RTX5090), busbw_gbps={"fail_below": 100})
    assert v.status is Status.ERROR
    assert v.message == "all_reduce: no result row at or above 1 GiB to judge (largest: 32 MiB)"
    free = judge(data(RTX5090))
    assert free.status is Status.PASS and "bandwidth not judged" in free.message


def test_an_old_error_column_run_passes_on_bandwidth():
    v = judge(data(K80), busbw_gbps={"fail_below": 2.5})
    assert v.status is Status.PASS
    assert v.message.startswith("all_reduce: busbw 2.55 GB/s (>= 2.5 GB/s) at >= 1 GiB (slowest of 2 sizes)")


def test_fewer_ranks_than_expected_fails():
    v = judge(data(A3MEGA), ranks=8)
    assert v.status is Status.FAIL and v.message == "all_reduce: 16 ranks in the output, expected 8"


def test_a_run_without_validation_is_at_best_a_warning():
    text = data(A3MEGA).replace("validation: 1", "validation: 0", 1)
    v = judge(text, busbw_gbps={"fail_below": 250})
    assert v.status is Status.WARN and "NOT validated" in v.message


def test_an_output_cut_while_the_test_exited_0_is_an_error():
    v = judge(cut_after(data(A3MEGA), "8388608       2097152"), rc=0)
    assert v.status is Status.ERROR and "stopped early" in v.message


def test_the_end_marker_missing_means_the_probe_itself_was_cut_a_hang():
    v = judge(cut_after(data(A3MEGA), "Rank 15"), rc=None)
    assert v.status is Status.FAIL and v.hang == "init"


def test_single_node_check_has_one_probe_and_one_verdict_per_variant_and_collective():
    want = NcclSingle(
        collectives=["all_reduce", "all_gather"],
        variants=["default", "network_only"],
        gpus=8,
        env={"NCCL_SOCKET_IFNAME": "ib0"},
        busbw_gbps={"fail_below": 250},
    )
    probes = nccl_allreduce.single_probes(want)
    assert [p.name for p in probes] == [
        "nccl_all_reduce",
        "nccl_all_gather",
        "nccl_all_reduce_network_only",
        "nccl_all_gather_network_only",
    ]
    argv = probes[2].argv
    # the environment on stdin, never in argv (issue 17: argv is in report.json and /proc/*/cmdline)
    assert probes[2].stdin == "NCCL_DEBUG=VERSION\nNCCL_SOCKET_IFNAME=ib0\nNCCL_P2P_DISABLE=1\nNCCL_SHM_DISABLE=1\n"
    assert not [w for w in argv if "NCCL_" in w]
    assert nccltest.command_words(argv) == (
        "all_reduce_perf",
        "-b",
        "8",
        "-e",
        "8589934592",
        "-f",
        "2",
        "-g",
        "8",
        "-n",
        "20",
        "-w",
        "5",
        "-c",
        "1",
        "-d",
        "float",
        "-o",
        "sum",
    )
    spec = all_checks()["nccl.allreduce_single"]
    out = {}
    for p in probes:
        out.update(captures(p, wrapped(data(A3MEGA), 0)))
    verdicts = list(spec.judge(out, want))
    assert [v.subject for v in verdicts] == [
        "all_reduce",
        "all_gather",
        "all_reduce (network only)",
        "all_gather (network only)",
    ]
    assert all(v.status is Status.FAIL and "16 ranks in the output, expected 8" in v.message for v in verdicts)


def test_the_jobs_nccl_debug_wins_over_the_default():
    env = nccltest.job_env({"NCCL_DEBUG": "INFO"}, "default")
    assert env["NCCL_DEBUG"] == "INFO"
    with pytest.raises(ValueError):
        nccltest.job_env({"BAD-NAME": "1"}, "default")


def test_launcher_commands_put_rank_0_on_the_first_host():
    sweep = nccltest.Sweep(max_bytes=1 << 30)
    p = nccltest.multi_node(
        "t",
        "mpirun",
        ["node1", "node2"],
        1,
        8,
        sweep,
        {"NCCL_DEBUG": "VERSION", "UCX_A": "x y"},
        300,
        launcher_args=["--allow-run-as-root"],
    )
    cmd = nccltest.command_words(p.argv)
    assert cmd[:8] == ("mpirun", "--allow-run-as-root", "-np", "2", "-H", "node1:1,node2:1", "-x", "NCCL_DEBUG")
    assert cmd[8:11] == ("-x", "UCX_A", "all_reduce_perf") and "UCX_A=x y\n" in p.stdin
    # json auto: the usage check (10 s at most, +1 s KILL grace) comes before the test and is budgeted
    assert p.timeout_s == 300 + 11 + nccltest.KILL_AFTER_S + nccltest.PROBE_SLACK_S == 331
    off = nccltest.multi_node("t", "mpirun", ["node1", "node2"], 1, 8, sweep, {}, 300, json="off")
    assert off.timeout_s == 320
    s = nccltest.multi_node("t", "srun", ["node3", "node4"], 8, 1, sweep, {}, 60, binary_dir="/opt/nccl-tests/build")
    cmd = nccltest.command_words(s.argv)
    assert cmd[:6] == (
        "srun",
        "--nodes=2",
        "--nodelist=node3,node4",
        "--ntasks=16",
        "--ntasks-per-node=8",
        "--export=ALL",
    )
    assert cmd[6] == "/opt/nccl-tests/build/all_reduce_perf" and cmd[cmd.index("-g") + 1] == "1"
    with pytest.raises(ValueError):
        nccltest.multi_node("t", "mpirun", ["-oProxyCommand=x", "node2"], 1, 8, sweep, {}, 60)
    with pytest.raises(ValueError):
        nccltest.multi_node("t", "mpirun", ["node1", "node2"], 1, 8, sweep, {}, 60, launcher_args=["a;b"])


@pytest.mark.parametrize(
    "params, words",
    [
        ({"max_bytes": 8, "min_bytes": 16}, "max_bytes (8) must be >= min_bytes (16)"),
        (
            {"max_bytes": "512M", "busbw_gbps": {"fail_below": 1}},
            "plateau_min_bytes (1 GiB) is above max_bytes (512 MiB)",
        ),
        ({"max_bytes": "8 parsecs"}, "is not a size"),
        ({"env": {"NOT-A-NAME": "1"}}, "'NOT-A-NAME' is not an environment variable name"),
        ({"env": {"NCCL_IB_DISABLE": True}}, "a YAML boolean is not an environment value"),
        ({"step_factor": 1}, "greater than or equal to 2"),
        ({"binary_dir": "relative/dir"}, "should match pattern"),
    ],
)
def test_bad_parameters_say_what_is_wrong(params, words):
    with pytest.raises(ValidationError) as e:
        NcclSingle(**params)
    assert words in str(e.value)


def test_env_values_are_taken_as_the_shell_sees_them_like_nccl_env_does():
    assert NcclSingle(env={"NCCL_IB_TIMEOUT": 22}).env == {"NCCL_IB_TIMEOUT": "22"}


def test_sizes_take_nccl_tests_suffixes_and_multi_refuses_the_nvlink_variant():
    want = NcclSingle(min_bytes="1K", max_bytes="8G", plateau_min_bytes="1GiB")
    assert (want.min_bytes, want.max_bytes, want.plateau_min_bytes) == (1024, 8 << 30, 1 << 30)
    with pytest.raises(ValidationError, match="nvlink_only is a single-node variant"):
        NcclMulti(variants=["nvlink_only"])


JSON_COMPLETE = "nccl-tests/constructed-all_reduce_perf-2node-json-v2-complete.json"
JSON_CUT = "nccl-tests/constructed-all_reduce_perf-2node-json-v2-cut-mid-results.json"
JSON_NWRONG = "nccl-tests/constructed-all_reduce_perf-2node-json-v2-nwrong.json"


def with_json(text: str, rc: int, report: str) -> str:
    return wrapped(text, rc) + f"@@nodecheck begin json\n{report}\n@@nodecheck end json rc=0\n"


def test_the_json_report_is_preferred_and_a_cut_one_falls_back_to_the_text():
    want = NcclSingle(plateau_min_bytes="64M", max_bytes="128M")
    text = cut_after(data(A3MEGA), "Rank  1 ")
    v = judge_output(with_json(text, 0, data(JSON_COMPLETE)), want, "all_reduce")
    assert v.observed["source"] == "json" and v.observed["stage"] == "done"
    assert v.status is Status.PASS and "slowest of 2 sizes" in v.message
    cut = judge_output(with_json(data(A3MEGA), 0, data(JSON_CUT)), want, "all_reduce")
    assert cut.observed["source"] == "text" and cut.observed["rows"] == 31
    wrong = judge_output(with_json(text, 0, data(JSON_NWRONG)), want, "all_reduce")
    assert wrong.status is Status.FAIL and "data corruption" in wrong.message and wrong.observed["source"] == "json"


def test_a_run_killed_after_a_rank_failed_names_that_failure():
    text = cut_after(data(FAILURE_219), "Test failure common.cu:844")
    v = judge(text, rc=124, test_timeout_s=60)
    assert v.status is Status.FAIL and v.hang == "init"
    assert v.message.endswith(
        "killed after 60 s; first failure: nccl failure at common.cu:959 on fengyun: "
        "internal error - please report this issue to the NCCL developers"
    ), v.message


# ---------------------------------------------------------------- nccl.allreduce_multi, scripted (no SSH)

TOOLS_OK = "@@nodecheck have all_reduce_perf /usr/bin/all_reduce_perf\n@@nodecheck have mpirun /usr/bin/mpirun\n"
PAIR_OK = wrapped(data(A3MEGA), 0)  # 16 ranks (2 nodes x 8 GPUs), plateau busbw 298.82 GB/s
PAIR_FAIL = wrapped(data(FAILURE_219), 1)  # Test NCCL failure, mpirun aborts


class ScriptedNccl:
    """Answers the launcher probes: a test of more than 2 nodes gets the 16-rank recording (a rank
    count that does not match: the full test fails and is localized); a pair gets `outcome(a, b)`:
    "ok", "fail", or "error" (the wrapper exits 127: no result)."""

    def __init__(self, outcome):
        self.outcome, self.log = outcome, []

    def connect(self, node, timeout_s):
        return self

    def close(self):
        pass

    def run(self, probe, timeout_s):
        cmd = nccltest.command_words(probe.argv)
        hosts = [h.split(":")[0] for h in cmd[cmd.index("-H") + 1].split(",")]
        self.log.append((probe.name, tuple(hosts), probe.timeout_s))
        what = "ok" if len(hosts) > 2 else self.outcome(*sorted(hosts))
        if what == "error":
            return Capture(
                hosts[0],
                probe.name,
                probe.argv,
                Outcome.EXITED,
                127,
                "",
                "all_reduce_perf not found (nccl-tests not installed, or set binary_dir)",
                0.01,
            )
        return Capture(
            hosts[0], probe.name, probe.argv, Outcome.EXITED, 0, PAIR_OK if what == "ok" else PAIR_FAIL, "", 0.01
        )


def run_multi(names, outcome, deadline_s: float = 3600, **params):
    cluster = ScriptedNccl(outcome)
    nodes = {name: Node(name, f"10.0.0.{i}") for i, name in enumerate(names, 1)}
    tools = {n: {"nccl_tools": Capture(n, "nccl_tools", (), Outcome.EXITED, 0, TOOLS_OK, "", 0.0)} for n in nodes}
    ctx = CheckContext(
        "nccl.allreduce_multi",
        nodes,
        tools,
        CommandRunner(cluster, time.monotonic() + deadline_s, threading.Event()),
        order=list(nodes),
    )
    want = NcclMulti(**{"busbw_gbps": {"fail_below": 250}, "json_report": "off", **params})
    got: dict[str, list] = {}
    for group, v in nccl_allreduce.allreduce_multi(ctx, want):
        for node in group:
            got.setdefault(node, []).append((v.status, v.message))
    return got, cluster.log


def bad(*culprits):
    return lambda a, b: "fail" if a in culprits or b in culprits else "ok"


def test_a_node_that_failed_only_with_the_bad_node_is_not_judged_not_failed():
    # every pair of 4; node1's tests with node3 and node4 give no result, so its only evidence is
    # the failure with node2, the bad node: that says nothing about node1
    def outcome(a, b):
        return "error" if a == "node1" and b in ("node3", "node4") else bad("node2")(a, b)

    got, _ = run_multi([f"node{i}" for i in range(1, 5)], outcome, pairing="all", max_rounds=0)
    [(status, message)] = got["node1"]
    assert status is Status.ERROR, message
    assert message == (
        "all_reduce: not judged: the 4-node test failed and failed only with bad node(s) node2; "
        "not yet tested with a good partner"
    )
    [(status, message)] = got["node2"]
    assert status is Status.FAIL
    assert message.startswith(
        "all_reduce: bad node: the 4-node test failed (16 ranks in the output, expected 32); "
        "it fails with all 3 partners, 2 of which pass with others: node1: nccl failure"
    ), message
    assert [s for s, _ in got["node3"]] == [Status.PASS] and [s for s, _ in got["node4"]] == [Status.PASS]


def test_good_nodes_whose_pair_tests_warn_are_warned_not_passed():
    got, _ = run_multi(
        [f"node{i}" for i in range(1, 9)], bad("node5"), busbw_gbps={"fail_below": 250, "warn_below": 300}
    )
    assert got["node5"][0][0] is Status.FAIL and "bad node" in got["node5"][0][1]
    for node in ("node1", "node2", "node3", "node4", "node6", "node7", "node8"):
        [(status, message)] = got[node]
        assert status is Status.WARN, (node, message)
    assert got["node1"][0][1] == (
        "all_reduce: the 8-node test failed (blamed: node5); this node's 2-node tests pass, "
        "slow with node2: busbw 298.82 GB/s; node8: busbw 298.82 GB/s (warn below 300 GB/s)"
    )


def test_pair_tests_that_gave_no_result_are_not_said_to_pass():
    got, log = run_multi([f"node{i}" for i in range(1, 5)], lambda a, b: "error")
    assert len(log) == 5  # the full test, then 2 ring rounds of 2 pairs
    for node in got:
        [(status, message)] = got[node]
        assert status is Status.FAIL
        assert message == (
            "all_reduce: 16 ranks in the output, expected 32 (4 nodes); no 2-node test gave a result; "
            "4 2-node tests could not be judged (node1+node2: could not start on node1 (exit 127): "
            "all_reduce_perf not found (nccl-tests not installed, or set binary_dir))"
        )


def test_a_variant_threshold_judges_that_variants_pair_tests():
    want = NcclMulti(
        variants=["network_only"],
        busbw_gbps={"fail_below": 400},
        pair_busbw_gbps={"fail_below": 350},
        variant_busbw_gbps={"network_only": {"fail_below": 250}},
    )
    assert want.pair_floor("network_only").fail_below == 250 and want.pair_floor("default").fail_below == 350
    got, _ = run_multi(
        [f"node{i}" for i in range(1, 9)],
        bad("node5"),
        variants=["network_only"],
        pair_busbw_gbps={"fail_below": 350},
        variant_busbw_gbps={"network_only": {"fail_below": 250}},
    )
    assert got["node5"][0][0] is Status.FAIL and "bad node" in got["node5"][0][1]
    assert all(
        got[n]
        == [
            (
                Status.PASS,
                "all_reduce (network only): the 8-node test failed; this node's 2-node tests pass (blamed: node5)",
            )
        ]
        for n in got
        if n != "node5"
    ), got


def test_a_node_name_no_launcher_can_take_is_named_not_a_crash():
    got, log = run_multi(["node1", "node2", "rack1/node3"], bad())
    assert got["rack1/node3"] == [
        (Status.ERROR, "not in the test: the node name 'rack1/node3' cannot be passed to mpirun as a host name")
    ]
    assert [s for s, _ in got["node1"]] == [Status.PASS] and [s for s, _ in got["node2"]] == [Status.PASS]
    assert [hosts for _, hosts, _ in log] == [("node1", "node2")]


def test_the_full_test_is_not_started_when_its_probe_could_outlast_the_deadline():
    # json auto: the usage check's 11 s come on top of test 300 + KILL 10 + slack 10, and 30 s stay reserved
    got, log = run_multi(
        ["node1", "node2"], bad(), deadline_s=300 + 20 + 30 + 5, json_report="auto", test_timeout_s=300
    )
    assert log == []
    assert all(v[0][0] is Status.SKIPPED and "the test may take 361 s" in v[0][1] for v in got.values()), got


@pytest.mark.parametrize(
    "params, words",
    [
        ({"pair_max_bytes": 8, "min_bytes": 64}, "pair_max_bytes (8) must be >= min_bytes (64)"),
        (
            {"pair_max_bytes": "512M", "pair_busbw_gbps": {"fail_below": 1}},
            "pair_max_bytes (512 MiB) is below plateau_min_bytes (1 GiB)",
        ),
    ],
)
def test_bad_pair_parameters_say_what_is_wrong(params, words):
    with pytest.raises(ValidationError) as e:
        NcclMulti(**params)
    assert words in str(e.value)


def test_ranks_that_print_different_nccl_versions_are_named_the_stale_image_signature():
    head = cut_after(data(A3MEGA), "Rank 15")
    info = (
        "ztan-mig-235z:6899:6899 [0] NCCL INFO NCCL version 2.29.2+cuda12.4\n"
        "ztan-mig-gq73:6733:6733 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "ztan-mig-235z:6900:6900 [1] NCCL INFO NCCL version 2.29.2+cuda12.4\n"
    )
    v = judge(head + info, rc=124)
    assert v.hang == "init" and v.message.endswith(
        " — and ranks run different NCCL versions: 2.21.5+cuda12.4 on ztan-mig-gq73, 2.29.2+cuda12.4 on "
        "ztan-mig-235z; killed after 600 s"
    )
    assert v.observed["nccl_versions"] == {"2.29.2+cuda12.4": ["ztan-mig-235z"], "2.21.5+cuda12.4": ["ztan-mig-gq73"]}
    text = data(A3MEGA).replace(
        "#\n#                                                              out-of-place",
        info + "#\n#                                                              out-of-place",
        1,
    )
    passed = judge(text, busbw_gbps={"fail_below": 250})
    assert passed.status is Status.WARN and "different NCCL versions" in passed.message


def test_the_jobs_secrets_reach_neither_the_launch_node_nor_the_report():
    """--job-env HF_TOKEN=s3cr3t NCCL_FOO=1 (issue 17, finding 3): the captured argv (report.json keeps it)
    holds neither value; NCCL_FOO reaches the launcher on stdin and is exported by name (-x); the
    report says which names stayed behind, never their values."""
    probes = []

    class Recording(ScriptedNccl):
        def run(self, probe, timeout_s):
            probes.append(probe)
            return super().run(probe, timeout_s)

    cluster = Recording(lambda a, b: "ok")
    nodes = {name: Node(name, f"10.0.0.{i}") for i, name in enumerate(["node1", "node2"], 1)}
    tools = {n: {"nccl_tools": Capture(n, "nccl_tools", (), Outcome.EXITED, 0, TOOLS_OK, "", 0.0)} for n in nodes}
    commands = CommandRunner(cluster, time.monotonic() + 3600, threading.Event())
    ctx = CheckContext("nccl.allreduce_multi", nodes, tools, commands, order=list(nodes))
    want = NcclMulti(
        busbw_gbps={"fail_below": 250},
        json_report="off",
        job_env={"HF_TOKEN": "s3cr3t", "NCCL_FOO": "1", "GITHUB_PAT": "x", "NCCL_NET_PLUGIN": "/home/u/libevil.so"},
    )
    verdicts = list(nccl_allreduce.allreduce_multi(ctx, want))
    [probe] = probes
    assert "NCCL_FOO=1\n" in probe.stdin and "s3cr3t" not in probe.stdin and "evil" not in probe.stdin
    assert ("-x", "NCCL_FOO") in zip(probe.argv, probe.argv[1:])
    assert ("-x", "NCCL_NET_PLUGIN") not in zip(probe.argv, probe.argv[1:])
    assert not [w for c in commands.captures for w in c.argv if "s3cr3t" in w or "NCCL_FOO=" in w or "evil" in w]
    assert ctx.extras["env_not_passed"] == {
        "GITHUB_PAT": "not a variable the test needs",
        "HF_TOKEN": "its name looks secret",
        "NCCL_NET_PLUGIN": LOADS_OR_WRITES,
    }
    [(group, v)] = verdicts
    assert (
        group == ("node1", "node2")
        and v.status is Status.PASS
        and v.message.endswith(
            "; the test ran without the job's NCCL_NET_PLUGIN: each "
            + LOADS_OR_WRITES
            + " (a playbook's env: may set it)"
        )
    )
    assert v.observed["env_not_passed"] == ctx.extras["env_not_passed"]

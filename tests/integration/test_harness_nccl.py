"""The simulated cluster's fake nccl-tests and launchers (tests/fakes/nccl_tests/), checked over
real SSH: the output of nccl-tests 2.17.9 / 2.18.2 against the corpus recordings, the bandwidth
model (min over nodes, NVLink vs network), corrupt and hung nodes, mpirun's and srun's process
placement, banners and exit codes, the JSON report, and that no fake process outlives a run."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from helpers import data

pytestmark = pytest.mark.integration

OLIVIA = "nccl-tests/olivia-gh200-slingshot-2.17.9-all_reduce-int8-wrong-nonzero-corruption.txt"
RTX6000D = "nccl-tests/rtx6000d-2node-2.18.2-all_reduce-nccl-version-line-unalign-concluded.txt"
MPIRUN = "mpirun --allow-run-as-root"
BUS = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
ROW = re.compile(r"^ +\d+ +\d+ ")
TABLE_HEADER = [
    "#                                                              out-of-place"
    "                       in-place          ",
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
    "     time   algbw   busbw  #wrong ",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "             (us)  (GB/s)  (GB/s)         ",
]
DAEMON_BANNER_START = (
    "-" * 74 + "\nORTE was unable to reliably start one or more daemons.\nThis usually is caused by:\n"
)


def fake_processes(cluster) -> list[int]:
    """Live processes running a node's copy of the fake (ranks, agents, launchers); zombies excluded."""
    marker = str(cluster.state_dir).encode()
    found = []
    for p in Path("/proc").iterdir():
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.startswith(marker) and a.endswith(b"/data/nccl_tests.py") for a in argv):
            found.append(int(p.name))
    return found


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if ROW.match(line)]


def rank_lines(out: str) -> list[tuple[int, int, str, int, str]]:
    """(rank, pid, host, device, bus) of every '#  Rank' line."""
    return [
        (int(m[1]), int(m[2]), m[3], int(m[4]), m[5])
        for m in re.finditer(
            r"^#  Rank +(\d+) Group  0 Pid +(\d+) on +(\S+) device +(\d+) \[0000:(..):00\] .*$", out, re.M
        )
    ]


def shape(text: str) -> list:
    """A run's lines with what differs between machines masked: pids, host names, bus ids, the
    measured numbers (a row keeps its first five columns and where every column ends)."""
    out = []
    for line in text.split("\n"):
        if ROW.match(line):
            out.append((line[:52], [m.end() for m in re.finditer(r"\S+", line)]))
        elif line.startswith("#  Rank"):
            out.append(
                re.sub(r"Pid +\d+ on +\S+ device +(\d+) \[[0-9a-f:]+\]", r"Pid PID on HOST device \1 [BUS]", line)
            )
        else:
            out.append(re.sub(r"(Avg bus bandwidth    : )[0-9.]+", r"\1X", line))
    return out


# ---- one node, one process ----------------------------------------------------------------------


def test_single_node_all_reduce_prints_the_whole_2_17_9_run(cluster):
    cluster.nccl(test_s=0.1)
    t0 = time.monotonic()
    rc, out, err = cluster.run("node1", "all_reduce_perf -b 8 -e 8G -f 2 -g 8", timeout=20)
    assert time.monotonic() - t0 >= 0.1  # the sweep "ran" test_s
    assert (rc, err) == (0, "")
    lines = out.split("\n")
    assert lines[:5] == [
        "# nccl-tests version 2.17.9 nccl-headers=22902 nccl-library=22902",
        "# Collective test starting: all_reduce_perf",
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 "
        "validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    pid = rank_lines(out)[0][1]
    assert lines[5:13] == [
        f"#  Rank {r:2d} Group  0 Pid {pid:6d} on      node1 device {r:2d} [0000:{BUS[r]}:00] NVIDIA H100 80GB HBM3"
        for r in range(8)
    ]
    assert lines[13] == "#" and lines[14:17] == TABLE_HEADER
    assert data(OLIVIA).split("\n")[22:25] == TABLE_HEADER  # the recording's own header
    table = rows(out)
    assert len(table) == 31 and [r[0] for r in table[:3]] == ["8", "16", "32"]
    # 8 GPUs over NVLink: busbw = 480 * S / (S + 16 MiB); algbw = busbw / (2*7/8); 0 wrong
    assert table[-1] == [
        "8589934592",
        "2147483648",
        "float",
        "sum",
        "-1",
        "31378.6",
        "273.75",
        "479.06",
        "0",
        "31378.6",
        "273.75",
        "479.06",
        "0",
    ]
    assert table[27] == [
        "1073741824",
        "268435456",
        "float",
        "sum",
        "-1",
        "3975.85",
        "270.07",
        "472.62",
        "0",
        "3975.85",
        "270.07",
        "472.62",
        "0",
    ]
    assert (
        "     1048576        262144     float     sum      -1    64.99   16.13   28.24       0    64.99   "
        "16.13   28.24       0\n" in out
    )
    assert lines[-7:] == [
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 147.127 ",
        "#",
        "# Collective test concluded: all_reduce_perf",
        "#",
        "",
        "",
    ]


def test_network_only_switches_a_single_node_test_to_the_network_plateau(cluster):
    cluster.nccl(test_s=0.01, nodes={"node2": {"net_busbw_gbs": 200.0}})
    cmd = "all_reduce_perf -b 1G -e 1G -g 8"
    assert rows(cluster.run("node1", cmd)[1])[0][7] == "472.62"  # NVLink: 480 plateau
    assert rows(cluster.run("node1", f"NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 {cmd}")[1])[0][7] == "364.31"  # 370
    assert rows(cluster.run("node2", f"NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 {cmd}")[1])[0][7] == "196.92"  # 200
    assert rows(cluster.run("node1", f"NCCL_P2P_DISABLE=1 {cmd}")[1])[0][7] == "472.62"  # both switches needed


def test_json_report_is_the_newest_nccl_tests_schema(cluster):
    cluster.nccl(test_s=0.01)
    rc, out, err = cluster.run("node3", "alltoall_perf -b 1M -e 4M -f 2 -g 8 -c 1 -J /root/result.json")
    assert (rc, err) == (0, "")
    assert out.startswith("# Writing JSON output to /root/result.json\n# nccl-tests version 2.17.9 ")
    raw = (cluster.node_dir("node3") / "home" / "result.json").read_text()
    assert raw.startswith('{"version":2,"start_time":"') and '"root":"    -1"' in raw and "\n" not in raw
    doc = json.loads(raw)
    assert list(doc) == [
        "version",
        "start_time",
        "args",
        "env",
        "nccl_version",
        "config",
        "results",
        "out_of_bounds",
        "average_bus_bandwidth",
        "errors",
        "end_time",
    ]
    assert doc["args"] == [
        "/usr/local/sbin/alltoall_perf",
        "-b",
        "1M",
        "-e",
        "4M",
        "-f",
        "2",
        "-g",
        "8",
        "-c",
        "1",
        "-J",
        "/root/result.json",
    ]
    assert doc["nccl_version"] == 22902 and "NCCL_P2P_DISABLE=1" not in doc["env"]
    assert doc["config"] == {
        "nthreads": 1,
        "ngpus": 8,
        "minimum_bytes": 1048576,
        "maximum_bytes": 4194304,
        "step_factor": 2,
        "warmup_iters": 1,
        "iterations": 20,
        "aggregated_iterations": 1,
        "validation": 1,
        "graph": 0,
        "blocking_collectives": "false",
        "per_iter_timing": "false",
        "parallel_init": "false",
        "devices": [
            {
                "rank": 0,
                "group": 0,
                "pid": rank_lines(out)[0][1],
                "hostname": "node3",
                "device": 0,
                "device_hex": "0000:18:00",
                "device_info": "NVIDIA H100 80GB HBM3",
            }
        ],
    }
    assert [(r["size"], r["count"], r["type"], r["redop"], r["root"]) for r in doc["results"]] == [
        (1048576, 32768, "float", "none", "    -1"),
        (2097152, 65536, "float", "none", "    -1"),
        (4194304, 131072, "float", "none", "    -1"),
    ]
    # alltoall: busbw = 480 * S/(S+16 MiB), algbw = busbw / (7/8); in-place is never checked (N/A, null)
    assert doc["results"][2]["out_of_place"] == {"time": 38.229333, "alg_bw": 109.714286, "bus_bw": 96.0, "nwrong": 0.0}
    assert doc["results"][2]["in_place"]["nwrong"] is None and doc["results"][2]["actual_iterations"] == 20
    assert rows(out)[2][-1] == "N/A" and rows(out)[2][8] == "0"
    assert doc["out_of_bounds"] == {"count": 0, "okay": "true"}
    assert doc["average_bus_bandwidth"] == {"bandwidth": 59.189542, "okay": "unchecked"}
    assert doc["errors"] == [""]
    # the file exists: nccl-tests picks the next free name; a name that is not *.json writes nothing
    assert cluster.run("node3", "alltoall_perf -b 1M -e 1M -g 8 -J /root/result.json")[1].startswith(
        "# Writing JSON output to /root/result.json.0\n"
    )
    assert cluster.run("node3", "alltoall_perf -b 1M -e 1M -g 8 -J /root/result.txt; ls /root")[1].endswith(
        "result.json\nresult.json.0\n"
    )


def test_usage_and_too_many_gpus_fail_as_nccl_tests_does(cluster):
    cluster.nccl(test_s=0.01, nodes={"node4": {"gpus": 4}})
    rc, out, _ = cluster.run("node4", "all_gather_perf -h")
    assert rc == 0 and out.startswith("USAGE: all_gather_perf \n\t[-t,--nthreads <num threads>] \n\t")
    assert "\t[-J,--output_file <file> write output to filepath, if accessible." in out and out.endswith(
        "[-h,--help]\n"
    )
    rc, out, err = cluster.run("node4", "all_reduce_perf -b 1M -e 1M -g 8")
    assert rc == 5
    assert (
        err == "Invalid number of GPUs: 8 requested but only 4 were found.\n"
        "Please check the number of processes and GPUs per process.\n"
    )
    assert out.endswith(
        "#\n# Using devices\n .. node4 pid %d: Test failure common.cu:1189\n" % int(re.search(r"pid (\d+)", out)[1])
    )
    rc, out, err = cluster.run("node4", "all_reduce_perf -b 1M -Q")
    assert (rc, err) == (0, "/usr/local/sbin/all_reduce_perf: invalid option -- 'Q'\n")
    assert out.startswith("invalid option '?'\nUSAGE: all_reduce_perf \n")


# ---- mpirun ------------------------------------------------------------------------------------


def test_mpirun_one_process_of_8_gpus_on_4_nodes_and_a_slow_node_caps_its_tests(cluster):
    cluster.nccl(
        test_s=0.05,
        nodes={
            "node3": {"net_busbw_gbs": 150.0, "nvlink_busbw_gbs": 200.0},
            "node2": {"nccl_version": "2.21.5+cuda12.4"},
        },
    )
    rc, out, err = cluster.run(
        "node1",
        f"{MPIRUN} -np 4 -N 1 -H node1,node2,node3,node4 -x NCCL_DEBUG=INFO "
        "all_reduce_perf -b 1M -e 1G -f 4 -g 8 -J /root/m.json",
        timeout=30,
    )
    assert (rc, err) == (0, "")
    ranks = rank_lines(out)
    assert [(r, h, d) for r, _, h, d, _ in ranks] == [(r, f"node{r // 8 + 1}", r % 8) for r in range(32)]
    assert len({pid for _, pid, h, _, _ in ranks}) == 4  # one process per node
    # the header is rank 0's (node1: NCCL 2.29.2); every process prints its own NCCL version at init
    assert "# nccl-tests version 2.17.9 nccl-headers=22902 nccl-library=22902\n" in out
    pids = {h: pid for _, pid, h, _, _ in ranks}
    for host, version in (("node1", "2.29.2"), ("node2", "2.21.5"), ("node3", "2.29.2"), ("node4", "2.29.2")):
        assert f"{host}:{pids[host]}:{pids[host]} [0] NCCL INFO NCCL version {version}+cuda12.4\n" in out
    # 4 nodes: every byte crosses the network; node3's 150 GB/s caps the whole test (32 ranks)
    assert rows(out)[-1] == [
        "1073741824",
        "268435456",
        "float",
        "sum",
        "-1",
        "14085.9",
        "76.23",
        "147.69",
        "0",
        "14085.9",
        "76.23",
        "147.69",
        "0",
    ]
    doc = json.loads((cluster.node_dir("node1") / "home" / "m.json").read_text())
    assert [(d["rank"], d["hostname"]) for d in doc["config"]["devices"]] == [
        (0, "node1"),
        (8, "node2"),
        (16, "node3"),
        (24, "node4"),
    ]  # first rank of each process
    # without node3: the cluster's 370; node3 alone: its NVLink 200, another node alone: 480
    assert (
        rows(
            cluster.run("node5", f"{MPIRUN} -np 2 -N 1 -H node5,node6 all_reduce_perf -b 1G -e 1G -g 8", timeout=30)[1]
        )[0][7]
        == "364.31"
    )
    assert rows(cluster.run("node3", "all_reduce_perf -b 1G -e 1G -g 8")[1])[0][7] == "196.92"
    assert rows(cluster.run("node4", "all_reduce_perf -b 1G -e 1G -g 8")[1])[0][7] == "472.62"
    assert (
        rows(
            cluster.run("node2", f"{MPIRUN} -np 2 -H node2:1,node3:1 all_reduce_perf -b 1G -e 1G -g 8", timeout=30)[1]
        )[0][7]
        == "147.69"
    )
    assert fake_processes(cluster) == []


def test_mpirun_8_single_gpu_processes_on_2_nodes_is_the_2_18_2_recordings_shape(cluster):
    """The recorded run (2 nodes x 8 ranks, nccl-tests 2.18.2, NCCL 2.30.1, NCCL_DEBUG=VERSION)."""
    cluster.nccl(test_s=0.1, tests_version="2.18.2", nccl_version="2.30.1+cuda13.0", gpu_model="NVIDIA RTX 6000D")
    rc, out, err = cluster.run(
        "node5",
        f"{MPIRUN} -np 16 -H node5:8,node6:8 -x NCCL_DEBUG=VERSION all_reduce_perf -b 1K -e 8G -f 2 -g 1",
        timeout=30,
    )
    assert (rc, err) == (0, "")
    # the recording's source dropped the empty line writeErrors() prints last
    assert shape(out)[:-1] == shape(data(RTX6000D))
    ranks = rank_lines(out)
    assert [(r, h, d) for r, _, h, d, _ in ranks] == [(r, "node5" if r < 8 else "node6", r % 8) for r in range(16)]
    assert len({pid for _, pid, _, _, _ in ranks}) == 16  # one process per rank
    assert out.count("NCCL version 2.30.1+cuda13.0\n") == 1  # VERSION: rank 0's process only


def test_corrupt_node_wrong_rows_summary_and_exit_code_in_the_2_17_9_recordings_shape(cluster):
    cluster.nccl(
        test_s=0.1,
        gpus_per_node=4,
        gpu_model="NVIDIA GH200 120GB",
        nodes={"node2": {"corrupt": True, "corrupt_from_bytes": 2 << 20}},
    )
    rc, out, err = cluster.run(
        "node1",
        f"{MPIRUN} -np 16 -H node1:4,node2:4,node3:4,node4:4 all_reduce_perf -d int8 -b 1 -e 128M -f 2 -g 1",
        timeout=30,
    )
    assert rc == 7  # testNumResults
    recorded = data(OLIVIA).split("\n")[:-2]  # the recording stops after its rows
    assert shape(out)[: len(recorded)] == shape("\n".join(recorded))
    table = rows(out)
    assert [r[8] for r in table[:21]] == ["0"] * 21  # 1 B .. 1 MiB: right
    assert [(r[0], r[8], r[12]) for r in table[21:]] == [  # from 2 MiB: S/1000+1 wrong each
        (str(s), str(s // 1000 + 1), str(s // 1000 + 1))
        for s in (2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20, 128 << 20)
    ]
    # every process traces the failure (when it gets there: anywhere after the last row)
    failures = [ln for ln in out.split("\n") if "Test failure" in ln]
    assert len(failures) == 16 and all(
        re.fullmatch(r" \.\. node[1-4] pid \d+: Test failure common\.cu:1189", f) for f in failures
    )
    assert sorted(int(f.split()[3][:-1]) for f in failures) == sorted(pid for _, pid, _, _, _ in rank_lines(out))
    tail = [ln for ln in out[out.index("# Out of bounds") :].split("\n") if ln not in failures]
    assert tail == [
        "# Out of bounds values : 224 FAILED",
        tail[1],
        "#",  # 7 rows x 2 columns x 16 processes
        "# Collective test concluded: all_reduce_perf",
        "#",
        "",
        "",
    ]
    m = re.fullmatch(
        "-" * 55 + "\nPrimary job  terminated normally, but 1 process returned\n"
        "a non-zero exit code. Per user-direction, the job has been aborted.\n"
        + "-" * 55
        + "\n"
        + "-" * 74
        + "\nmpirun detected that one or more processes exited with non-zero status, thus "
        "causing\nthe job to be terminated. The first process to do so was:\n\n"
        r"  Process name: \[\[(\d+),1\],(\d+)\]\n  Exit code:    7\n" + "-" * 74 + "\n",
        err,
    )
    assert m and 0 <= int(m[2]) < 16
    assert fake_processes(cluster) == []


@pytest.mark.parametrize("hang, expect_lines", [("start", 3), ("init", 22), ("sweep", 30)])
def test_a_hung_node_stops_the_run_where_its_fault_says_and_timeout_leaves_nothing(cluster, hang, expect_lines):
    cluster.nccl(test_s=0.2, nodes={"node2": {"hang": hang, "hang_at_bytes": 1 << 20}})
    t0 = time.monotonic()
    rc, out, err = cluster.run(
        "node1",
        f"timeout 4 {MPIRUN} -np 2 -N 1 -H node1,node2 -x NCCL_DEBUG=VERSION all_reduce_perf -b 64K -e 4M -f 2 -g 8",
        timeout=30,
    )
    assert rc == 124 and time.monotonic() - t0 < 10
    assert fake_processes(cluster) == []  # right after mpirun returned
    lines = out.split("\n")[:-1]
    assert len(lines) == expect_lines
    assert lines[2].startswith("# nThread 1 nGpus 8 minBytes 65536 maxBytes 4194304 step: 2(factor)")
    if hang == "start":  # node2's process never joins: rank 0 waits after the header
        assert lines[1] == "# Collective test starting: all_reduce_perf"
    elif hang == "init":  # it joins (rank lines) but NCCL init never completes: no row
        assert lines[3:5] == ["#", "# Using devices"] and len(rank_lines(out)) == 16
        assert lines[-1] == "NCCL version 2.29.2+cuda12.4"
    else:  # it stops answering at 1 MiB: the rows before it only
        assert [r[0] for r in rows(out)] == ["65536", "131072", "262144", "524288"]
        assert lines[-5:-4] == [TABLE_HEADER[2]]


def test_mpirun_refuses_root_and_reports_a_node_it_cannot_reach(cluster):
    cluster.nccl(test_s=0.01)
    assert cluster.run("node1", "mpirun -np 1 hostname") == (
        1,
        "",
        (
            "-" * 74 + "\nmpirun has detected an attempt to run as root.\n"
            "Running at root is *strongly* discouraged as any mistake (e.g., in\n"
            "defining TMPDIR) or bug can result in catastrophic damage to the OS\n"
            "file system, leaving your system in an unusable state.\n\n"
            "You can override this protection by adding the --allow-run-as-root\n"
            "option to your cmd line. However, we reiterate our strong advice\n"
            "against doing so - please do so at your own risk.\n" + "-" * 74 + "\n"
        ),
    )
    rc, out, err = cluster.run(
        "node1",
        "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 -H node3,node4 hostname",
        timeout=30,
    )
    assert (rc, sorted(out.split()), err) == (0, ["node3", "node4"], "")
    cluster.stop("node9")
    rc, out, err = cluster.run("node1", f"{MPIRUN} -np 2 -N 1 -H node1,node9 all_reduce_perf -g 8", timeout=30)
    assert (rc, out) == (255, "")  # ssh's exit code; no rank started
    assert err.startswith("ssh: connect to host 127.0.1.9 port 22: Connection refused\r\n" + DAEMON_BANNER_START)
    assert err.endswith("  and network routing requirements).\n" + "-" * 74 + "\n")
    assert fake_processes(cluster) == []


# ---- srun --------------------------------------------------------------------------------------


def test_srun_runs_tasks_per_node_and_reports_failed_tasks(cluster):
    cluster.nccl(test_s=0.05, nodes={"node8": {"corrupt": True}})
    rc, out, err = cluster.run(
        "node7", "srun -N 2 -w node[7-8] --ntasks-per-node=2 -l --mpi=pmix all_reduce_perf -b 1G -e 1G -g 4", timeout=30
    )
    assert rc == 7
    assert (
        err == "srun: error: node7: tasks 0-1: Exited with exit code 7\n"
        "srun: error: node8: tasks 2-3: Exited with exit code 7\n"
    )
    printed = [line[3:] for line in out.split("\n") if line.startswith("0: ")]  # -l: rank 0's lines
    assert printed[0] == "# nccl-tests version 2.17.9 nccl-headers=22902 nccl-library=22902"
    ranks = rank_lines("\n".join(printed))
    assert [(r, h, d) for r, _, h, d, _ in ranks] == [(r, "node7" if r < 8 else "node8", r % 8) for r in range(16)]
    # 2 nodes: the network's 370 GB/s plateau; node8 corrupts every row from 1 MiB
    assert rows("\n".join(printed)) == [
        [
            "1073741824",
            "268435456",
            "float",
            "sum",
            "-1",
            "5526.28",
            "194.30",
            "364.31",
            "268436",
            "5526.28",
            "194.30",
            "364.31",
            "268436",
        ]
    ]
    assert "# Out of bounds values : 8 FAILED" in printed  # 1 row x 2 x 4 processes
    assert sorted(line[:4] for line in out.split("\n") if "Test failure common.cu:1189" in line) == [
        "0:  ",
        "1:  ",
        "2:  ",
        "3:  ",
    ]
    assert fake_processes(cluster) == []


def test_scenario_action_installs_the_fakes_and_reset_removes_them(cluster):
    from harness import scenarios

    scenarios.apply(
        cluster, {"*": [scenarios.Nccl(net_busbw_gbs=300.0, test_s=0.01, nodes=(("node3", (("hang", "init"),)),))]}
    )
    spec = json.loads((cluster.state_dir / "nccl.json").read_text())
    assert spec["net_busbw_gbs"] == 300.0 and spec["nodes"] == {"node3": {"hang": "init"}}
    assert cluster.tools("node10") == [
        "all_gather_perf",
        "all_reduce_perf",
        "alltoall_perf",
        "mpirun",
        "reduce_scatter_perf",
        "srun",
    ]
    cluster.run("node3", "nohup all_reduce_perf -g 8 >/dev/null 2>&1 &")  # hangs at NCCL init
    deadline = time.monotonic() + 5
    while not fake_processes(cluster):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    cluster.reset()
    assert fake_processes(cluster) == [] and not (cluster.state_dir / "nccl.json").exists()
    assert cluster.run("node3", "all_reduce_perf")[0] == 127
    with pytest.raises(ValueError):
        cluster.nccl(nodes={"node3": {"hang": "forever"}})
    with pytest.raises(ValueError):
        cluster.nccl(nodes={"node3": {"gbps": 1.0}})

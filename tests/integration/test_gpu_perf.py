"""The GPU benchmark and the SDC screen end to end (issue 21): real sshd nodes, the real probe sent over
stdin to each node's python3, where a fake CuPy (real NumPy math, modeled device time) stands for the
GPU library, and a real nvbandwidth recording replays on the H100 boards.

harness.scenarios.GPU_PERF: six 8x H100 boards (one with a GPU 15% slow, one with a GPU that flips a
bit in every GEMM, one busy) and four 4x GB200 trays, a second model judged among themselves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from harness.scenarios import GPU_PERF, apply

# the idle guard must find no slurmd: no Slurm an earlier test left up (tests/integration/conftest.py)
pytestmark = pytest.mark.usefixtures("no_slurm")


PLAYBOOK = """\
version: 1
deadline_s: 900
checks:
  gpu.perf: {duration_s: 0.3, gemm_size: 128, dtypes: [fp16], copy_mib: 4, pcie_mib: 4, p2p_mib: 2, test_timeout_s: 120}
  gpu.sdc: {size: 96, steps: 4, test_timeout_s: 60}
"""


def run(cluster, tmp_path, book_text: str, nodes: str, *extra: str) -> tuple[int, dict]:
    book = tmp_path / f"book-{len(list(tmp_path.glob('book-*')))}.yml"
    book.write_text(book_text)
    args = ["run", str(cluster.inventory_path), "--playbook", str(book), "--nodes", nodes]
    args += ["--format", "json", "--output-dir", str(tmp_path / "reports"), *extra]
    proc = subprocess.run([sys.executable, "-m", "nodecheck", *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode != 64, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def results(doc: dict, check: str) -> dict[str, list[tuple[str, str, str]]]:
    """{node: [(status, subject, message)]} of one check's results."""
    return {
        n["node"]: [(r["status"], r.get("subject", ""), r["message"]) for r in n["results"] if r["check"] == check]
        for n in doc["nodes"]
    }


def test_the_slow_gpu_and_the_corrupting_gpu_are_named_and_the_rest_pass(cluster, tmp_path):
    apply(cluster, GPU_PERF)
    code, doc = run(cluster, tmp_path, PLAYBOOK, "node[1-10]", "--allow-disruptive")
    assert (code, doc["complete"]) == (2, True)
    perf, sdc = results(doc, "gpu.perf"), results(doc, "gpu.sdc")
    # node2's GPU5 runs at 85%: named with its value and its peers' median, measured twice
    bad = [r for r in perf["node2"] if r[0] == "fail"]
    assert bad and {s for _, s, _ in bad} == {"GPU5"}, perf["node2"]
    gemm = next(m for _, _, m in bad if "gemm_fp16" in m)  # CuPy has no bf16
    assert "15.0% below its peers' median" in gemm and "measured twice" in gemm, gemm
    assert "NVIDIA H100 80GB HBM3" in gemm, gemm
    # node3's GPU2 flips a bit in every GEMM: the SDC suspect, and only it
    [(status, subject, message)] = [r for r in sdc["node3"] if r[0] != "pass"]
    assert (status, subject) == ("fail", "GPU2"), sdc["node3"]
    assert "silent data corruption suspect" in message and "persistent" in message, message
    # the busy node is not tested, never healthy
    for check in (perf, sdc):
        [(status, _, message)] = check["node5"]
        assert status == "skipped" and "busy" in message and "GPU processes" in message, message
    # everything else passes both checks; the GB200 trays are judged among themselves
    for node in ("node1", "node4", "node6", "node7", "node8", "node9", "node10"):
        assert [s for s, _, _ in perf[node]] == ["pass"], perf[node]
        assert [s for s, _, _ in sdc[node]] == ["pass"], sdc[node]
    assert perf["node7"][0][2].startswith("4 GPUs: gemm_fp16"), perf["node7"]
    assert perf["node1"][0][2].startswith("8 GPUs: gemm_fp16"), perf["node1"]
    assert [s for s, _, _ in perf["node3"]] == ["pass"]  # a wrong answer is not a slow one
    assert [s for s, _, _ in sdc["node2"]] == ["pass"]  # nor a slow GPU a wrong one
    groups = doc["extras"]["gpu.sdc"]["groups"]
    assert len(groups) == 2 and {g["from"] for g in groups.values()} == {"majority"}, groups
    by_model = {key.split(" | ")[0].split(" ")[1]: g for key, g in groups.items()}
    assert (by_model["H100"]["gpus"], by_model["GB200"]["gpus"]) == (40, 16), groups  # node5 not tested
    # nvbandwidth's figures (a real 8x H100 run: device_to_device_memcpy_read_ce) stand for the H100
    # boards' NVLink; the rest is the probe's own
    figures = doc["extras"]["gpu.perf"]["nodes"]["node1"]["figures"]
    assert {f["source"] for f in figures if f["metric"] == "nvlink"} == {"nvbandwidth"}
    assert len([f for f in figures if f["metric"] == "nvlink"]) == 56  # every ordered pair of 8 GPUs
    assert {f["source"] for f in figures if f["metric"] != "nvlink"} == {"probe"}
    gb200 = doc["extras"]["gpu.perf"]["nodes"]["node7"]["figures"]
    assert {f["source"] for f in gb200} == {"probe"}  # no nvbandwidth there: the probe's own copies


def test_the_benchmark_runs_in_the_jobs_image_when_asked(cluster, tmp_path):
    apply(cluster, GPU_PERF)
    book = PLAYBOOK.replace(
        "test_timeout_s: 120}",
        "test_timeout_s: 120, container: {image: 'registry.local/train:24.10', runtime: docker}}",
    )
    code, doc = run(cluster, tmp_path, book, "node6", "--allow-disruptive")
    assert [s for s, _, _ in results(doc, "gpu.perf")["node6"]] == ["pass"], results(doc, "gpu.perf")
    argv = (Path(cluster.node_dir("node6")) / "data" / "docker-run.args").read_text().split("\n")
    assert argv[:17] == [
        "run", "--rm", "-i", "--gpus", "all", "--network", "none",
        "--user", "65534:65534", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",  # never as root
        "--entrypoint", "python3", "registry.local/train:24.10", "-",
    ]  # fmt: skip
    assert "--mode" in argv


def test_without_allow_disruptive_nothing_runs_and_nothing_passes(cluster, tmp_path):
    apply(cluster, GPU_PERF)
    code, doc = run(cluster, tmp_path, PLAYBOOK, "node1")
    assert code == 3
    for check in ("gpu.perf", "gpu.sdc"):
        [(status, _, message)] = results(doc, check)["node1"]
        assert status == "skipped" and "--allow-disruptive" in message, message


def test_baseline_pins_the_checksum_a_known_good_node_computed_and_a_run_judges_by_it(cluster, tmp_path):
    apply(cluster, GPU_PERF)
    book = tmp_path / "sdc.yml"
    book.write_text("version: 1\ndeadline_s: 300\nchecks:\n  gpu.sdc: {size: 96, steps: 4, test_timeout_s: 60}\n")
    base = [sys.executable, "-m", "nodecheck", "baseline", str(cluster.inventory_path), "--nodes", "node1"]
    refused = subprocess.run([*base, "--sdc", str(book)], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 64 and "--allow-disruptive" in refused.stderr, refused.stderr
    proc = subprocess.run(
        [*base, "--sdc", str(book), "--allow-disruptive"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("  gpu.sdc:")]
    assert (
        line.startswith('  gpu.sdc: {reference: {"NVIDIA H100 80GB HBM3 80 GiB cc 9.0 | cupy ')
        and "fp32 96x96 x4" in line
    )
    pins = tmp_path / "pins.yml"
    pins.write_text(proc.stdout)
    code, doc = run(cluster, tmp_path, book.read_text() + "include: [pins.yml]\n", "node3", "--allow-disruptive")
    [group] = doc["extras"]["gpu.sdc"]["groups"].values()
    assert group["from"] == "reference"
    [(status, subject, message)] = [r for r in results(doc, "gpu.sdc")["node3"] if r[0] != "pass"]
    assert (status, subject) == ("fail", "GPU2") and "the pinned reference" in message, message

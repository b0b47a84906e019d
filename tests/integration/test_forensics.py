"""`nodecheck forensics` on the simulated cluster: real Python ranks (tests/fakes/hung_rank.py) blocked in
functions named like collectives inside the nodes' namespaces, the real py-spy dumping them over real
SSH, flight-recorder dumps where the ranks' TORCH_FR_DUMP_TEMP_FILE says (tests/data/flight-recorder),
a rank frozen in the kernel (cgroup freezer: py-spy gets no answer). One test per scenario of the
issue: mismatched collectives (the epoch-end deadlock), a missing rank, a dead rank, all ranks in the
same collective, no collective ever ran; plus a malicious dump refused, an unreachable node, --dumps
alone, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from integration.runs import nodecheck

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data" / "flight-recorder"
PREFIX = "/root/fr/trace_rank_"
ENV = {"TORCH_FR_DUMP_TEMP_FILE": PREFIX, "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
NODES = ["node1", "node2"]


def start(cluster, collective_of, world: int = 8, skip=(), extra=None) -> dict[int, int]:
    """Ranks 0..world-1, half on node1 and half on node2 (as torchrun: GROUP_RANK = rank // per node),
    each blocked in collective_of(rank), ranks in `skip` never started; {rank: pid}."""
    cluster.install_pyspy()
    per_node, pids = world // len(NODES), {}
    for k, node in enumerate(NODES):
        ranks = [
            {"rank": r, "local_rank": r - k * per_node, "collective": collective_of(r), **(extra or {}).get(r, {})}
            for r in range(k * per_node, (k + 1) * per_node)
            if r not in skip
        ]
        pids.update(cluster.start_ranks(node, ranks, world_size=world, env=ENV))
    return pids


def place_dumps(cluster, scenario: str, world: int = 8, json_form: bool = False, replace=None) -> None:
    """The scenario's dump of each rank where that rank's TORCH_FR_DUMP_TEMP_FILE says, on its node."""
    per_node = world // len(NODES)
    folder = DATA / scenario / ("json" if json_form else "")
    for k, node in enumerate(NODES):
        files = {
            r: (replace or {}).get(r, folder / f"nccl_trace_rank_{r}") for r in range(k * per_node, (k + 1) * per_node)
        }
        cluster.place_dumps(node, files, prefix=PREFIX)


def forensics(cluster, tmp_path, *extra, timeout=120):
    code, out, err, _ = nodecheck(
        "forensics",
        str(cluster.inventory_path),
        "--nodes",
        "node[1-2]",
        "--match",
        "train\\.py",
        "--stack-timeout",
        "3",
        "--output-dir",
        str(tmp_path / "reports"),
        "--format",
        "json",
        *extra,
        timeout=timeout,
    )
    assert code != 64, err
    doc = json.loads(out)
    return code, doc, Path(doc["record"]) if doc.get("record") else None


def running(program: Path) -> list[int]:
    """Processes whose argv holds this program (the simulated nodes share the host's PID namespace)."""
    pids = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and str(program).encode() in (p / "cmdline").read_bytes().split(b"\0"):
                pids.append(int(p.name))
        except OSError:
            pass
    return pids


def rank_of(groups, rank: int) -> dict:
    return next(g for g in groups if rank in g["ranks"])


def test_mismatched_collectives_the_epoch_end_deadlock(cluster, tmp_path):
    """Rank 3 left its loop early and sits in an all_reduce of 1 element while ranks 0-2,4-7 are in the
    next all_gather: the recorded gloo dumps (torch 2.13) and the stacks agree; rank 3 on node1 GPU3."""
    start(cluster, lambda r: "all_reduce" if r == 3 else "all_gather", extra={3: {"via_aggregate": True}})
    place_dumps(cluster, "mismatched")
    code, doc, record = forensics(cluster, tmp_path)
    d = doc["diagnosis"]
    assert code == 0 and d["class"] == "mismatched collectives"
    assert d["culprit_ranks"] == [3] and d["culprit_nodes"] == ["node1"]
    assert d["basis"] == "flight recorder and the stacks"
    assert d["evidence"][0] == (
        "pg 0 seq 6: ranks 0-2,4-7 in all_gather [64], rank 3 (node1 GPU3) in all_reduce [1] "
        "\u2014 mismatched collectives; rank 3 left the loop early"
    )
    assert "job.data_balance" in d["next_step"]
    majority, odd = rank_of(doc["stack_groups"], 0), rank_of(doc["stack_groups"], 3)
    assert majority["ranks"] == [0, 1, 2, 4, 5, 6, 7] and majority["nodes"] == ["node1", "node2"]
    assert majority["frames"][:3] == [
        "wait (distributed_c10d.py:13)",
        "all_gather (distributed_c10d.py:33)",
        "train (training.py:20)",
    ]
    assert odd["ranks"] == [3] and "_aggregate_total_loss (engine.py:" in " ".join(odd["frames"])
    assert odd["text"].startswith("rank 3 (node1 GPU3) in ")
    # the record holds every raw dump and stack
    assert json.loads((record / "forensics.json").read_text())["diagnosis"]["class"] == "mismatched collectives"
    assert len(list((record / "dumps").rglob("*trace_rank_*"))) == 8
    assert len(list((record / "stacks").rglob("pid-*.txt"))) == 8
    assert (DATA / "mismatched" / "nccl_trace_rank_3").read_bytes() in [
        f.read_bytes() for f in (record / "dumps" / "node1").iterdir()
    ]
    assert "Thread" in next((record / "stacks" / "node2").iterdir()).read_text()


def test_a_missing_rank_that_does_not_answer_py_spy(cluster, tmp_path):
    """Rank 2 (node2 GPU0) never joined all_reduce seq 21 (recorded dumps) and is frozen in the kernel:
    py-spy gets no answer within the timeout, which the report says with the process state."""
    pids = start(cluster, lambda r: "all_reduce", world=4)
    cluster.freeze_ranks("node2", [pids[2]])
    place_dumps(cluster, "missing-rank", world=4)
    code, doc, record = forensics(cluster, tmp_path)
    d = doc["diagnosis"]
    assert code == 0 and d["class"] == "a rank missing or dead"
    assert d["culprit_ranks"] == [2] and d["culprit_nodes"] == ["node2"]
    assert d["evidence"][0].startswith(
        "pg 0 seq 21: ranks 0-1,3 (node1 GPU0, node1 GPU1, node2 GPU1) in all_reduce [1024]"
    )
    assert "rank 2 (node2 GPU0) never joined (last completed seq 20)" in d["evidence"][0]
    silent = rank_of(doc["stack_groups"], 2)
    assert silent["ranks"] == [2] and "py-spy got no answer within 3 s" in silent["failure"]
    assert "D (disk sleep)" in silent["failure"] and "stuck below Python" in silent["failure"]
    assert rank_of(doc["stack_groups"], 0)["ranks"] == [0, 1, 3]
    assert "drain" in d["next_step"] and "node2" in d["next_step"]


def test_a_dead_rank_no_dumps_only_the_stacks(cluster, tmp_path):
    """Rank 6's process is gone (no flight recorder): the other seven wait in all_reduce; the world size
    says rank 6 is missing and torchrun's layout (GROUP_RANK) says it ran on node2."""
    start(cluster, lambda r: "all_reduce", skip={6})
    code, doc, _ = forensics(cluster, tmp_path)
    d = doc["diagnosis"]
    assert code == 0 and d["class"] == "a rank missing or dead" and d["basis"] == "stacks"
    assert d["culprit_ranks"] == [6] and d["culprit_nodes"] == ["node2"]
    assert any("no process holds rank 6 of the world size 8; rank 6 ran on node2" in e for e in d["evidence"])
    assert any("no flight-recorder dump found" in n for n in doc["notes"])


def test_all_ranks_in_the_same_collective_look_at_the_network(cluster, tmp_path):
    start(cluster, lambda r: "all_reduce")
    place_dumps(cluster, "same-collective")
    code, doc, _ = forensics(cluster, tmp_path)
    d = doc["diagnosis"]
    assert code == 0 and d["class"] == "all ranks in the same collective" and d["culprit_ranks"] == []
    assert "all 8 ranks in all_reduce [1024]" in d["evidence"][0]
    assert "--playbook fabric --nodes 'node[1-2]'" in d["next_step"]
    assert [g["ranks"] for g in doc["stack_groups"]] == [list(range(8))]


def test_no_collective_ever_ran_rendezvous_or_init(cluster, tmp_path):
    start(cluster, lambda r: "none")
    place_dumps(cluster, "never-started", json_form=True)
    code, doc, _ = forensics(cluster, tmp_path)
    d = doc["diagnosis"]
    assert code == 0 and d["class"] == "no collective ever ran"
    assert d["evidence"][0] == "pg (unnamed): no collective ever ran on any of 8 ranks \u2014 rendezvous or init"
    assert all(x["format"] == "json" for x in doc["dumps"]) and len(doc["dumps"]) == 8
    assert "MASTER_ADDR" in d["next_step"]


def test_a_malicious_dump_is_refused_never_run(cluster, tmp_path):
    """Rank 0's "dump" is a pickle that would run `touch /tmp/nodecheck-fr-pwned-os-system` if unpickled
    with the full unpickler: refused and reported; the other seven dumps still give the verdict."""
    pwned = Path("/tmp/nodecheck-fr-pwned-os-system")
    pwned.unlink(missing_ok=True)
    start(cluster, lambda r: "all_reduce" if r == 3 else "all_gather")
    place_dumps(cluster, "mismatched", replace={0: DATA / "bad" / "malicious-os-system.pkl"})
    code, doc, _ = forensics(cluster, tmp_path)
    assert not pwned.exists()
    bad = [x for x in doc["dumps"] if not x["read"]]
    assert len(bad) == 1 and "refused" in bad[0]["error"] and "os.system" in bad[0]["error"]
    assert any("trace_rank_0" in n and "refused" in n for n in doc["notes"])
    assert doc["diagnosis"]["class"] == "mismatched collectives" and doc["diagnosis"]["culprit_ranks"] == [3]


def test_a_node_without_py_spy_still_gets_the_flight_recorder_verdict(cluster, tmp_path):
    start(cluster, lambda r: "all_reduce" if r == 3 else "all_gather")
    place_dumps(cluster, "mismatched")
    cluster.remove_tool("node2", "py-spy")
    code, doc, _ = forensics(cluster, tmp_path)
    assert code == 0 and doc["diagnosis"]["class"] == "mismatched collectives"
    assert doc["diagnosis"]["culprit_ranks"] == [3] and doc["diagnosis"]["basis"] == "flight recorder and the stacks"
    missing = rank_of(doc["stack_groups"], 4)
    assert (
        missing["ranks"] == [4, 5, 6, 7]
        and missing["failure"] == "py-spy is not installed on the node (pip install py-spy)"
    )
    assert doc["nodes"]["node2"]["pyspy"] is None and doc["nodes"]["node1"]["pyspy"].startswith("py-spy ")
    assert "node2: no stacks: py-spy is not installed on the node (pip install py-spy)" in doc["notes"]


def test_an_unreachable_node_is_reported_and_the_rest_still_judged(cluster, tmp_path):
    start(cluster, lambda r: "all_reduce" if r == 3 else "all_gather")
    place_dumps(cluster, "mismatched")
    cluster.stop("node2")
    code, doc, _ = forensics(cluster, tmp_path, "--connect-timeout", "3")
    assert doc["nodes"]["node2"]["reached"] is False
    assert any(e.startswith("not reached: node2") for e in doc["diagnosis"]["evidence"])
    # node1's four dumps alone: rank 3 against ranks 0-2, with 4-7 missing their dumps
    assert doc["diagnosis"]["class"] == "mismatched collectives" and doc["diagnosis"]["culprit_ranks"] == [3]
    assert {x["rank"] for x in doc["dumps"]} == {0, 1, 2, 3}


def test_dumps_alone_offline(tmp_path):
    """--dumps DIR without a job: the issue's own example, built to the 2.4 schema, 16 ranks."""
    node_dir = tmp_path / "dumps" / "gpu-a07"
    node_dir.mkdir(parents=True)
    for f in (DATA / "built-2.4-mismatched").glob("nccl_trace_rank_*"):
        (node_dir / f.name).write_bytes(f.read_bytes())
    code, out, err, _ = nodecheck(
        "forensics", "--dumps", str(tmp_path / "dumps"), "--output-dir", str(tmp_path / "reports")
    )
    assert code == 0, err
    assert "verdict: mismatched collectives; culprit rank 3 (from the flight recorder)" in out
    assert "pg 0 seq 3851: ranks 0-2,4-15 in reduce_scatter [2048x4096], rank 3 in all_reduce [1]" in out
    record = Path(out.rsplit("record: ", 1)[1].strip())
    assert len(list((record / "dumps" / "gpu-a07").iterdir())) == 16


def test_bad_input_names_the_fix(tmp_path):
    code, _, err, _ = nodecheck("forensics")
    assert code == 64 and "--slurm-job ID" in err
    code, _, err, _ = nodecheck("forensics", "hosts.yml")
    assert code == 64 and "--match PATTERN" in err
    code, _, err, _ = nodecheck("forensics", "--dumps", str(tmp_path / "nope"))
    assert code == 64 and "not a directory" in err


def test_the_node_context_gpus_xid_and_nccl_warnings(cluster, tmp_path):
    """The epoch-end power-deadlock telemetry (one GPU idle, the rest busy at low power), an Xid during
    the job and the job log's NCCL WARN lines are in the culprit node's context."""
    import datetime as dt

    start(cluster, lambda r: "all_reduce" if r == 3 else "all_gather")
    place_dumps(cluster, "mismatched")
    now = dt.datetime.now(dt.timezone.utc).astimezone().isoformat(timespec="microseconds").replace(".", ",", 1)
    for node in NODES:
        rows = "".join(
            f"{g}, {0 if (node, g) == ('node1', 3) else 100}, 190.5, 1100.00, 61000, 81559\n" for g in range(4)
        )
        cluster.fake_output(node, "nvidia-smi", rows)
    # one line as `dmesg --time-format iso` prints it (format of tests/data/dmesg-xid); CONSTRUCTED inline
    cluster.fake_output(
        "node1", "dmesg", f"{now} NVRM: Xid (PCI:0000:9b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n"
    )
    (cluster.node_dir("node1") / "home" / "train.log").write_text(
        "step 10 loss 2.1\n"
        "node1:4242:4301 [3] NCCL WARN [Service thread] Accept failed Resource temporarily unavailable\n"
    )
    code, doc, record = forensics(cluster, tmp_path, "--log", "/root/train.log")
    n1 = doc["nodes"]["node1"]
    assert [g["util_pct"] for g in n1["gpus"]] == [100, 100, 100, 0] and n1["gpus"][3]["power_w"] == 190.5
    assert n1["xids"] == [
        f"Xid 79 (GPU has fallen off the bus) on GPU 0000:9b:00 at {n1['xids'][0].rsplit(' at ', 1)[1]}"
    ]
    assert n1["nccl_warns"] == [
        "node1:4242:4301 [3] NCCL WARN [Service thread] Accept failed Resource temporarily unavailable"
    ]
    assert doc["nodes"]["node2"]["xids"] == [] and doc["nodes"]["node2"]["log_error"] == "/root/train.log: no such file"
    ev = doc["diagnosis"]["evidence"]
    assert any(e.startswith("node1: Xid 79") for e in ev) and any("NCCL WARN" in e for e in ev)
    summary = (record / "summary.txt").read_text()
    assert "node1: 4 GPUs: util 100% (GPU3 0%), power 190.5 W of 1100 W; Xid 79" in summary


def test_a_slurm_job_by_id_its_ranks_from_srun(cluster, tmp_path):
    """A real Slurm job: srun starts 2 tasks on each of node1 and node2; task 2 waits in broadcast, the
    rest in all_reduce. --slurm-job finds the nodes with scontrol and the ranks by SLURM_JOB_ID in
    their environment (the batch script and the srun client, which carry SLURM_PROCID too, are no ranks)."""
    import time as _time

    cluster.slurm_up(nodes=2)
    cluster.install_pyspy()
    fake = Path(__file__).resolve().parents[1] / "fakes" / "hung_rank.py"
    script = tmp_path / "job.sbatch"
    script.write_text(
        "#!/bin/sh\nexec srun --ntasks-per-node=2 sh -c 'exec /usr/bin/python3 -I "
        f'{fake} train.py --collective $([ "$SLURM_PROCID" = 2 ] && echo broadcast || echo all_reduce)\'\n'
    )
    script.chmod(0o755)
    out_file = tmp_path / "job.out"
    jobid = cluster.sbatch(
        "-N", "2", "--ntasks-per-node=2", "-w", "node[1-2]", "-o", str(out_file), str(script), wrap=None
    )
    deadline = _time.monotonic() + 20
    while len(running(fake)) < 4:
        assert _time.monotonic() < deadline and cluster.job(jobid)["JobState"] in ("PENDING", "RUNNING"), (
            out_file.read_text() if out_file.exists() else "",
            cluster.job(jobid),
        )
        _time.sleep(0.1)
    _time.sleep(0.5)  # the stacks in place
    try:
        code, out, err, _ = nodecheck(
            "forensics",
            str(cluster.inventory_path),
            "--slurm-job",
            str(jobid),
            "--stack-timeout",
            "3",
            "--output-dir",
            str(tmp_path / "reports"),
            "--format",
            "json",
            timeout=120,
            env=cluster.slurm_env(),
        )
        assert code == 0, err
        doc = json.loads(out)
    finally:
        cluster.slurm_command("scancel", str(jobid))
    d = doc["diagnosis"]
    assert d["class"] == "mismatched collectives" and d["culprit_ranks"] == [2] and d["culprit_nodes"] == ["node2"]
    assert sorted(p["rank"] for p in doc["processes"] if p["rank"] is not None) == [0, 1, 2, 3]
    assert rank_of(doc["stack_groups"], 0)["ranks"] == [0, 1, 3]


SECRET_MARKER = "NODECHECK-ROOT-ONLY-SECRET-7f3a"


def test_a_hostile_job_user_gets_root_only_files_refused_never_copied(cluster, tmp_path):
    """Issue 17, finding 1, as a job user would try it: a process of the job, run as nobody, whose
    TORCH_FR_DUMP_TEMP_FILE names a root-only file (/root/secret/shado -> /root/secret/shadow, 0600 root),
    and a symlink /tmp/nccl_trace_rank_0 -> that file (c10d's default prefix). Neither is copied: each
    is a dump refused with its reason; the record and the output hold no byte of it; the rank's command
    line (--hf-token) is redacted; the real ranks' dumps still give the verdict."""
    import os
    import subprocess
    import sys
    import time

    start(cluster, lambda r: "all_reduce", world=4)
    place_dumps(cluster, "missing-rank", world=4)
    secret_dir = cluster.node_dir("node1") / "home" / "secret"
    secret_dir.mkdir(mode=0o700)
    (secret_dir / "shadow").write_text(f"root:{SECRET_MARKER}:19000:0:99999:7:::\n")
    (secret_dir / "shadow").chmod(0o600)
    link = Path("/tmp/nccl_trace_rank_0")
    assert not link.exists() and not link.is_symlink(), "a stale /tmp/nccl_trace_rank_0 on this host"
    link.symlink_to("/root/secret/shadow")
    os.lchown(link, 65534, 65534)
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    hostile = subprocess.Popen(
        [
            "nsenter",
            "-t",
            str(cluster.pid("node1")),
            "-u",
            "-m",
            "-n",
            "--wd=/",
            "--",
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/env",
            "-i",
            "PATH=/usr/bin:/bin",
            "TORCH_FR_DUMP_TEMP_FILE=/root/secret/shado",
            "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
            python,
            "-I",
            "-c",
            "import time; time.sleep(600)",
            "train.py",
            "--hf-token",
            "hf_SECRETVALUE123",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while b"train.py" not in Path(f"/proc/{hostile.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        code, doc, record = forensics(cluster, tmp_path)
    finally:
        hostile.kill()
        hostile.wait()
        link.unlink()
    refused = {(d["node"], d["path"]): d for d in doc["dumps"] if not d["read"]}
    assert (
        refused[("node1", "/root/secret/shadow")]["error"]
        == "refused: owned by uid 0, not by the rank that names it (uid 65534)"
    )
    assert refused[("node1", "/tmp/nccl_trace_rank_0")]["error"] == "refused: a symbolic link, not followed"
    assert refused[("node2", "/tmp/nccl_trace_rank_0")]["error"] == "refused: a symbolic link, not followed"
    assert all(d["file"] is None for d in refused.values())
    assert any(
        n == "dump /tmp/nccl_trace_rank_0 on node1: refused: a symbolic link, not followed" for n in doc["notes"]
    )
    on_disk = b"".join(p.read_bytes() for p in record.rglob("*") if p.is_file())
    assert SECRET_MARKER.encode() not in on_disk and SECRET_MARKER not in json.dumps(doc)
    assert b"hf_SECRETVALUE123" not in on_disk and "hf_SECRETVALUE123" not in json.dumps(doc)
    (args,) = [p["args"] for p in doc["processes"] if "--hf-token" in p["args"]]
    assert args.endswith("train.py --hf-token <redacted>")
    # the real ranks' four dumps: read, kept, and the verdict
    assert sum(1 for d in doc["dumps"] if d["read"]) == 4
    assert (
        code == 0 and doc["diagnosis"]["class"] == "a rank missing or dead" and doc["diagnosis"]["culprit_ranks"] == [2]
    )

"""The Slurm gate against a real Slurm 22.05 (slurmctld + one slurmd per simulated node, munge):
slurm.conf names nodecheck's console scripts (Prolog=.../nodecheck-prolog, PrologSlurmctld=
.../nodecheck-prolog-slurmctld), and slurmd runs them inside each node's namespaces, where the
node's fake GPU and IB tools answer. Their options come from nodecheck.yml beside slurm.conf, as
on a real cluster. HealthCheckProgram is run the way slurmd runs it (cluster.run_on_node)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import yaml
from harness.scenarios import NCCL_STALE, NVML_HEALTHY, NVML_REMAP_PENDING, Fabric, apply, gpu_node, node_os
from harness.sim_playbooks import shipped_for_sim
from integration.runs import nodecheck

from nodecheck.app.slurm import is_ours
from nodecheck.core.hostlist import expand
from nodecheck.parsers.slurm import reason_body, reason_mark

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent  # the venv's console scripts
PROLOG = BIN / "nodecheck-prolog"
PROLOG_SLURMCTLD = BIN / "nodecheck-prolog-slurmctld"
HEALTH = BIN / "nodecheck-health"
ALL = [f"node{i}" for i in range(1, 11)]  # 10 nodes: the breaker judges runs of >= 10

# every node fails the same pin: a bad config, not ten bad nodes
ALL_FAIL = """version: 1
deadline_s: 20
gate: {settle_s: 8}         # the job's ten Prologs start within a few seconds on 2 cores
checks:
  kernel.version: {expect: "0.0.0-no-such-kernel"}
"""


def M(body: str) -> str:
    """The reason nodecheck writes for this body (no drain_token): its mark, then the text."""
    return f"nodecheck[{reason_mark(body)}]: {body}"


def _ours(reason: str, starts: str) -> bool:
    """A reason nodecheck set whose text starts so."""
    return is_ours(reason) and reason_body(reason).startswith(starts)


def _config(work: Path, **sections) -> str:
    # a shipped playbook named by name runs as the simulated nodes can meet it (harness/sim_playbooks.py)
    for section in sections.values():
        if isinstance(section, dict) and section.get("playbook") in ("prolog", "health"):
            section["playbook"] = str(shipped_for_sim(section["playbook"], work))
    return yaml.safe_dump({"output_dir": str(work / "reports"), "log_file": str(work / "gate.log"), **sections})


def _write_config(cluster, work: Path, **sections) -> None:
    """nodecheck.yml beside slurm.conf, read afresh by every run: beside $SLURM_CONF for the node
    Prolog, and in /etc/slurm (the harness binds its etc/ there) for PrologSlurmctld and the
    health check, whose environment has no SLURM_CONF."""
    for folder in (cluster.slurm_conf.parent, cluster.slurm_dir / "etc"):
        (folder / "nodecheck.yml").write_text(_config(work, **sections))


def _events(work: Path, action: str) -> list[dict[str, str]]:
    """The gate log's lines of one action, as {field: value}."""
    log = work / "gate.log"
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        fields = dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line))
        if fields.get("action") == action:
            out.append({k: json.loads(v) if v.startswith('"') else v for k, v in fields.items()})
    return out


def _why(cluster, work: Path, job: dict[str, str]) -> str:
    """What a failed assertion on a gated job should show: the job, the gate log, node3, Slurm's logs."""
    log = work / "gate.log"
    gate_log = log.read_text() if log.exists() else "(no gate log)"
    return f"job: {job}\ngate.log:\n{gate_log}\nnode3: {cluster.node('node3')}\n{cluster.slurm_logs(40)}"


@pytest.fixture
def work(tmp_path):
    os.chmod(tmp_path, 0o755)  # the nodes' Prologs write reports and the log here
    return tmp_path


@pytest.fixture
def slurm(cluster, work):
    """Slurm on all ten nodes with nodecheck as the node Prolog; every node a healthy 8x H100."""
    apply(cluster, {n: gpu_node() + node_os(real_slurmd=True) for n in ALL})
    cluster.slurm_up(ALL, prolog=PROLOG)
    cluster.slurm_reset()
    _write_config(cluster, work, prolog={"playbook": "prolog"}, health={"playbook": "health"})
    yield cluster
    cluster.slurm_command("scancel", "--user=root", check=False)
    # down, not left up: a HealthCheckProgram every 5 s on ten nodes would load the later tests
    cluster.slurm_down()


def test_a_job_on_healthy_nodes_runs_and_each_node_kept_its_report(slurm, work):
    # (by default a run where everything passed keeps no report: one per job and node adds up)
    _write_config(slurm, work, keep_reports="always", prolog={"playbook": "prolog"})
    job = slurm.sbatch("-N4")
    done = slurm.wait_job(job, timeout=60)
    assert (done["JobState"], done["Restarts"], done["NodeList"]) == ("COMPLETED", "0", "node[1-4]")
    # <UTC stamp>_<playbook>_<node>_job<id>; the four Prologs' stamps may differ by a second
    reports = {re.sub(r"^\d{8}T\d{6}Z_", "", p.name): p for p in (work / "reports").iterdir()}
    assert sorted(reports) == [f"prolog_node{i}_job{job}" for i in range(1, 5)]
    doc = json.loads((reports[f"prolog_node3_job{job}"] / "report.json").read_text())
    assert (doc["nodes"][0]["node"], doc["nodes"][0]["healthy"]) == ("node3", True)
    assert _events(work, "drain") == [] and slurm.slurm_nodes()["node3"] == "IDLE"


def test_a_failing_node_is_drained_with_its_reason_and_the_job_completes_elsewhere(slurm, work):
    slurm.fake_nvml("node3", NVML_REMAP_PENDING)
    job = slurm.sbatch("-N4")
    done = slurm.wait_job(job, timeout=90)
    # (a rare CI run saw COMPLETED with Restarts=0: on failure, say everything that would tell why)
    assert done["JobState"] == "COMPLETED" and int(done["Restarts"]) >= 1, _why(slurm, work, done)
    assert "node3" not in expand(done["NodeList"]) and len(expand(done["NodeList"])) == 4, _why(slurm, work, done)
    node3 = slurm.node("node3")
    assert "DRAIN" in node3["State"]
    assert node3["ReasonText"] == M(
        "gpu.health GPU3: row remap pending (correctable 0, uncorrectable 4); reset the GPU before the next job"
    )
    [drain] = _events(work, "drain")
    assert (drain["node"], drain["job"], drain["check"]) == ("node3", str(job), "gpu.health")
    assert Path(drain["evidence"]).is_file()  # the capture the verdict was judged on

    # repaired: the health check (as slurmd runs it: SLURMD_NODENAME only, no PATH) resumes it
    slurm.fake_nvml("node3", NVML_HEALTHY)
    rc, out, err = slurm.run_on_node("node3", [str(HEALTH)])
    assert rc == 0, out + err
    assert out.startswith("nodecheck health node3: PASS; resume node3 (report ")
    assert slurm.wait_node("node3", lambda n: n["State"] == "IDLE")["Reason"] == ""
    [resume] = _events(work, "resume")
    assert resume["node"] == "node3" and _ours(resume["reason"], "gpu.health GPU3")


def test_an_operators_drain_is_never_overwritten_nor_resumed(slurm, work):
    slurm.drain("node5", "operator: replacing a fan")
    slurm.fake_nvml("node5", NVML_REMAP_PENDING)
    rc, out, err = slurm.run_on_node("node5", [str(HEALTH)])
    assert rc == 2, out + err
    assert "left as is (drained by someone else): node5" in out
    assert slurm.node("node5")["ReasonText"] == "operator: replacing a fan"
    [left] = _events(work, "left")
    assert left["node"] == "node5" and "operator: replacing a fan" in left["reason"]

    slurm.fake_nvml("node5", NVML_HEALTHY)
    rc, out, err = slurm.run_on_node("node5", [str(HEALTH)])
    assert rc == 0, out + err
    node5 = slurm.node("node5")
    assert ("DRAIN" in node5["State"], node5["ReasonText"]) == (True, "operator: replacing a fan")
    assert _events(work, "resume") == []


def test_sweep_resume_resumes_only_nodecheck_drains(slurm, work):
    slurm.drain("node3", M("gpu.health GPU3: row remap pending"))  # what the Prolog left
    slurm.drain("node5", "operator: replacing a fan")
    slurm.drain("node6", M("nccl.allreduce_multi bad node"))  # not in this playbook
    rma = "nodecheck: gpu.health GPU3 held for RMA #4711 - do not resume"  # an operator's, in the old form
    slurm.drain("node2", rma)
    code, out, err, _ = nodecheck(
        "sweep",
        str(slurm.inventory_path),
        "--playbook",
        str(shipped_for_sim("health", work)),
        "--nodes",
        "node[1-6]",
        "--resume",
        "--output-dir",
        str(work / "reports"),
        "--log-file",
        str(work / "gate.log"),
        env=slurm.slurm_env(),
    )
    assert code == 0, out + err
    assert "gate: node3 resumed" in out
    assert "gate: node6 stays drained: drained for nccl.allreduce_multi, which this run did not check" in out
    assert f"gate: node2 stays drained: drained with an unmarked nodecheck-style reason ({rma!r})" in out
    assert slurm.node("node2")["ReasonText"] == rma
    assert slurm.wait_node("node3", lambda n: n["State"] == "IDLE")["Reason"] == ""
    assert slurm.node("node5")["ReasonText"] == "operator: replacing a fan"
    assert slurm.node("node6")["ReasonText"] == M("nccl.allreduce_multi bad node")
    assert [e["node"] for e in _events(work, "resume")] == ["node3"]

    # --drain too: a node that fails now is drained by the sweep, the operator's node still untouched
    slurm.fake_nvml("node4", NVML_REMAP_PENDING)
    slurm.fake_nvml("node5", NVML_REMAP_PENDING)
    code, out, err, _ = nodecheck(
        "sweep",
        str(slurm.inventory_path),
        "--playbook",
        "health",
        "--nodes",
        "node[1-6]",
        "--drain",
        "--resume",
        "--output-dir",
        str(work / "reports"),
        "--log-file",
        str(work / "gate.log"),
        env=slurm.slurm_env(),
    )
    assert code == 2, out + err
    assert "gate: node4 drained: gpu.health: GPU3: row remap pending" in out
    assert "gate: node5 left as is (drained by someone else): gpu.health" in out
    assert _ours(slurm.node("node4")["ReasonText"], "gpu.health GPU3: row remap pending")
    assert slurm.node("node5")["ReasonText"] == "operator: replacing a fan"


def test_the_breaker_drains_none_when_every_node_fails_the_same_check(slurm, work):
    book = work / "all-fail.yml"
    book.write_text(ALL_FAIL)
    _write_config(slurm, work, prolog={"playbook": str(book)})
    job = slurm.sbatch("-N10")
    done = slurm.wait_job(job, timeout=90)
    assert (done["JobState"], done["Restarts"]) == ("COMPLETED", "0")  # failed open: the job ran
    # (a node just resumed may show IDLE+NOT_RESPONDING for a moment: what matters is no DRAIN)
    assert not any("DRAIN" in state for state in slurm.slurm_nodes().values()), slurm.slurm_nodes()
    breakers = _events(work, "breaker")
    assert sorted(e["node"] for e in breakers) == sorted(ALL)
    assert all("nodes are drained by nodecheck for kernel.version" in e["message"] for e in breakers)

    # one run over all ten nodes (health over SSH): the breaker trips before anything is drained
    code, out, err, _ = nodecheck(
        "health",
        str(slurm.inventory_path),
        "--playbook",
        str(book),
        "--output-dir",
        str(work / "reports"),
        "--log-file",
        str(work / "gate.log"),
        env=slurm.slurm_env(),
    )
    assert code == 3, out + err
    assert "mass-drain breaker: kernel.version fails on 10 of 10 nodes (more than 10%)" in out
    assert not any("DRAIN" in state for state in slurm.slurm_nodes().values()), slurm.slurm_nodes()


def test_prolog_slurmctld_drains_the_drifting_node_and_the_job_is_requeued(slurm, work):
    apply(
        slurm,
        {n: (gpu_node(nccl=NCCL_STALE) if n == "node2" else gpu_node()) + node_os(real_slurmd=True) for n in ALL},
    )
    slurm.slurm_up(ALL, prolog=PROLOG, prolog_slurmctld=PROLOG_SLURMCTLD)
    slurm.slurm_reset()
    _write_config(
        slurm,
        work,
        prolog={"playbook": "prolog"},
        controller={"playbook": "prolog", "inventory": str(slurm.inventory_path)},
    )
    job = slurm.sbatch("-N4")
    done = slurm.wait_job(job, timeout=120)
    assert done["JobState"] == "COMPLETED" and int(done["Restarts"]) >= 1
    assert "node2" not in expand(done["NodeList"])
    assert slurm.node("node2")["ReasonText"] == M("nccl.version NCCL 2.21.5 on node2, expected 2.29.2 (3 nodes)")
    drains = _events(work, "drain")
    assert [(e["node"], e["check"]) for e in drains] == [("node2", "nccl.version")]
    assert all(slurm.node(n)["State"] == "IDLE" for n in ("node1", "node3", "node4"))


def test_observe_only_judges_and_logs_but_drains_nothing(slurm, work):
    _write_config(slurm, work, prolog={"playbook": "prolog", "observe": True})
    slurm.fake_nvml("node2", NVML_REMAP_PENDING)
    job = slurm.sbatch("-N4")
    done = slurm.wait_job(job, timeout=60)
    assert (done["JobState"], done["Restarts"], done["NodeList"]) == ("COMPLETED", "0", "node[1-4]")
    assert slurm.slurm_nodes()["node2"] == "IDLE"
    [would] = _events(work, "would-drain")
    assert (would["node"], would["check"]) == ("node2", "gpu.health")
    assert _ours(would["reason"], "gpu.health GPU3: row remap pending")
    assert _events(work, "drain") == []


def test_a_config_error_never_drains_the_job_starts_and_the_log_says_why(slurm, work):
    _write_config(slurm, work, prolog={"playbook": "prolog", "retires": 2})  # a typo
    job = slurm.sbatch("-N2")
    done = slurm.wait_job(job, timeout=60)
    assert (done["JobState"], done["Restarts"]) == ("COMPLETED", "0")
    assert all(state == "IDLE" for state in slurm.slurm_nodes().values())
    errors = _events(work, "config-error")
    assert sorted(e["node"] for e in errors) == ["node1", "node2"]
    assert "nodecheck.yml:" in errors[0]["message"] and "retires" in errors[0]["message"]


@pytest.mark.parametrize(
    "fault, check, reason",
    [
        # the check bounded the statfs itself: a judged FAIL naming the mount (issue 32, 2.1)
        ("mount", "fs.mounts", "fs.mounts /mnt/shared (fuse.hangfs rw from hangfs): statfs did not answer within 2 s"),
        # on the node itself a tool that hangs past its own timeout is the node's fault: the Prolog's
        # default drain_on is fail and timeout (over SSH it is fail only)
        ("ibstat", "ib.ports", "ib.ports ibstat timed out"),
    ],
)
def test_a_node_that_hangs_in_the_prolog_is_drained_and_the_job_runs_elsewhere(slurm, work, fault, check, reason):
    if fault == "mount":
        slurm.hang_mount("node4", "pending")
    else:
        slurm.fake_hang("node4", "ibstat")
    job = slurm.sbatch("-N4")
    done = slurm.wait_job(job, timeout=120)
    assert done["JobState"] == "COMPLETED" and int(done["Restarts"]) >= 1
    assert "node4" not in expand(done["NodeList"]) and len(expand(done["NodeList"])) == 4
    node4 = slurm.node("node4")
    assert "DRAIN" in node4["State"] and _ours(node4["ReasonText"], reason), node4
    [drain] = _events(work, "drain")
    assert (drain["node"], drain["job"], drain["check"]) == ("node4", str(job), check)


# ib.pairs starts a round only if its worst case (65 s with these timeouts) fits the time left, so
# the deadline covers two rounds and a retry's; the rounds really take about a second each
PAIRS = """version: 1
deadline_s: 300
gate: {retries: 1}          # ib.pairs is flaky-prone: a failure must repeat before it drains
checks:
  ib.pairs: {devices: [mlx5_0], duration_s: 1, test_timeout_s: 5}
"""


def test_prolog_slurmctld_quick_pair_test_drains_the_slow_node_after_a_retry(slurm, work):
    layout = {n: gpu_node() + node_os(real_slurmd=True) for n in ALL}
    layout["*"] = [Fabric(test_s=0.2, nodes=(("node3", (("gbps", 150.0),)),))]
    apply(slurm, layout)
    slurm.slurm_up(ALL, prolog=PROLOG, prolog_slurmctld=PROLOG_SLURMCTLD, extra_conf=["PrologEpilogTimeout=330"])
    slurm.slurm_reset()
    book = work / "pairs.yml"
    book.write_text(PAIRS)
    _write_config(
        slurm,
        work,
        prolog={"playbook": "prolog"},
        controller={"playbook": str(book), "inventory": str(slurm.inventory_path)},
    )
    job = slurm.sbatch("-N4")
    done = slurm.wait_job(job, timeout=120)
    assert done["JobState"] == "COMPLETED" and int(done["Restarts"]) >= 1
    assert "node3" not in expand(done["NodeList"])
    reason = slurm.node("node3")["ReasonText"]
    assert _ours(reason, "ib.pairs ") and reason.endswith("[failed on 2 of 2 attempts]"), reason
    assert [(e["node"], e["check"]) for e in _events(work, "drain")] == [("node3", "ib.pairs")]
    report = json.loads((Path(_events(work, "drain")[0]["evidence"]).parents[2] / "report.json").read_text())
    assert report["extras"]["gate"]["attempts"] == 2 and report["extras"]["gate"]["retried"] == ["ib.pairs"]


def test_slurmd_runs_the_health_check_which_drains_and_after_the_repair_resumes(slurm, work):
    """HealthCheckProgram=.../nodecheck-health run by slurmd itself every 5 s, on every node."""
    # slurmd runs the health check as it starts: the config must be there before
    slurm.slurm_up(
        ALL,
        prolog=PROLOG,
        health_check_program=HEALTH,
        extra_conf=["HealthCheckInterval=5"],
        etc_files={"nodecheck.yml": _config(work, health={"playbook": "health"})},
    )
    slurm.slurm_reset()
    slurm.drain("node5", "operator: replacing a fan")
    slurm.fake_nvml("node3", NVML_REMAP_PENDING)
    node3 = slurm.wait_node("node3", lambda n: "DRAIN" in n["State"], timeout=30)
    assert _ours(node3["ReasonText"], "gpu.health GPU3: row remap pending")
    slurm.fake_nvml("node3", NVML_HEALTHY)
    assert slurm.wait_node("node3", lambda n: n["State"] == "IDLE", timeout=30)["Reason"] == ""
    assert slurm.node("node5")["ReasonText"] == "operator: replacing a fan"
    assert [e["node"] for e in _events(work, "drain")] == ["node3"]
    assert [e["node"] for e in _events(work, "resume")] == ["node3"]

"""`nodecheck remediate` against a real Slurm 22.05 and the simulated nodes: the plan for nodes the
gate drained, from checks run now over SSH, and nothing changed (observe)."""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from harness.scenarios import NVML_REMAP_PENDING, apply, gpu_node, node_os
from harness.sim_playbooks import shipped_for_sim
from integration.runs import nodecheck

from nodecheck.parsers.slurm import reason_mark
from nodecheck.remedy import record
from nodecheck.remedy.model import Entry

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
PROLOG = BIN / "nodecheck-prolog"
ALL = [f"node{i}" for i in range(1, 11)]  # as tests/integration/test_slurm_gate.py: the same Slurm, not restarted
REMAP = "gpu.health GPU3: row remap pending"


def M(body: str) -> str:
    return f"nodecheck[{reason_mark(body)}]: {body}"


@pytest.fixture
def work(tmp_path):
    os.chmod(tmp_path, 0o755)
    return tmp_path


@pytest.fixture
def slurm(cluster, work):
    apply(cluster, {n: gpu_node() + node_os(real_slurmd=True) for n in ALL})
    cluster.slurm_up(ALL, prolog=PROLOG)
    cluster.slurm_reset()
    yield cluster
    cluster.slurm_down()


def remediate(slurm, work: Path, *extra: str) -> tuple[int, str, str]:
    config = work / "nodecheck.yml"
    config.write_text(
        yaml.safe_dump({"log_file": str(work / "gate.log"), "remedy": {"state_dir": str(work / "remedy")}})
    )
    code, out, err, _ = nodecheck(
        "remediate",
        str(slurm.inventory_path),
        "--playbook",
        str(shipped_for_sim("health", work)),
        "--config",
        str(config),
        *extra,
        env=slurm.slurm_env(),
    )
    return code, out, err


def states(slurm, nodes) -> dict[str, tuple[str, str]]:
    return {n: (slurm.node(n)["State"], slurm.node(n).get("Reason", "")) for n in nodes}


def row(out: str, node: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith(node + " "))
    return line.split(None, 3)


def test_the_plan_resets_the_gpu_with_a_pending_remap_and_changes_nothing(slurm, work):
    for node in ("node3", "node4", "node6"):
        slurm.fake_nvml(node, NVML_REMAP_PENDING)
    slurm.drain("node3", M(REMAP))  # what the Prolog left
    slurm.drain("node4", "operator: replacing a fan")
    slurm.drain("node6", M(REMAP))
    record.append(
        work / "remedy",
        "node6",
        [Entry(datetime.now(timezone.utc), "action", "reset_gpu", "3", "gpu-row-remap-pending", "gpu.health", "done")],
    )
    before = states(slurm, ALL)
    code, out, err = remediate(slurm, work, "--nodes", "node[3-6]")
    assert code == 0, out + err
    assert row(out, "node3")[1:3] == ["act", "reset_gpu"]
    assert re.search(
        r"^node3 +act +reset_gpu GPU3 +gpu\.health GPU3: row remap pending "
        r".*\(ladder gpu-row-remap-pending, step 1 of 3\)",
        out,
        re.M,
    ), out
    assert row(out, "node4")[1] == "leave" and "drained by someone else (operator: replacing a fan)" in out
    # node6 had its GPU reset in this incident and still fails: the ladder's next step
    assert re.search(r"^node6 +act +reboot +.*\(ladder gpu-row-remap-pending, step 2 of 3\)", out, re.M), out
    assert "healthy (nothing to repair): node5" in out
    assert "observe: nothing was changed" in out
    assert states(slurm, ALL) == before
    # the fake GPU still has its pending remap: nothing reset it
    code, out, err = remediate(slurm, work, "--nodes", "node3", "--json")
    assert code == 0, out + err
    (node3,) = json.loads(out)["nodes"]
    assert (node3["plan"], node3["step"], node3["target"]) == ("act", "reset_gpu GPU3", "3")
    logged = (work / "gate.log").read_text()
    assert (
        'nodecheck[remediate] action=would-remedy node=node3 step="reset_gpu GPU3" ladder="gpu-row-remap-pending"'
        in logged
    )
    assert 'action=would-remedy node=node6 step="reboot"' in logged

"""`nodecheck facts`: the GPU facts a node's probe gave, in JSON whole (fabric, GSP firmware, NVLink
counters, the read's clock) and in the table with the source that answered and why."""

from __future__ import annotations

import json

from nodecheck.app.facts_command import _facts_table
from nodecheck.checks.gpu import GPU, parse_gpu_probe
from nodecheck.core.model import Capture, Outcome
from nodecheck.run.facts import Gathered, _read
from tests.checks.test_gpu import STATES, fallback_stdout, nvml_stdout


def _facts(stdout: str) -> dict:
    capture = Capture("n1", GPU.name, GPU.argv, Outcome.EXITED, 0, stdout, "", 0.1)
    gathered = Gathered(("n1",), {("n1", GPU.name): capture}, (), None, "")
    # node_facts' "gpu" entry, as --format json prints it
    return json.loads(json.dumps(_read(gathered, "n1", GPU, parse_gpu_probe)))


def test_json_gpu_facts_carry_fabric_gsp_counters_and_clock():
    gpu = _facts(nvml_stdout(STATES / "gb200x4-rack-a.json"))
    assert (gpu["source"], gpu["source_note"], gpu["gaps"]) == ("nvml", "", [])
    assert isinstance(gpu["clock"], float) and gpu["uptime_s"] > 0 and len(gpu["boot_id"]) == 36
    first = gpu["gpus"][0]
    assert first["fabric"] == {
        "state": "completed",
        "status": "success",
        "cluster_uuid": "6a130f54-faaa-4b8f-847f-be44ab70f917",
        "clique_id": 32766,
        "health": [
            ["access_timeout_recovery", "false"],
            ["bandwidth", "full"],
            ["route_recovery_in_progress", "false"],
            ["route_unhealthy", "false"],
        ],
    }
    assert first["gsp_firmware"] == "580.159.04"
    assert first["nvlinks"][17] == {
        "link": 17,
        "active": True,
        "speed_gbps": None,
        "errors": [["replay", 0], ["recovery", 0], ["crc_flit", 0]],
    }


def test_table_names_the_gpu_source_and_why_nvidia_smi_answered():
    nvml = {"values": {}, "gpu": _facts(nvml_stdout(STATES / "h100x8-healthy.json"))}
    smi = {"values": {}, "gpu": _facts(fallback_stdout("cannot import pynvml (nvidia-ml-py)"))}
    table = _facts_table({"nodes": {"node1": nvml, "node2": smi}}, ())
    lines = table.splitlines()
    assert lines[2].split() == ["node1", "8", "(nvml)", "00000000/0"]  # HGX: registered, no multi-node domain
    assert lines[3].split() == ["node2", "2", "(nvidia-smi)", "-"]  # the H100 PCIe fallback shows no fabric
    assert lines[4:] == ["node2: GPUs: NVML unavailable (cannot import pynvml (nvidia-ml-py)); read from nvidia-smi"]


def test_table_shows_each_nodes_nvlink_domain_or_its_unfinished_registration():
    nodes = {
        name: {"values": {}, "gpu": _facts(nvml_stdout(STATES / state))}
        for name, state in (
            ("gb1", "gb200x4-rack-a.json"),
            ("gb2", "gb200x4-other-clique.json"),
            ("gb3", "gb200x4-clique-zero.json"),
            ("hgx", "h100x8-fabric-in-progress.json"),
        )
    }
    rows = [line.split(None, 3)[3] for line in _facts_table({"nodes": nodes}, ()).splitlines()[2:]]
    assert rows == ["6a130f54/32766", "6a130f54/32765", "completed, Insufficient Resources", "in_progress"]

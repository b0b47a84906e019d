"""parse_nvml_probe: the probe's schema-1 and schema-2 JSON → exact GpuFacts; every malformed input → a named
ParseError."""

from __future__ import annotations

import copy
import json

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.core.model import excerpt
from nodecheck.parsers.gpu import Gpu, GpuFabric, GpuFacts, GpuProcess, NvLink, RemappedRows
from nodecheck.parsers.nvml import NvmlUnavailable, parse_nvml_probe

GPU_KEYS = (
    "name",
    "uuid",
    "serial",
    "vbios",
    "pci_bus_id",
    "persistence_mode",
    "ecc_enabled",
    "ecc_pending_enabled",
    "ecc_uncorrectable_volatile",
    "ecc_uncorrectable_aggregate",
    "ecc_correctable_volatile",
    "retired_pages_pending",
    "retired_pages_dbe",
    "retired_pages_sbe",
    "remapped_rows",
    "clock_event_reasons",
    "temperature_c",
    "power_draw_w",
    "power_limit_w",
    "memory_used_mib",
    "memory_total_mib",
    "pcie_gen_current",
    "pcie_gen_max",
    "pcie_width_current",
    "pcie_width_max",
    "nvlinks",
    "processes",
)


def doc() -> dict:
    """One complete probe output: two GPUs, GPU1 with a pending remap, a process and a failed read."""
    gpu0 = {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-4f2a9c1e-7b3d-4e8a-9c51-0d6e2f8a1b01",
        "serial": "1654923001207",
        "vbios": "96.00.99.00.01",
        "pci_bus_id": "00000000:9B:00.0",
        "persistence_mode": True,
        "ecc_enabled": True,
        "ecc_pending_enabled": True,
        "ecc_uncorrectable_volatile": 0,
        "ecc_uncorrectable_aggregate": 0,
        "ecc_correctable_volatile": 2,
        "retired_pages_pending": None,
        "retired_pages_dbe": None,
        "retired_pages_sbe": None,
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
        "clock_event_reasons": ["gpu_idle"],
        "temperature_c": 31,
        "power_draw_w": 69.342,
        "power_limit_w": 700.0,
        "memory_used_mib": 0.0,
        "memory_total_mib": 81559.0,
        "pcie_gen_current": 5,
        "pcie_gen_max": 5,
        "pcie_width_current": 16,
        "pcie_width_max": 16,
        "nvlinks": [{"link": 0, "active": True}, {"link": 1, "active": False}],
        "processes": [],
    }
    gpu1 = dict(
        gpu0,
        index=1,
        uuid="GPU-8c1d5e3a-2f4b-4a9c-8e72-1b3c5d7e9f02",
        pci_bus_id="0000:ab:00.0",
        remapped_rows={"correctable": 0, "uncorrectable": 4, "pending": True, "failure": False},
        clock_event_reasons=["sw_power_cap", "hw_slowdown"],
        temperature_c=None,
        memory_used_mib=40960.0,
        nvlinks=[],
        processes=[
            {"pid": 48213, "name": "python3", "used_memory_mib": 40960.0},
            {"pid": 7, "name": None, "used_memory_mib": None},
        ],
    )
    return {
        "schema": 1,
        "source": "nvml",
        "driver_version": "550.90.07",
        "cuda_driver_version": "12.4",
        "nvml_version": "12.550.90.07",
        "gpus": [gpu0, gpu1],
        "errors": [
            {"gpu": 1, "field": "temperature_c", "error": "GPU is lost"},
            {"gpu": None, "field": "nvml_version", "error": "Unknown Error"},
        ],
    }


GPU0 = Gpu(
    index=0,
    name="NVIDIA H100 80GB HBM3",
    uuid="GPU-4f2a9c1e-7b3d-4e8a-9c51-0d6e2f8a1b01",
    serial="1654923001207",
    vbios="96.00.99.00.01",
    pci_bus_id="0000:9b:00.0",
    persistence_mode=True,
    ecc_enabled=True,
    ecc_pending_enabled=True,
    ecc_uncorrectable_volatile=0,
    ecc_uncorrectable_aggregate=0,
    ecc_correctable_volatile=2,
    retired_pages_pending=None,
    retired_pages_dbe=None,
    retired_pages_sbe=None,
    remapped_rows=RemappedRows(0, 0, False, False),
    clock_event_reasons=frozenset({"gpu_idle"}),
    temperature_c=31.0,
    power_draw_w=69.342,
    power_limit_w=700.0,
    memory_used_mib=0.0,
    memory_total_mib=81559.0,
    pcie_gen_current=5,
    pcie_gen_max=5,
    pcie_width_current=16,
    pcie_width_max=16,
    nvlinks=(NvLink(0, True), NvLink(1, False)),
    processes=(),
)
GPU1 = Gpu(
    **{
        **GPU0.__dict__,
        "index": 1,
        "uuid": "GPU-8c1d5e3a-2f4b-4a9c-8e72-1b3c5d7e9f02",
        "pci_bus_id": "0000:ab:00.0",
        "remapped_rows": RemappedRows(0, 4, True, False),
        "clock_event_reasons": frozenset({"sw_power_cap", "hw_slowdown"}),
        "temperature_c": None,
        "memory_used_mib": 40960.0,
        "nvlinks": (),
        "processes": (GpuProcess(48213, "python3", 40960.0), GpuProcess(7, "", None)),
    }
)
EXPECTED = GpuFacts(
    source="nvml",
    driver_version="550.90.07",
    cuda_driver_version="12.4",
    gpus=(GPU0, GPU1),
    gaps=("GPU1 temperature_c: GPU is lost", "nvml_version: Unknown Error"),
)


def test_good_output_gives_exact_facts() -> None:
    assert parse_nvml_probe(json.dumps(doc()) + "\n") == EXPECTED


def test_every_value_null_reads_as_unknown_not_zero() -> None:
    d = doc()
    d["gpus"] = [dict(dict.fromkeys(GPU_KEYS), index=0)]
    d["driver_version"] = d["cuda_driver_version"] = None
    d["errors"] = []
    assert parse_nvml_probe(json.dumps(d)) == GpuFacts(
        source="nvml", driver_version=None, cuda_driver_version=None, gpus=(Gpu(index=0),)
    )


def test_no_gpus_and_no_errors_key() -> None:
    d = doc()
    d["gpus"] = []
    del d["errors"]
    assert parse_nvml_probe(json.dumps(d)) == GpuFacts("nvml", "550.90.07", "12.4", ())


@pytest.mark.parametrize(
    "bus_id, normalised",
    [
        ("00000000:9B:00.0", "0000:9b:00.0"),
        ("0000:9B:00.0", "0000:9b:00.0"),
        ("00000001:0a:1f.3", "0001:0a:1f.3"),
    ],
)
def test_pci_bus_id_is_normalised(bus_id: str, normalised: str) -> None:
    d = doc()
    d["gpus"][0]["pci_bus_id"] = bus_id
    assert parse_nvml_probe(json.dumps(d)).gpus[0].pci_bus_id == normalised


def test_an_integer_where_a_number_belongs_is_widened() -> None:
    d = doc()
    d["gpus"][0]["power_limit_w"] = 700
    value = parse_nvml_probe(json.dumps(d)).gpus[0].power_limit_w
    assert value == 700.0 and type(value) is float


def test_unavailable_line_raises_nvml_unavailable_with_the_reason() -> None:
    text = "nodecheck-nvml-unavailable: nvmlInit failed: Driver Not Loaded\n"
    with pytest.raises(NvmlUnavailable) as info:
        parse_nvml_probe(text)
    assert isinstance(info.value, ParseError)
    assert info.value.tool == "nvml probe"
    assert info.value.reason == "nvmlInit failed: Driver Not Loaded"
    assert info.value.excerpt == text


def test_unavailable_reason_holding_a_splitlines_break_is_read_whole() -> None:
    # issue 17: a library message with U+2028 (or \x1c, \x85) in it; lines break at "\n" only
    text = "nodecheck-nvml-unavailable: nvmlInit failed:\u2028Driver Not Loaded\n"
    with pytest.raises(NvmlUnavailable) as info:
        parse_nvml_probe(text)
    assert info.value.reason == "nvmlInit failed:\u2028Driver Not Loaded"


def _mutate(path: str, value: object):
    """doc() with the value at a dotted path ("gpus.0.temperature_c") replaced; DELETE removes it."""

    def make() -> str:
        d = doc()
        *parents, last = path.split(".")
        node = d
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is DELETE:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
        return json.dumps(d)

    return make


DELETE = object()

BAD = [
    ("empty", lambda: "", "empty output"),
    ("whitespace", lambda: " \n\n", "empty output"),
    ("not json", lambda: "Traceback (most recent call last):\n  File ...", "not JSON: Expecting value"),
    ("truncated", lambda: json.dumps(doc())[:300], "not JSON: "),
    ("array", lambda: "[1, 2]", "not a JSON object but an array"),
    ("no gpus", _mutate("gpus", DELETE), "missing required key(s): gpus"),
    ("no driver_version", _mutate("driver_version", DELETE), "missing required key(s): driver_version"),
    ("no schema", _mutate("schema", DELETE), "missing required key(s): schema"),
    ("schema 3", _mutate("schema", 3), "unknown schema version 3 (this nodecheck reads 1 or 2)"),
    ("schema string", _mutate("schema", "1"), "unknown schema version '1' (this nodecheck reads 1 or 2)"),
    ("schema bool", _mutate("schema", True), "unknown schema version True (this nodecheck reads 1 or 2)"),
    ("other source", _mutate("source", "nvidia-smi"), "source is 'nvidia-smi', expected 'nvml'"),
    ("driver int", _mutate("driver_version", 550), "driver_version: expected a string, got an integer 550"),
    ("gpus object", _mutate("gpus", {}), "gpus: expected an array, got an object"),
    ("gpu not object", _mutate("gpus.0", 3), "gpus[0]: expected an object, got an integer 3"),
    ("no index", _mutate("gpus.0.index", DELETE), "gpus[0].index: missing"),
    ("null index", _mutate("gpus.0.index", None), "gpus[0].index: is null"),
    ("negative index", _mutate("gpus.0.index", -1), "gpus[0].index: negative index -1"),
    ("duplicate index", _mutate("gpus.1.index", 0), "duplicate GPU index in [0, 0]"),
    ("missing field", _mutate("gpus.0.uuid", DELETE), "gpus[0].uuid: missing"),
    (
        "string temperature",
        _mutate("gpus.0.temperature_c", "31"),
        "gpus[0].temperature_c: expected a number, got a string '31'",
    ),
    (
        "bool temperature",
        _mutate("gpus.0.temperature_c", True),
        "gpus[0].temperature_c: expected a number, got a boolean True",
    ),
    (
        "float pcie gen",
        _mutate("gpus.0.pcie_gen_current", 5.0),
        "gpus[0].pcie_gen_current: expected an integer, got a number 5.0",
    ),
    (
        "string ecc count",
        _mutate("gpus.1.ecc_uncorrectable_volatile", "0"),
        "gpus[1].ecc_uncorrectable_volatile: expected an integer, got a string '0'",
    ),
    (
        "int persistence",
        _mutate("gpus.0.persistence_mode", 1),
        "gpus[0].persistence_mode: expected a boolean, got an integer 1",
    ),
    (
        "bool ecc count",
        _mutate("gpus.0.ecc_correctable_volatile", False),
        "gpus[0].ecc_correctable_volatile: expected an integer, got a boolean False",
    ),
    ("bad bus id", _mutate("gpus.0.pci_bus_id", "9b:00"), "gpus[0].pci_bus_id: not a PCI bus id: '9b:00'"),
    (
        "remap pending Yes",
        _mutate("gpus.1.remapped_rows.pending", "Yes"),
        "gpus[1].remapped_rows.pending: expected a boolean, got a string 'Yes'",
    ),
    (
        "remap missing failure",
        _mutate("gpus.1.remapped_rows.failure", DELETE),
        "gpus[1].remapped_rows.failure: missing",
    ),
    (
        "remap list",
        _mutate("gpus.1.remapped_rows", [0, 4, 1, 0]),
        "gpus[1].remapped_rows: expected an object, got an array",
    ),
    (
        "reasons mask",
        _mutate("gpus.0.clock_event_reasons", 1),
        "gpus[0].clock_event_reasons: expected an array, got an integer 1",
    ),
    (
        "unknown reason",
        _mutate("gpus.0.clock_event_reasons", ["gpu_idle", "power_brake"]),
        "gpus[0].clock_event_reasons: unknown reason(s) ['power_brake']",
    ),
    (
        "link active string",
        _mutate("gpus.0.nvlinks.0.active", "yes"),
        "gpus[0].nvlinks[0].active: expected a boolean, got a string 'yes'",
    ),
    ("link number missing", _mutate("gpus.0.nvlinks.1.link", DELETE), "gpus[0].nvlinks[1].link: missing"),
    (
        "pid string",
        _mutate("gpus.1.processes.0.pid", "48213"),
        "gpus[1].processes[0].pid: expected an integer, got a string '48213'",
    ),
    (
        "process memory string",
        _mutate("gpus.1.processes.0.used_memory_mib", "40960 MiB"),
        "gpus[1].processes[0].used_memory_mib: expected a number, got a string '40960 MiB'",
    ),
    ("errors object", _mutate("errors", {}), "errors: expected an array, got an object"),
    ("error gpu string", _mutate("errors.0.gpu", "3"), "errors[0].gpu: expected an integer, got a string '3'"),
    ("error no message", _mutate("errors.1.error", DELETE), "errors[1].error: missing"),
]


@pytest.mark.parametrize("make, reason", [(make, reason) for _, make, reason in BAD], ids=[name for name, _, _ in BAD])
def test_malformed_output_is_a_parse_error_with_a_clear_reason(make, reason: str) -> None:
    text = make()
    with pytest.raises(ParseError) as info:
        parse_nvml_probe(text)
    assert type(info.value) is ParseError  # not NvmlUnavailable: no fallback for garbage
    assert info.value.tool == "nvml probe"
    assert info.value.reason.startswith(reason)
    assert info.value.excerpt == excerpt(text)


def test_parse_does_not_mutate_or_depend_on_key_order() -> None:
    d = doc()
    before = copy.deepcopy(d)
    shuffled = json.dumps(d, sort_keys=True)
    assert parse_nvml_probe(shuffled) == EXPECTED
    assert d == before


# --- schema 2: fabric, GSP firmware, NVLink error counters, the read's clock ---------------------
CLUSTER = "6a130f54-faaa-4b8f-847f-be44ab70f917"


def doc2() -> dict:
    """doc() as the schema-2 probe writes it: GPU0 on an NVL72 fabric, GPU1 without one."""
    d = doc()
    d.update(schema=2, clock=1796190253.5, uptime_s=27718.2, boot_id="dda7b88b-2fbb-4708-a635-68e2e354ae4c")
    gpu0, gpu1 = d["gpus"]
    gpu0["nvlinks"] = [
        {"link": 0, "active": True, "errors": {"replay": 2, "recovery": 0, "crc_flit": 1450, "crc_data": 0}},
        {"link": 1, "active": False, "errors": None},
    ]
    gpu0["fabric"] = {
        "state": "completed",
        "status": "success",
        "cluster_uuid": CLUSTER,
        "clique_id": 32766,
        "health": {"route_unhealthy": "false", "bandwidth": "full"},
    }
    gpu0["gsp_firmware"] = "580.159.04"
    gpu1["fabric"] = None
    gpu1["gsp_firmware"] = None
    return d


def _mutate2(path: str, value: object):
    def make() -> str:
        d = doc2()
        *parents, last = path.split(".")
        node = d
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is DELETE:
            del node[last]
        else:
            node[int(last) if isinstance(node, list) else last] = value
        return json.dumps(d)

    return make


def test_schema_2_gives_the_new_facts_exactly() -> None:
    facts = parse_nvml_probe(json.dumps(doc2()) + "\n")
    gpu0, gpu1 = facts.gpus
    assert (facts.clock, facts.uptime_s, facts.boot_id) == (
        1796190253.5,
        27718.2,
        "dda7b88b-2fbb-4708-a635-68e2e354ae4c",
    )
    # counters in NVLINK_ERROR_COUNTERS order, whatever the JSON's
    assert gpu0.nvlinks == (
        NvLink(0, True, errors=(("replay", 2), ("recovery", 0), ("crc_flit", 1450), ("crc_data", 0))),
        NvLink(1, False, errors=None),
    )
    assert gpu0.fabric == GpuFabric(
        "completed", "success", CLUSTER, 32766, (("bandwidth", "full"), ("route_unhealthy", "false"))
    )
    assert gpu0.gsp_firmware == "580.159.04"
    assert (gpu1.fabric, gpu1.gsp_firmware) == (None, None)
    # everything schema 1 had reads the same
    assert facts.gpus[1] == EXPECTED.gpus[1] and facts.gaps == EXPECTED.gaps


def test_schema_1_has_none_of_the_new_facts() -> None:
    facts = parse_nvml_probe(json.dumps(doc()))
    assert (facts.clock, facts.uptime_s, facts.boot_id) == (None, None, None)
    assert all(g.fabric is None and g.gsp_firmware is None for g in facts.gpus)
    assert facts.gpus[0].nvlinks == (NvLink(0, True, errors=None), NvLink(1, False, errors=None))


def test_a_fabric_before_registration_completed_has_no_domain() -> None:
    d = doc2()
    d["gpus"][0]["fabric"] = {
        "state": "in_progress",
        "status": None,
        "cluster_uuid": None,
        "clique_id": None,
        "health": None,
    }
    assert parse_nvml_probe(json.dumps(d)).gpus[0].fabric == GpuFabric("in_progress", None, None, None, ())


BAD2 = [
    ("no clock", _mutate2("clock", DELETE), "clock: missing"),
    ("clock string", _mutate2("clock", "now"), "clock: expected a number, got a string 'now'"),
    ("negative uptime", _mutate2("uptime_s", -1), "uptime_s: negative -1.0"),
    ("no fabric key", _mutate2("gpus.0.fabric", DELETE), "gpus[0].fabric: missing"),
    ("no gsp key", _mutate2("gpus.1.gsp_firmware", DELETE), "gpus[1].gsp_firmware: missing"),
    ("empty gsp", _mutate2("gpus.0.gsp_firmware", " "), "gpus[0].gsp_firmware: empty"),
    ("no link errors key", _mutate2("gpus.0.nvlinks.1.errors", DELETE), "gpus[0].nvlinks[1].errors: missing"),
    (
        "unknown counter",
        _mutate2("gpus.0.nvlinks.0.errors.crc", 1),
        "gpus[0].nvlinks[0].errors: unknown counter(s) ['crc']",
    ),
    (
        "counter bool",
        _mutate2("gpus.0.nvlinks.0.errors.replay", True),
        "gpus[0].nvlinks[0].errors.replay: expected an integer, got a boolean True",
    ),
    (
        "negative counter",
        _mutate2("gpus.0.nvlinks.0.errors.replay", -1),
        "gpus[0].nvlinks[0].errors.replay: negative count -1",
    ),
    ("duplicate link", _mutate2("gpus.0.nvlinks.1.link", 0), "gpus[0].nvlinks: duplicate link number in [0, 0]"),
    ("fabric state", _mutate2("gpus.0.fabric.state", "done"), "gpus[0].fabric.state: unknown state 'done'"),
    ("fabric no state", _mutate2("gpus.0.fabric.state", None), "gpus[0].fabric.state: is null"),
    (
        "fabric uuid",
        _mutate2("gpus.0.fabric.cluster_uuid", CLUSTER.upper()),
        "gpus[0].fabric.cluster_uuid: not a lower-case UUID",
    ),
    (
        "fabric clique string",
        _mutate2("gpus.0.fabric.clique_id", "32766"),
        "gpus[0].fabric.clique_id: expected an integer, got a string '32766'",
    ),
    ("fabric clique negative", _mutate2("gpus.0.fabric.clique_id", -2), "gpus[0].fabric.clique_id: negative -2"),
    (
        "fabric health field",
        _mutate2("gpus.0.fabric.health.speed", "fast"),
        "gpus[0].fabric.health: unknown health field 'speed'",
    ),
    (
        "fabric health value",
        _mutate2("gpus.0.fabric.health.bandwidth", 2),
        "gpus[0].fabric.health.bandwidth: expected a string, got an integer 2",
    ),
    ("schema 1 with a schema-2 key", _mutate2("schema", 1), "clock: not part of schema 1"),
]


@pytest.mark.parametrize("make, reason", [(m, r) for _, m, r in BAD2], ids=[name for name, _, _ in BAD2])
def test_malformed_schema_2_output_is_a_parse_error(make, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_nvml_probe(make())
    assert info.value.reason.startswith(reason)

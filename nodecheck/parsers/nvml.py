"""Parse the NVML probe's output (nodecheck/probes/nvml_probe.py, schema 2; schema 1 still read) into GpuFacts.

Pure and strict: every value is type-checked against the schema and a wrong type is a ParseError
naming the field, never coerced (the one widening: an integer where a float belongs). null stays
None ("not reported"). The probe's "errors" entries become GpuFacts.gaps. Schema 2 adds keys (per GPU
"fabric", "gsp_firmware"; per link "errors"; top-level "clock", "uptime_s", "boot_id") that it always
writes, so in schema 2 a missing one is a ParseError; a schema-1 output (an older nodecheck's probe, a
saved capture) has none of them, and they read None.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from nodecheck.core.errors import ParseError
from nodecheck.parsers.gpu import (
    CLOCK_EVENT_REASONS,
    NVLINK_ERROR_COUNTERS,
    Gpu,
    GpuFabric,
    GpuFacts,
    GpuProcess,
    NvLink,
    RemappedRows,
)
from nodecheck.parsers.jsonsafe import KIND_WORDS, kind_of
from nodecheck.parsers.lines import split_lines

TOOL = "nvml probe"
SCHEMA = 2
SCHEMAS = (1, 2)  # what this parser reads
FABRIC_STATES = ("not_supported", "not_started", "in_progress", "completed")
# the probe's names for nvml.h's NVML_GPU_FABRIC_HEALTH_MASK_* fields (nvidia-smi -q's Fabric / Health rows)
FABRIC_HEALTH = (
    "summary",
    "bandwidth",
    "route_recovery_in_progress",
    "route_unhealthy",
    "access_timeout_recovery",
    "incorrect_configuration",
    "partition_assigned",
    "gfm_state",
)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII)
UNAVAILABLE_PREFIX = "nodecheck-nvml-unavailable:"  # the probe's exit-3 line
_REQUIRED = ("schema", "driver_version", "gpus")
# NVML "00000000:9B:00.0" (8-digit domain) or legacy "0000:9B:00.0"
_BUS_ID = re.compile(r"([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])", re.ASCII)


class NvmlUnavailable(ParseError):
    """The probe could not use NVML at all (no pynvml, nvmlInit failed): the caller may use nvidia-smi."""

    def __init__(self, reason: str, excerpt: str = "") -> None:
        super().__init__(TOOL, reason, excerpt)


def parse_nvml_probe(text: str) -> GpuFacts:
    """The probe's stdout → GpuFacts; NvmlUnavailable for its unavailable line, ParseError otherwise."""
    stripped = text.strip()
    first = split_lines(stripped)[0] if stripped else ""
    if first.startswith(UNAVAILABLE_PREFIX):
        raise NvmlUnavailable(first[len(UNAVAILABLE_PREFIX) :].strip() or "no reason given", text)
    if not stripped:
        raise ParseError(TOOL, "empty output", text)
    try:
        doc = json.loads(stripped)
    except ValueError as exc:
        raise ParseError(TOOL, f"not JSON: {exc}", text) from None
    if not isinstance(doc, dict):
        raise ParseError(TOOL, f"not a JSON object but {kind_of(doc)}", text)
    missing = [key for key in _REQUIRED if key not in doc]
    if missing:
        raise ParseError(TOOL, "missing required key(s): " + ", ".join(missing), text)
    schema = doc["schema"]
    if type(schema) is not int or schema not in SCHEMAS:
        readable = " or ".join(map(str, SCHEMAS))
        raise ParseError(TOOL, f"unknown schema version {schema!r} (this nodecheck reads {readable})", text)
    reader = _Reader(text, schema)
    source = reader.opt(doc, "source", str, "source")
    if source not in (None, "nvml"):
        raise ParseError(TOOL, f"source is {source!r}, expected 'nvml'", text)
    driver = reader.opt(doc, "driver_version", str, "driver_version")
    cuda = reader.opt(doc, "cuda_driver_version", str, "cuda_driver_version")
    reader.opt(doc, "nvml_version", str, "nvml_version")
    clock = reader.new(doc, "clock", float, "clock")
    uptime = reader.new(doc, "uptime_s", float, "uptime_s")
    boot_id = reader.new(doc, "boot_id", str, "boot_id")
    for name, value in (("clock", clock), ("uptime_s", uptime)):
        if value is not None and value < 0:
            raise ParseError(TOOL, f"{name}: negative {value}", text)
    gpus_raw = reader.req(doc, "gpus", list, "gpus")
    gpus = tuple(reader.gpu(raw, f"gpus[{i}]") for i, raw in enumerate(gpus_raw))
    indexes = [g.index for g in gpus]
    if len(set(indexes)) != len(indexes):
        raise ParseError(TOOL, f"duplicate GPU index in {indexes}", text)
    errors = reader.opt(doc, "errors", list, "errors") if "errors" in doc else None  # absent: none
    gaps = tuple(reader.gap(raw, f"errors[{i}]") for i, raw in enumerate(errors or ()))
    return GpuFacts(
        source="nvml",
        driver_version=driver,
        cuda_driver_version=cuda,
        gpus=gpus,
        gaps=gaps,
        clock=clock,
        uptime_s=uptime,
        boot_id=boot_id,
    )


class _Reader:
    """Typed access to the decoded JSON; every failure names the field by its path."""

    def __init__(self, text: str, schema: int = SCHEMA) -> None:
        self.text = text
        self.schema = schema

    def fail(self, path: str, reason: str) -> ParseError:
        return ParseError(TOOL, f"{path}: {reason}", self.text)

    def check(self, value: Any, kind: type, path: str) -> Any:
        # bool is an int subclass in Python; JSON true must never pass for a count, nor 1 for true
        if kind is float:
            ok = type(value) in (int, float)
            value = float(value) if ok else value
        else:
            ok = type(value) is kind
        if not ok:
            raise self.fail(path, f"expected {KIND_WORDS[kind]}, got {kind_of(value)} {value!r}"[:200])
        return value

    def req(self, obj: dict, key: str, kind: type, path: str) -> Any:
        if key not in obj:
            raise self.fail(path, "missing")
        if obj[key] is None:
            raise self.fail(path, "is null")
        return self.check(obj[key], kind, path)

    def opt(self, obj: dict, key: str, kind: type, path: str) -> Any:
        """A key the probe always writes, whose value may be null (the source did not report it)."""
        if key not in obj:
            raise self.fail(path, "missing")
        value = obj[key]
        return None if value is None else self.check(value, kind, path)

    def opt_with(self, obj: dict, key: str, kind: type, path: str, build: Callable[[Any, str], Any]) -> Any:
        value = self.opt(obj, key, kind, path)
        return None if value is None else build(value, path)

    def new(self, obj: dict, key: str, kind: type, path: str, build: Callable[[Any, str], Any] | None = None) -> Any:
        """A key schema 2 added: required there (value may be null), absent (None) in schema 1."""
        if self.schema < 2:
            if key in obj:
                raise self.fail(path, "not part of schema 1")
            return None
        value = self.opt(obj, key, kind, path)
        return value if value is None or build is None else build(value, path)

    def gpu(self, raw: Any, path: str) -> Gpu:
        raw = self.check(raw, dict, path)
        index = self.req(raw, "index", int, f"{path}.index")
        if index < 0:
            raise self.fail(f"{path}.index", f"negative index {index}")
        fields: dict[str, Any] = {}
        for name, kind in (
            ("name", str),
            ("uuid", str),
            ("serial", str),
            ("vbios", str),
            ("persistence_mode", bool),
            ("ecc_enabled", bool),
            ("ecc_pending_enabled", bool),
            ("ecc_uncorrectable_volatile", int),
            ("ecc_uncorrectable_aggregate", int),
            ("ecc_correctable_volatile", int),
            ("retired_pages_pending", bool),
            ("retired_pages_dbe", int),
            ("retired_pages_sbe", int),
            ("temperature_c", float),
            ("power_draw_w", float),
            ("power_limit_w", float),
            ("memory_used_mib", float),
            ("memory_total_mib", float),
            ("pcie_gen_current", int),
            ("pcie_gen_max", int),
            ("pcie_width_current", int),
            ("pcie_width_max", int),
        ):
            fields[name] = self.opt(raw, name, kind, f"{path}.{name}")
        fields["pci_bus_id"] = self.opt_with(raw, "pci_bus_id", str, f"{path}.pci_bus_id", self.bus_id)
        fields["remapped_rows"] = self.opt_with(raw, "remapped_rows", dict, f"{path}.remapped_rows", self.remapped_rows)
        fields["clock_event_reasons"] = self.opt_with(
            raw, "clock_event_reasons", list, f"{path}.clock_event_reasons", self.reasons
        )
        fields["nvlinks"] = self.opt_with(raw, "nvlinks", list, f"{path}.nvlinks", self.nvlinks)
        fields["fabric"] = self.new(raw, "fabric", dict, f"{path}.fabric", self.fabric)
        gsp = self.new(raw, "gsp_firmware", str, f"{path}.gsp_firmware")
        if gsp is not None and not gsp.strip():
            raise self.fail(f"{path}.gsp_firmware", "empty")
        fields["gsp_firmware"] = gsp
        fields["processes"] = self.opt_with(raw, "processes", list, f"{path}.processes", self.processes)
        return Gpu(index=index, **fields)

    def bus_id(self, value: str, path: str) -> str:
        """Normalised as Gpu.pci_bus_id promises: "0000:9b:00.0"."""
        match = _BUS_ID.fullmatch(value)
        if not match:
            raise self.fail(path, f"not a PCI bus id: {value!r}"[:200])
        domain, bus, device, function = match.groups()
        return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"

    def remapped_rows(self, raw: dict, path: str) -> RemappedRows:
        return RemappedRows(
            correctable=self.opt(raw, "correctable", int, f"{path}.correctable"),
            uncorrectable=self.opt(raw, "uncorrectable", int, f"{path}.uncorrectable"),
            pending=self.opt(raw, "pending", bool, f"{path}.pending"),
            failure=self.opt(raw, "failure", bool, f"{path}.failure"),
        )

    def reasons(self, raw: list, path: str) -> frozenset[str]:
        names = [self.check(name, str, f"{path}[{i}]") for i, name in enumerate(raw)]
        unknown = sorted(set(names) - set(CLOCK_EVENT_REASONS))
        if unknown:
            raise self.fail(path, f"unknown reason(s) {unknown}")
        return frozenset(names)

    def nvlinks(self, raw: list, path: str) -> tuple[NvLink, ...]:
        links = []
        for i, item in enumerate(raw):
            item = self.check(item, dict, f"{path}[{i}]")
            links.append(
                NvLink(
                    link=self.req(item, "link", int, f"{path}[{i}].link"),
                    active=self.opt(item, "active", bool, f"{path}[{i}].active"),
                    errors=self.new(item, "errors", dict, f"{path}[{i}].errors", self.link_errors),
                )
            )
        numbers = [link.link for link in links]
        if len(set(numbers)) != len(numbers):
            raise self.fail(path, f"duplicate link number in {numbers}")
        return tuple(links)

    def link_errors(self, raw: dict, path: str) -> tuple[tuple[str, int], ...]:
        """{"crc_flit": 3, ...} → (("crc_flit", 3), ...) in NVLINK_ERROR_COUNTERS order."""
        unknown = sorted(set(raw) - set(NVLINK_ERROR_COUNTERS))
        if unknown:
            raise self.fail(path, f"unknown counter(s) {unknown}")
        counts = []
        for name in NVLINK_ERROR_COUNTERS:
            if name in raw:
                value = self.check(raw[name], int, f"{path}.{name}")
                if value < 0:
                    raise self.fail(f"{path}.{name}", f"negative count {value}")
                counts.append((name, value))
        return tuple(counts)

    def fabric(self, raw: dict, path: str) -> GpuFabric:
        state = self.req(raw, "state", str, f"{path}.state")
        if state not in FABRIC_STATES:
            raise self.fail(f"{path}.state", f"unknown state {state!r}; known: {', '.join(FABRIC_STATES)}")
        status = self.opt(raw, "status", str, f"{path}.status")
        cluster = self.opt(raw, "cluster_uuid", str, f"{path}.cluster_uuid")
        if cluster is not None and not _UUID.fullmatch(cluster):
            raise self.fail(f"{path}.cluster_uuid", f"not a lower-case UUID: {cluster!r}"[:200])
        clique = self.opt(raw, "clique_id", int, f"{path}.clique_id")
        if clique is not None and clique < 0:
            raise self.fail(f"{path}.clique_id", f"negative {clique}")
        health_raw = self.opt(raw, "health", dict, f"{path}.health")
        health: list[tuple[str, str]] = []
        for name, word in sorted((health_raw or {}).items()):
            if name not in FABRIC_HEALTH:
                raise self.fail(f"{path}.health", f"unknown health field {name!r}")
            health.append((name, self.check(word, str, f"{path}.health.{name}")))
        return GpuFabric(state=state, status=status, cluster_uuid=cluster, clique_id=clique, health=tuple(health))

    def processes(self, raw: list, path: str) -> tuple[GpuProcess, ...]:
        processes = []
        for i, item in enumerate(raw):
            item = self.check(item, dict, f"{path}[{i}]")
            name = self.opt(item, "name", str, f"{path}[{i}].name")
            processes.append(
                GpuProcess(
                    pid=self.req(item, "pid", int, f"{path}[{i}].pid"),
                    name="" if name is None else name,  # "": the probe could not learn the name
                    used_memory_mib=self.opt(item, "used_memory_mib", float, f"{path}[{i}].used_memory_mib"),
                )
            )
        return tuple(processes)

    def gap(self, raw: Any, path: str) -> str:
        """{"gpu": 3, "field": "remapped_rows", "error": "Unknown Error"} → "GPU3 remapped_rows: Unknown Error"."""
        raw = self.check(raw, dict, path)
        gpu = self.opt(raw, "gpu", int, f"{path}.gpu")
        field = self.req(raw, "field", str, f"{path}.field")
        error = self.req(raw, "error", str, f"{path}.error")
        return f"{field}: {error}" if gpu is None else f"GPU{gpu} {field}: {error}"

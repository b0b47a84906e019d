"""GPU health from NVML (or nvidia-smi when NVML cannot answer): count, hardware health, leftover
processes, and the driver version that must match across nodes (the CUDA version is cuda.py's)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nodecheck.checks.values import value_check
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Probe, Status, Verdict
from nodecheck.core.registry import Captures, check
from nodecheck.core.thresholds import Action, Ceiling, Floor, fmt
from nodecheck.judging.drift import Absent, PinOrDrift
from nodecheck.parsers.gpu import CLOCK_EVENT_REASONS, Gpu, GpuFacts
from nodecheck.parsers.lines import split_lines
from nodecheck.parsers.nvidia_smi import gpu_facts_from_nvidia_smi
from nodecheck.parsers.nvidia_smi_csv import COMPUTE_APPS_FIELDS, QUERY_GPU_FIELDS
from nodecheck.parsers.nvml import parse_nvml_probe
from nodecheck.parsers.sections import split_sections
from nodecheck.parsers.uptime import node_clock

NVML_PROBE_SCRIPT = (Path(__file__).resolve().parent.parent / "probes" / "nvml_probe.py").read_text()
UNAVAILABLE = "nodecheck-nvml-unavailable:"  # what the NVML probe prints before exiting 3
NO_DEVICES = "No devices were found"  # nvidia-smi, exit 6 (NVML_ERROR_NOT_FOUND)
NO_DEVICES_EXIT_CODES = (0, 6)

# python3 reads the NVML probe from stdin. Exit 3 means NVML could not answer (no nvidia-ml-py, no
# driver): then nvidia-smi answers instead, each query in its own section, and the facts say so. The
# clock, uptime and boot id sections time the NVLink error counters that follow them (rates between
# two reads); a node without `date` reads no clock, nothing else lost.
GPU_SCRIPT = f"""
if command -v python3 >/dev/null 2>&1; then
  python3 -
  rc=$?
  [ "$rc" -eq 3 ] || exit "$rc"
else
  echo "{UNAVAILABLE} python3 not found"
fi
section() {{ n=$1; shift; echo "@@nodecheck begin $n"; "$@" 2>&1; echo "@@nodecheck end $n rc=$?"; }}
# the first line of a one-line /proc file, by the shell's own `read` (no head/cat needed)
line() {{ IFS= read -r l < "$1" && printf '%s\n' "$l"; }}
section query-gpu nvidia-smi --query-gpu={",".join(QUERY_GPU_FIELDS)} --format=csv,noheader,nounits
section compute-apps nvidia-smi --query-compute-apps={",".join(COMPUTE_APPS_FIELDS)} --format=csv,noheader,nounits
section q nvidia-smi -q
section nvlink nvidia-smi nvlink -s
section clock date +%s.%N
section uptime line /proc/uptime
section boot-id line /proc/sys/kernel/random/boot_id
section nvlink-errors nvidia-smi nvlink -e
exit 0
"""
# 60 s: without persistence mode each nvidia-smi call of the fallback re-initialises every GPU
GPU = Probe(
    "gpu",
    ("sh", "-c", GPU_SCRIPT, "nodecheck-gpu"),
    timeout_s=60,
    stdin=NVML_PROBE_SCRIPT,
    local_call="nodecheck.probes.local:nvml",
)


def parse_gpu_probe(text: str) -> GpuFacts:
    """The GPU probe's output: NVML's JSON, or the nvidia-smi sections after the unavailable line."""
    if text.lstrip().startswith("{"):
        return parse_nvml_probe(text)
    first = text.split("\n", 1)[0]
    if not first.startswith(UNAVAILABLE):
        raise ParseError("gpu probe", "neither NVML JSON nor the nvidia-smi fallback", text)
    note = "NVML unavailable (" + first[len(UNAVAILABLE) :].strip() + "); read from nvidia-smi"
    sections = split_sections(text, "gpu probe")
    query = sections.require("query-gpu", "nvidia-smi --query-gpu")
    if query.text.strip() == NO_DEVICES and query.rc in NO_DEVICES_EXIT_CODES:
        # nvidia-smi's answer where the driver is up and sees no GPU: a fact (zero GPUs) for the
        # judges to weigh against what the playbook expects, not output that cannot be read
        return GpuFacts("nvidia-smi", None, None, (), note)
    if not query.ok:
        # nvidia-smi's own words are the diagnosis: "couldn't communicate with the NVIDIA driver",
        # "GPU has fallen off the bus" (exit 15), "Driver/library version mismatch" (exit 18)
        said = next((ln.strip() for ln in split_lines(query.text) if ln.strip()), "no output")
        raise ParseError("nvidia-smi", f"exit {query.rc}: {said}", query.text)

    def ok(name: str) -> str | None:
        section = sections.get(name)
        return section.text if section is not None and section.ok else None

    return gpu_facts_from_nvidia_smi(
        query_gpu=query.text,
        compute_apps=ok("compute-apps"),
        q=ok("q"),
        nvlink=ok("nvlink"),
        note=note,
        nvlink_errors=ok("nvlink-errors"),
        clock=node_clock(ok("clock"), ok("uptime"), ok("boot-id")),
    )


# Five checks read the same GPU probe output: parse each node's output once per run. Keyed by the
# text (pure parser, frozen facts); bounded so a long-lived process cannot grow without limit.
_parse_once = functools.lru_cache(maxsize=65536)(parse_gpu_probe)


def gpu_facts(out: Captures) -> GpuFacts:
    return _parse_once(out[GPU.name].stdout)


def _source(facts: GpuFacts) -> str:
    return "NVML" if facts.source == "nvml" else "nvidia-smi"


def _no_gpu(facts: GpuFacts) -> str:
    """How the source said it sees no GPU (GpuFacts has no GPU only where the source said so)."""
    said = "NVML lists none" if facts.source == "nvml" else f"nvidia-smi: {NO_DEVICES}"
    return f"no GPU found ({said})"


def _no_gpu_verdict(facts: GpuFacts, check: str) -> Verdict:
    # FAIL, not ERROR: the check runs here because the node is meant to have GPUs, and an ERROR never
    # drains; the health playbook runs gpu.health without gpu.count, so this is its only word on it
    return Verdict(
        Status.FAIL,
        f"{_no_gpu(facts)}; {check} expects GPUs on this node",
        observed={"gpus": 0, "source": facts.source},
        expected={"gpus": ">= 1"},
    )


# ---- gpu.count --------------------------------------------------------------------------------


class GpuCount(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    expect: int = Field(..., ge=0, strict=True, description="how many GPUs the node must show (8 on HGX)")
    name: str | None = Field(
        None, description='every GPU\'s product name must be this (e.g. "NVIDIA H100 80GB HBM3"); unset: not judged'
    )


@check("gpu.count", probes=[GPU], params=GpuCount)
def count(out: Captures, want: GpuCount) -> Iterator[Verdict]:
    """The node shows the expected number of GPUs (of the expected model)."""
    facts = gpu_facts(out)
    seen = len(facts.gpus)
    observed = {"gpus": seen, "pci": [g.pci_bus_id for g in facts.gpus], "source": facts.source}
    if not facts.gpus:
        status = Status.PASS if want.expect == 0 else Status.FAIL
        yield Verdict(status, f"{_no_gpu(facts)}, expected {want.expect}", "", observed, {"gpus": want.expect})
        return
    if seen != want.expect:
        listed = ", ".join(g.pci_bus_id or g.label for g in facts.gpus) or "none"
        yield Verdict(
            Status.FAIL,
            f"{seen} GPUs visible to {_source(facts)}, expected {want.expect} (seen: {listed})",
            "",
            observed,
            {"gpus": want.expect},
        )
    else:
        yield Verdict(Status.PASS, f"{seen} GPUs ({_source(facts)})", "", observed, {"gpus": want.expect})
    if want.name is not None:
        for gpu in facts.gpus:
            if gpu.name != want.name:
                product = gpu.name if gpu.name is not None else "product name not reported"
                yield Verdict(
                    Status.FAIL,
                    f"{gpu.label}: {product}, expected {want.name}",
                    gpu.label,
                    {"name": gpu.name},
                    {"name": want.name},
                )


# ---- gpu.health -------------------------------------------------------------------------------

_STATUS = {"fail": Status.FAIL, "warn": Status.WARN}


# facts gpu.health can insist on (Gpu field names)
REQUIRABLE = {
    "ecc_uncorrectable_volatile": "volatile ECC error count",
    "ecc_enabled": "ECC mode",
    "retired_pages_pending": "pending page retirement",
    "remapped_rows": "remapped rows",
    "clock_event_reasons": "clock-event reasons",
    "persistence_mode": "persistence mode",
    "pcie_width_current": "PCIe link",
    "nvlinks": "NVLink state",
    "temperature_c": "temperature",
    "power_limit_w": "power limit",
}


class GpuHealth(BaseModel):
    """Thresholds for gpu.health; every aspect is its own verdict per GPU."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ecc_uncorrectable_volatile: Ceiling = Field(
        Ceiling(fail_above=0), description="uncorrectable ECC errors since the driver loaded"
    )
    ecc_uncorrectable_aggregate: Ceiling | None = Field(
        None,
        description="lifetime uncorrectable ECC errors; unset: not judged (remapped rows tell "
        "whether they were repaired)",
    )
    ecc_mode: Action = Field("warn", description="ECC must be enabled (datacenter GPUs)")
    retired_pages_pending: Action = Field("fail", description="a page retirement waits for a reset")
    remap_pending: Action = Field("fail", description="a row remap waits for a GPU reset (Ampere+)")
    remap_failure: Action = Field("fail", description="a row remap failed: the GPU needs replacing")
    throttle_fail: list[str] = Field(
        ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"],
        description="clock-event reasons that fail the GPU",
    )
    throttle_warn: list[str] = Field(["sw_thermal_slowdown"], description="clock-event reasons that warn")
    persistence: Action = Field(
        "warn",
        description="persistence mode must be on (else every job "
        "pays driver start-up, and NVML state is lost between jobs)",
    )
    pcie: Action = Field(
        "fail",
        description="PCIe link below its maximum width/generation while "
        "busy; an idle GPU lowers its link on purpose, so idle only warns on width",
    )
    nvlink: Action = Field(
        "fail",
        description="NVLinks down: with expected_nvlinks, fewer active links "
        "than that; without it, any link the GPU lists as inactive",
    )
    expected_nvlinks: int | None = Field(
        None,
        ge=0,
        strict=True,
        description="active NVLinks each GPU must have (18 on H100 SXM; fewer on PCIe cards with NVLink bridges)",
    )
    require: list[str] = Field(
        ["ecc_uncorrectable_volatile", "clock_event_reasons"],
        description="facts that must be reported for a GPU to pass (a source that says nothing about "
        "them proves nothing); add remapped_rows on Ampere and newer",
    )
    temperature_c: Ceiling | None = Field(None, description="GPU temperature, °C")
    power_limit_w: Floor | None = Field(None, description="enforced power limit, W: a capped GPU slows the whole job")

    @model_validator(mode="after")
    def _known_facts(self) -> GpuHealth:
        for name in self.require:
            if name not in REQUIRABLE:
                raise ValueError(f"require: unknown fact {name!r}; known: {', '.join(REQUIRABLE)}")
        return self

    @model_validator(mode="after")
    def _known_reasons(self) -> GpuHealth:
        for reason in (*self.throttle_fail, *self.throttle_warn):
            if reason not in CLOCK_EVENT_REASONS:
                raise ValueError(f"unknown clock-event reason {reason!r}; known: {', '.join(CLOCK_EVENT_REASONS)}")
        return self


@check("gpu.health", probes=[GPU], params=GpuHealth)
def health(out: Captures, want: GpuHealth) -> Iterator[Verdict]:
    """Per GPU: ECC, retired pages, row remaps, throttling, persistence, PCIe link, NVLinks,
    temperature and power limit — each its own verdict naming the GPU."""
    facts = gpu_facts(out)
    if not facts.gpus:
        yield _no_gpu_verdict(facts, "gpu.health")
        return
    for gap in facts.gaps:
        yield Verdict(Status.ERROR, f"not read: {gap}", _gap_subject(gap))
    for gpu in facts.gpus:
        verdicts = list(_gpu_verdicts(gpu, want))
        missing = [name for name in want.require if not _reported(gpu, name)]
        if missing:
            verdicts.append(
                Verdict(
                    Status.ERROR,
                    f"{gpu.label}: {', '.join(REQUIRABLE[m] for m in missing)} "
                    f"not reported by {_source(facts)}; the playbook requires "
                    f"{'it' if len(missing) == 1 else 'them'} to judge the GPU",
                    gpu.label,
                    {"missing": missing},
                    {"require": list(want.require)},
                )
            )
        bad = [v for v in verdicts if v.status is not Status.PASS]
        yield from bad
        if not verdicts:
            yield Verdict(Status.ERROR, f"{gpu.label}: {_source(facts)} reported none of the health facts", gpu.label)
        elif not bad:
            observed = {k: val for v in verdicts for k, val in v.observed.items()}
            yield Verdict(Status.PASS, f"{gpu.label}: " + "; ".join(v.message for v in verdicts), gpu.label, observed)


def _reported(gpu: Gpu, name: str) -> bool:
    """Whether the source reported enough of a required fact for its verdict to mean something."""
    if name == "ecc_uncorrectable_volatile" and gpu.ecc_enabled is False:
        return True  # no counts without ECC; ecc_mode judges that instead
    if name == "remapped_rows":
        rows = gpu.remapped_rows
        return rows is not None and rows.pending is not None and rows.failure is not None
    if name == "pcie_width_current":
        return None not in (gpu.pcie_width_current, gpu.pcie_width_max, gpu.pcie_gen_current, gpu.pcie_gen_max)
    if name == "nvlinks":
        return gpu.nvlinks is not None and all(link.active is not None for link in gpu.nvlinks)
    return getattr(gpu, name) is not None


def _gap_subject(gap: str) -> str:
    head = gap.split(" ", 1)[0]
    return head if head.startswith("GPU") else ""


def _gpu_verdicts(gpu: Gpu, want: GpuHealth) -> Iterator[Verdict]:
    g = gpu.label
    if gpu.ecc_uncorrectable_volatile is not None:
        v = want.ecc_uncorrectable_volatile.judge(
            gpu.ecc_uncorrectable_volatile, what=f"{g}: volatile uncorrectable ECC", unit="errors", subject=g
        )
        yield _short(v, "ECC 0") if v.status is Status.PASS else v
    if want.ecc_uncorrectable_aggregate is not None and gpu.ecc_uncorrectable_aggregate is not None:
        v = want.ecc_uncorrectable_aggregate.judge(
            gpu.ecc_uncorrectable_aggregate, what=f"{g}: lifetime uncorrectable ECC", unit="errors", subject=g
        )
        yield _short(v, f"lifetime ECC {gpu.ecc_uncorrectable_aggregate}") if v.status is Status.PASS else v
    if want.ecc_mode != "off" and gpu.ecc_enabled is not None:
        yield (
            _ok(g, "ECC on")
            if gpu.ecc_enabled
            else Verdict(
                _STATUS[want.ecc_mode],
                f"{g}: ECC disabled, expected enabled",
                g,
                {"ecc_enabled": False},
                {"ecc_enabled": True},
            )
        )
    if want.retired_pages_pending != "off" and gpu.retired_pages_pending is not None:
        yield (
            Verdict(
                _STATUS[want.retired_pages_pending],
                f"{g}: page retirement pending (reset the GPU)",
                g,
                {"retired_pages_pending": True},
                {"retired_pages_pending": False},
            )
            if gpu.retired_pages_pending
            else _ok(g, "no retirement pending")
        )
    rows = gpu.remapped_rows
    if rows is not None:
        counts = f"correctable {_n(rows.correctable)}, uncorrectable {_n(rows.uncorrectable)}"
        seen = {
            "remap_pending": rows.pending,
            "remap_failure": rows.failure,
            "remapped_correctable": rows.correctable,
            "remapped_uncorrectable": rows.uncorrectable,
        }
        if want.remap_failure != "off" and rows.failure:
            yield Verdict(
                _STATUS[want.remap_failure],
                f"{g}: row remapping failed ({counts}); replace the GPU",
                g,
                seen,
                {"remap_failure": False},
            )
        if want.remap_pending != "off" and rows.pending:
            yield Verdict(
                _STATUS[want.remap_pending],
                f"{g}: row remap pending ({counts}); reset the GPU before the next job",
                g,
                seen,
                {"remap_pending": False},
            )
        if not rows.pending and not rows.failure and rows.pending is not None:
            yield _ok(g, "no remap pending")
    if gpu.clock_event_reasons is not None:
        yield from _throttle(gpu, want)
    if want.persistence != "off" and gpu.persistence_mode is not None:
        yield (
            _ok(g, "persistence on")
            if gpu.persistence_mode
            else Verdict(
                _STATUS[want.persistence],
                f"{g}: persistence mode off, expected on",
                g,
                {"persistence_mode": False},
                {"persistence_mode": True},
            )
        )
    if want.pcie != "off":
        yield from _pcie(gpu, want)
    if want.nvlink != "off":
        yield from _nvlink(gpu, want)
    if want.temperature_c is not None and gpu.temperature_c is not None:
        v = want.temperature_c.judge(gpu.temperature_c, what=f"{g}: temperature", unit="°C", subject=g)
        yield _short(v, f"{fmt(gpu.temperature_c)} °C") if v.status is Status.PASS else v
    if want.power_limit_w is not None and gpu.power_limit_w is not None:
        v = want.power_limit_w.judge(gpu.power_limit_w, what=f"{g}: power limit", unit="W", subject=g)
        yield _short(v, f"power limit {fmt(gpu.power_limit_w)} W") if v.status is Status.PASS else v


def _throttle(gpu: Gpu, want: GpuHealth) -> Iterator[Verdict]:
    g, active = gpu.label, gpu.clock_event_reasons or frozenset()
    found = False
    for reasons, status in ((want.throttle_fail, Status.FAIL), (want.throttle_warn, Status.WARN)):
        hit = sorted(r for r in active if r in reasons)
        if hit:
            found = True
            yield Verdict(
                status,
                f"{g}: clocks held down by {', '.join(hit)}, expected none of {', '.join(reasons)}",
                g,
                {"clock_event_reasons": sorted(active)},
                {"clock_event_reasons_not": list(reasons)},
            )
    if not found:
        yield _ok(g, "no throttling")


def _pcie(gpu: Gpu, want: GpuHealth) -> Iterator[Verdict]:
    g = gpu.label
    width, width_max = gpu.pcie_width_current, gpu.pcie_width_max
    gen, gen_max = gpu.pcie_gen_current, gpu.pcie_gen_max
    if width is None or width_max is None or gen is None or gen_max is None:
        return
    # NVIDIA: current gen/width "may be reduced when the GPU is not in use" (power saving), so a low
    # link is only a fault on a GPU known to be busy; None: the source did not say whether it idles
    idle = None if gpu.clock_event_reasons is None else "gpu_idle" in gpu.clock_event_reasons
    seen = {"pcie_gen": gen, "pcie_gen_max": gen_max, "pcie_width": width, "pcie_width_max": width_max, "idle": idle}
    expected = {"pcie_gen": gen_max, "pcie_width": width_max}
    if width < width_max:
        status = _STATUS[want.pcie] if idle is False else Status.WARN
        note = {
            True: " while idle; re-check under load",
            None: " (idle state unknown); re-check under load",
            False: "",
        }[idle]
        yield Verdict(status, f"{g}: PCIe link x{width}, expected x{width_max}{note}", g, seen, expected)
    elif gen < gen_max and idle is False:
        yield Verdict(
            _STATUS[want.pcie], f"{g}: PCIe gen {gen}, expected gen {gen_max} (GPU not idle)", g, seen, expected
        )
    elif gen < gen_max:
        why = "idle" if idle else "idle state unknown"
        yield _ok(g, f"PCIe gen{gen} x{width} (max gen{gen_max}; {why}: gen not judged)")
    else:
        yield _ok(g, f"PCIe gen{gen_max} x{width_max}")


def _nvlink(gpu: Gpu, want: GpuHealth) -> Iterator[Verdict]:
    g = gpu.label
    if gpu.nvlinks is None:
        if want.expected_nvlinks:
            yield Verdict(
                Status.ERROR, f"{g}: NVLink state not reported, expected {want.expected_nvlinks} active links", g
            )
        return
    down = [link.link for link in gpu.nvlinks if link.active is False]
    active = sum(1 for link in gpu.nvlinks if link.active)
    seen = {"nvlinks_active": active, "nvlinks_down": down}
    listed = f" (down: {', '.join(map(str, down))})" if down else ""
    if want.expected_nvlinks is not None:
        # the count decides: a GPU on PCIe NVLink bridges lists links that are simply not wired
        if active < want.expected_nvlinks:
            yield Verdict(
                _STATUS[want.nvlink],
                f"{g}: {active} NVLinks active, expected {want.expected_nvlinks}{listed}",
                g,
                seen,
                {"nvlinks_active": want.expected_nvlinks},
            )
        else:
            yield _ok(g, f"{active} NVLinks active")
    elif down:
        yield Verdict(
            _STATUS[want.nvlink],
            f"{g}: NVLink {', '.join(map(str, down))} down "
            f"({active} of {len(gpu.nvlinks)} active; set expected_nvlinks if not all are wired)",
            g,
            seen,
            {"nvlinks_down": []},
        )
    elif gpu.nvlinks:
        yield _ok(g, f"{active} NVLinks active")


def _ok(subject: str, text: str) -> Verdict:
    return Verdict(Status.PASS, text, subject)


def _short(v: Verdict, text: str) -> Verdict:
    return Verdict(v.status, text, v.subject, v.observed, v.expected)


def _n(value) -> str:
    return "?" if value is None else str(value)


# ---- gpu.processes ----------------------------------------------------------------------------


class GpuProcesses(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    max_memory_used_mib: float = Field(
        1024,
        ge=0,
        allow_inf_nan=False,
        description="GPU memory in use above this fails even with no process visible (a process in "
        "another PID namespace, a leaked context)",
    )
    ignore: list[str] = Field([], description="process names that may stay (e.g. a monitoring agent)")


@check("gpu.processes", probes=[GPU], params=GpuProcesses)
def processes(out: Captures, want: GpuProcesses) -> Iterator[Verdict]:
    """No compute process is left on any GPU and no GPU memory is held before the job starts."""
    facts = gpu_facts(out)
    if not facts.gpus:
        yield _no_gpu_verdict(facts, "gpu.processes")
        return
    for gpu in facts.gpus:
        g = gpu.label
        if gpu.processes is None:
            yield Verdict(Status.ERROR, f"{g}: compute processes not reported by {_source(facts)}", g)
            continue
        left = [p for p in gpu.processes if not _ignored(p.name, want.ignore)]
        kept = sorted({p.name for p in gpu.processes if _ignored(p.name, want.ignore)})
        for p in left:
            mem = "memory unknown" if p.used_memory_mib is None else f"{fmt(p.used_memory_mib)} MiB"
            yield Verdict(
                Status.FAIL,
                f"{g}: leftover process pid {p.pid} {p.name} using {mem}, expected none",
                g,
                {"pid": p.pid, "process": p.name, "used_memory_mib": p.used_memory_mib},
                {"processes": []},
            )
        used = gpu.memory_used_mib
        # what the ignored processes hold is theirs to hold; the rest has no visible owner
        owned = sum(p.used_memory_mib or 0.0 for p in gpu.processes if _ignored(p.name, want.ignore))
        orphan = None if used is None else used - owned
        besides = f" besides the ignored {', '.join(kept)}" if kept else ""
        if not left and orphan is not None and orphan > want.max_memory_used_mib:
            yield Verdict(
                Status.FAIL,
                f"{g}: {fmt(orphan)} MiB GPU memory in use with no process visible"
                f"{besides}, expected <= {fmt(want.max_memory_used_mib)} MiB",
                g,
                {"memory_used_mib": used},
                {"max_memory_used_mib": want.max_memory_used_mib},
            )
        elif not left and used is None:
            # "no process" is only half the promise: held memory is the other half
            yield Verdict(
                Status.ERROR,
                f"{g}: GPU memory in use not reported by {_source(facts)}; cannot tell whether memory is held",
                g,
            )
        elif not left:
            mem = f", {fmt(used)} MiB used"
            also = f" (ignored: {', '.join(kept)})" if kept else ""
            yield Verdict(Status.PASS, f"{g}: no compute process{also}{mem}", g)


COMM_MAX = 15  # Linux truncates /proc/<pid>/comm to 15 characters


def _ignored(name: str, ignore: list[str]) -> bool:
    """nvidia-smi names a process by its path, NVML (via /proc comm) by up to 15 characters of its
    base name: "dcgm-exporter" in the ignore list matches "/usr/bin/dcgm-exporter" and "dcgm-exporte"."""
    base = name.rsplit("/", 1)[-1]
    return any(base == want or (len(base) == COMM_MAX and want.startswith(base)) for want in ignore)


# ---- versions the GPU stack reports ------------------------------------------------------------


def reported_version(out: Captures, field: str, what: str) -> str:
    facts = gpu_facts(out)
    value = getattr(facts, field)
    if not value:
        raise ParseError("gpu probe", f"{_source(facts)} did not report the {what}")
    return value


@value_check(
    "gpu.driver",
    what="NVIDIA driver",
    probes=[GPU],
    doc="The NVIDIA driver version is pinned and/or the same on every node.",
)
def driver(out: Captures, _want: PinOrDrift) -> str:
    return reported_version(out, "driver_version", "driver version")


def per_gpu_version(out: Captures, field: str, what: str, not_in_use: str | None = None) -> str:
    """One node's value of a per-GPU version (VBIOS, GSP firmware) for a fleet drift check.

    GPUs of one model are expected to agree: the value is that version ("96.00.99.00.01"), so
    `expect:` pins read as usual (whatever the models, when all GPUs agree). Where GPUs of one model
    disagree, the value names each version with its GPUs ("96.00.74.00.01 (GPU7) + 96.00.99.00.01
    (GPU0, ..., GPU6)"): it matches no pin and no node whose GPUs agree, so the node FAILs with both
    versions in the message. A node mixing models with different versions reads "MODEL: version;
    MODEL: version". A GPU that does not report the version is an ERROR (the drift would be
    unknown), unless `not_in_use` names what "not reported" means (GSP firmware: NVML's NotSupported,
    nvidia-smi's N/A on a GPU that runs without it) and no read of it failed: then that is its value,
    compared like a version (GSP on here and off there is drift). A node without GPUs reads as absent.
    """
    facts = gpu_facts(out)
    if not facts.gpus:
        raise Absent(f"{_no_gpu(facts)}: no {what} to compare")
    failed = [gpu.label for gpu in facts.gpus if any(gap.startswith(f"{gpu.label} {field}:") for gap in facts.gaps)]
    missing = [gpu.label for gpu in facts.gpus if getattr(gpu, field) is None]
    if failed or (missing and not_in_use is None):
        raise ParseError("gpu probe", f"{_source(facts)} did not report the {what} of {', '.join(failed or missing)}")

    def value(gpu: Gpu) -> str:
        return str(getattr(gpu, field) or not_in_use)

    if len({value(gpu) for gpu in facts.gpus}) == 1:
        return value(facts.gpus[0])
    by_model: dict[str, dict[str, list[str]]] = {}
    for gpu in facts.gpus:
        by_model.setdefault(gpu.name or "unknown model", {}).setdefault(value(gpu), []).append(gpu.label)
    values = {model: _versions_with_gpus(versions) for model, versions in by_model.items()}
    if len(values) == 1:
        return next(iter(values.values()))
    return "; ".join(f"{model}: {value}" for model, value in sorted(values.items()))


def _versions_with_gpus(versions: dict[str, list[str]]) -> str:
    if len(versions) == 1:
        return next(iter(versions))
    # fewest GPUs first: the odd one out leads the message
    ordered = sorted(versions.items(), key=lambda item: (len(item[1]), item[0]))
    return " + ".join(f"{version} ({', '.join(labels)})" for version, labels in ordered)


@value_check(
    "gpu.vbios",
    what="GPU VBIOS",
    probes=[GPU],
    doc="The GPUs' VBIOS version is pinned and/or the same on every node, and the same on every GPU "
    "of one model within a node (a GPU flashed apart from its peers, an RMA replacement, reads as drift).",
)
def vbios(out: Captures, _want: PinOrDrift) -> str:
    return per_gpu_version(out, "vbios", "VBIOS version")


@value_check(
    "gpu.gsp_firmware",
    what="GPU GSP firmware",
    probes=[GPU],
    doc="The GPUs' GSP firmware version is pinned and/or the same on every node and every GPU of one "
    "model (the GSP firmware ships with the driver: a mismatch means a partly upgraded node).",
)
def gsp_firmware(out: Captures, _want: PinOrDrift) -> str:
    return per_gpu_version(out, "gsp_firmware", "GSP firmware version", not_in_use="no GSP firmware in use")

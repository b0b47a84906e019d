"""Typed GPU facts, the one shape both GPU sources produce: the NVML probe's JSON and nvidia-smi.

None always means "the source did not report it" (not supported, N/A, cut off), never zero:
a judge must not read a missing ECC counter as a clean one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Clock-event ("throttle") reasons, by the names NVML's nvmlClocksEventReason* / nvidia-smi's
# "Clocks Event Reasons" (older drivers: "Clocks Throttle Reasons") use, normalised to snake case.
CLOCK_EVENT_REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
)


@dataclass(frozen=True)
class RemappedRows:
    correctable: int | None
    uncorrectable: int | None
    pending: bool | None  # a remap waits for the next GPU reset
    failure: bool | None  # a remap failed: the GPU must be replaced


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    used_memory_mib: float | None  # None: the driver does not say (e.g. in a container)


@dataclass(frozen=True)
class NvLink:
    link: int
    active: bool | None
    speed_gbps: float | None = None


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str | None = None
    uuid: str | None = None
    serial: str | None = None
    vbios: str | None = None
    pci_bus_id: str | None = None  # normalised "0000:9b:00.0" (lower case, 4-digit domain)
    persistence_mode: bool | None = None
    ecc_enabled: bool | None = None  # current ECC mode
    ecc_pending_enabled: bool | None = None  # mode after the next reboot
    ecc_uncorrectable_volatile: int | None = None
    ecc_uncorrectable_aggregate: int | None = None
    ecc_correctable_volatile: int | None = None
    retired_pages_pending: bool | None = None
    retired_pages_dbe: int | None = None  # pages retired for double-bit errors
    retired_pages_sbe: int | None = None
    remapped_rows: RemappedRows | None = None
    clock_event_reasons: frozenset[str] | None = None  # active reasons, names from CLOCK_EVENT_REASONS
    temperature_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None  # max the GPU and the slot support together
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    nvlinks: tuple[NvLink, ...] | None = None  # None: unknown; (): the GPU has no NVLink
    processes: tuple[GpuProcess, ...] | None = None  # compute processes; None: unknown

    @property
    def label(self) -> str:
        """The sub-entity name every GPU verdict uses: "GPU3"."""
        return f"GPU{self.index}"


@dataclass(frozen=True)
class GpuFacts:
    source: str  # "nvml" or "nvidia-smi"
    driver_version: str | None
    cuda_driver_version: str | None  # "12.4": the highest CUDA the driver supports
    gpus: tuple[Gpu, ...]
    source_note: str = ""  # why nvidia-smi was used: "python3 not found", ...
    gaps: tuple[str, ...] = field(default=())  # what could not be read: "GPU3 remapped rows: N/A"

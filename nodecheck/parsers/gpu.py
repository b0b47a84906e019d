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


# NVLink error counters, by the names nodecheck uses for NVML's nvmlNvLinkErrorCounter_t and the
# rows of `nvidia-smi nvlink -e`: replay (data link retransmits), recovery (link retrains), CRC
# errors on flow-control units and on data packets; ecc_data where the link reports it (Hopper+).
NVLINK_ERROR_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data", "ecc_data")


@dataclass(frozen=True)
class NvLink:
    link: int
    active: bool | None
    speed_gbps: float | None = None
    # (counter name of NVLINK_ERROR_COUNTERS, value) pairs in that order, counts since the driver
    # loaded (or the counters' last reset); None: not read (inactive link, old driver, no `nvlink -e`);
    # a name absent: this GPU/driver does not report that counter (NotSupported / N/A)
    errors: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True)
class GpuFabric:
    """The GPU's NVLink fabric registration (NVML nvmlDeviceGetGpuFabricInfo[V], nvidia-smi -q
    "Fabric"): Fabric Manager (HGX NVSwitch boards) or the NVL72 rack's fabric registers each GPU."""

    state: str | None  # "completed", "in_progress", "not_started", "not_supported"
    # "success", or the failure in nvmlErrorString's words as nvidia-smi prints them ("Insufficient
    # Resources"); None before the registration completed (NVML: meaningful only once "completed")
    status: str | None
    # the NVLink domain (NVL72 rack), lower-case canonical UUID; all zeros on HGX (single-node fabric);
    # None: not completed, or a driver (535) that does not print it
    cluster_uuid: str | None
    clique_id: int | None  # the partition inside the domain; the job's GPUs must share it; 0: none assigned
    # sorted (name, word) pairs, names and words snake case as nvidia-smi -q's Fabric / Health rows:
    # ("bandwidth", "full"|"degraded"), ("route_recovery_in_progress", "true"|"false"), ("route_unhealthy",
    # ...), ("access_timeout_recovery", ...), ("incorrect_configuration", "none"|...), ("partition_assigned",
    # ...), ("gfm_state", "connected"|"disconnected"; NVML only), ("summary", "healthy"|...; nvidia-smi only).
    # Rows not reported (N/A, NOT_SUPPORTED, an old driver's v1 struct) are absent; () says nothing.
    health: tuple[tuple[str, str], ...] = ()


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
    fabric: GpuFabric | None = None  # None: not reported (old driver, pre-Hopper GPU, no such section)
    gsp_firmware: str | None = None  # "550.90.07"; None: no GSP, or not reported
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
    # when the node read it (for counter rates between two reads): wall clock (unix seconds), uptime
    # (seconds, /proc/uptime) and boot id (/proc/sys/kernel/random/boot_id: a reboot resets counters)
    clock: float | None = None
    uptime_s: float | None = None
    boot_id: str | None = None

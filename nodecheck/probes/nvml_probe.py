"""NVML probe: one JSON object with every GPU fact nodecheck judges, read through nvidia-ml-py.

SELF-CONTAINED: stdlib + `pynvml` (the nvidia-ml-py package) only, Python >= 3.6 syntax. nodecheck
sends this file as the stdin of `python3 -` to nodes that do not have nodecheck installed, and with
--local imports it and calls collect().

Output (stdout, exit 0): one JSON object, schema 1 (see collect()). Every per-GPU query is wrapped on
its own: NotSupported reads null; any other error reads null and adds an entry to "errors", so one
failing field never loses the others. A function that this driver's libnvidia-ml lacks
(FunctionNotFound) falls back to its older variant where there is one (see _Collector.call()).
Unavailable (stdout, exit 3): one line `nodecheck-nvml-unavailable: <reason>` when pynvml cannot be
imported, nvmlInit fails or the GPUs cannot be counted; the caller falls back to nvidia-smi.
"""

# sys is builtin: no file on sys.path can shadow it
import sys


def _builtin_os():
    """The builtin os module underneath `os`: posix, else nt (Windows), else None. (Unannotated: the
    two are different modules, and this file imports nothing that a stray file could shadow.)"""
    try:
        import posix

        return posix
    except ImportError:  # not a POSIX Python
        pass
    try:
        import nt

        return nt
    except ImportError:
        return None


def _drop_cwd_from_sys_path():
    """Remove '' / '.' / any entry naming the current directory from sys.path, in place.

    `python3 -` puts '' (the current directory: the SSH user's home) first on sys.path, so a stray
    json.py or pynvml.py there would shadow the real module. Runs before any other import, with only
    builtin modules (posix/nt are compiled in, never looked up on sys.path).
    """
    _osmod = _builtin_os()
    here = None
    if _osmod is not None:
        try:
            here = _osmod.stat(".")
        except Exception:  # the current directory was removed
            here = None
    kept = []
    for entry in sys.path:
        if entry in ("", "."):
            continue
        if here is not None and isinstance(entry, str):
            try:
                st = _osmod.stat(entry)
            except Exception:  # missing or unreadable: cannot be the current directory
                st = None
            if st is not None and here.st_ino and (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino):
                continue
        kept.append(entry)
    sys.path[:] = kept


if __name__ == "__main__":  # run as a script (`python3 -`), not imported by --local
    _drop_cwd_from_sys_path()

# after the sys.path clean-up, on purpose
import json  # noqa: E402 - must run after _drop_cwd_from_sys_path (a ./json.py must not shadow it)

# 2 adds per-GPU "fabric" and "gsp_firmware", per-link "errors", top-level "clock", "uptime_s", "boot_id"
SCHEMA = 2
UNAVAILABLE_PREFIX = "nodecheck-nvml-unavailable:"
EXIT_UNAVAILABLE = 3

# nvmlReturn_t codes (nvml.h), used when an old pynvml lacks the NVMLError_* subclass.
_ERROR_INVALID_ARGUMENT = 2
_ERROR_NOT_SUPPORTED = 3
_ERROR_FUNCTION_NOT_FOUND = 13
# nvml.h NVML_NVLINK_MAX_LINKS is 18 since Hopper; old pynvml copies say 6 or 12, newer ones 36
_NVLINK_MAX_LINKS_FLOOR = 18
# /proc/<pid>/comm holds at most TASK_COMM_LEN - 1 characters
_COMM_MAX = 15
# nvml.h NVML_DEVICE_MIG_ENABLE
_MIG_ENABLE = 1

# (name in nodecheck.parsers.gpu.CLOCK_EVENT_REASONS, pynvml constant names new and old, nvml.h bit).
# pynvml for drivers >= 535 names them nvmlClocksEventReason*, older ones nvmlClocksThrottleReason*;
# the literal is the nvml.h value, used when this pynvml has neither name.
_CLOCK_EVENT_REASONS = (
    ("gpu_idle", ("nvmlClocksEventReasonGpuIdle", "nvmlClocksThrottleReasonGpuIdle"), 0x1),
    (
        "applications_clocks_setting",
        ("nvmlClocksEventReasonApplicationsClocksSetting", "nvmlClocksThrottleReasonApplicationsClocksSetting"),
        0x2,
    ),
    ("sw_power_cap", ("nvmlClocksEventReasonSwPowerCap", "nvmlClocksThrottleReasonSwPowerCap"), 0x4),
    ("hw_slowdown", ("nvmlClocksEventReasonHwSlowdown", "nvmlClocksThrottleReasonHwSlowdown"), 0x8),
    ("sync_boost", ("nvmlClocksEventReasonSyncBoost", "nvmlClocksThrottleReasonSyncBoost"), 0x10),
    (
        "sw_thermal_slowdown",
        ("nvmlClocksEventReasonSwThermalSlowdown", "nvmlClocksThrottleReasonSwThermalSlowdown"),
        0x20,
    ),
    (
        "hw_thermal_slowdown",
        ("nvmlClocksEventReasonHwThermalSlowdown", "nvmlClocksThrottleReasonHwThermalSlowdown"),
        0x40,
    ),
    (
        "hw_power_brake_slowdown",
        ("nvmlClocksEventReasonHwPowerBrakeSlowdown", "nvmlClocksThrottleReasonHwPowerBrakeSlowdown"),
        0x80,
    ),
    (
        "display_clock_setting",
        ("nvmlClocksEventReasonDisplayClockSetting", "nvmlClocksThrottleReasonDisplayClockSetting"),
        0x100,
    ),
)

# Per-GPU keys in output order; a GPU whose handle cannot be had reports them all null.
GPU_FIELDS = (
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
    "fabric",
    "gsp_firmware",
    "processes",
    "mig_mode",
)

# nvml.h nvmlNvLinkErrorCounter_t, by the names of nodecheck.parsers.gpu.NVLINK_ERROR_COUNTERS
_NVLINK_ERROR_COUNTERS = (
    ("replay", "NVML_NVLINK_ERROR_DL_REPLAY", 0),
    ("recovery", "NVML_NVLINK_ERROR_DL_RECOVERY", 1),
    ("crc_flit", "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2),
    ("crc_data", "NVML_NVLINK_ERROR_DL_CRC_DATA", 3),
    ("ecc_data", "NVML_NVLINK_ERROR_DL_ECC_DATA", 4),
)
# nvml.h NVML_GPU_FABRIC_STATE_*
_FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
_FABRIC_STATE_COMPLETED = 3
# nvml.h nvmlGpuFabricInfo_v2: sizeof(nvmlGpuFabricInfo_v2_t) = 0x24 | 2 << 24
_FABRIC_INFO_V2 = 0x02000024
_FABRIC_UUID_LEN = 16
# nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*: (name as nvidia-smi -q prints it under Fabric / Health, shift,
# width mask, {value: word}); 0 is NOT_SUPPORTED everywhere and is left out
_FABRIC_HEALTH = (
    ("bandwidth", 0, 0x3, {1: "degraded", 2: "full"}),
    ("route_recovery_in_progress", 2, 0x3, {1: "true", 2: "false"}),
    ("route_unhealthy", 4, 0x3, {1: "true", 2: "false"}),
    ("access_timeout_recovery", 6, 0x3, {1: "true", 2: "false"}),
    (
        "incorrect_configuration",
        8,
        0xF,
        {
            1: "none",
            2: "incorrect_sysguid",
            3: "incorrect_chassis_sn",
            4: "no_partition",
            5: "insufficient_nvlinks",
            6: "incompatible_gpu_fw",
            7: "invalid_location",
            8: "gpu_state_invalid",
        },
    ),
    ("partition_assigned", 12, 0x3, {1: "true", 2: "false"}),
    ("gfm_state", 14, 0x3, {1: "connected", 2: "disconnected"}),
)
# bounded reads of the node's clock facts
_PROC_READ_MAX = 256

# Versioned functions, newest first: each older one is tried when the newer is missing from this
# pynvml (AttributeError) or from this driver's libnvidia-ml (FunctionNotFound, or the
# NVMLLibraryMismatchError that nvidia-ml-py's unversioned wrappers turn it into).
_CLOCK_EVENT_REASONS_FUNCTIONS = (
    "nvmlDeviceGetCurrentClocksEventReasons",  # driver >= 535
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)
_CUDA_DRIVER_VERSION_FUNCTIONS = ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")
# nvidia-ml-py >= 11.5: the unversioned wrapper calls _v3 only (driver >= 510); older drivers have _v2
# (>= 450), and the unversioned C symbol (v1 struct) everywhere, which older pynvml calls unversioned
_COMPUTE_PROCESSES_FUNCTIONS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
)

_MIB = float(2**20)


class NvmlUnavailable(Exception):
    """NVML cannot be used on this node at all (no pynvml, no driver, no library): use nvidia-smi."""


def _text(value):
    """pynvml < 11.5 returns bytes for strings, newer versions str."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _const(nv, names, literal):
    for name in names:
        value = getattr(nv, name, None)
        if isinstance(value, int):
            return value
    return literal


class _Collector:
    def __init__(self, nv, proc="/proc"):
        self.nv = nv
        self.proc = proc
        self.errors = []

    def _is(self, exc, class_name, code):
        cls = getattr(self.nv, class_name, None)
        if cls is not None and isinstance(exc, cls):
            return True
        return getattr(exc, "value", None) == code

    def not_supported(self, exc):
        return self._is(exc, "NVMLError_NotSupported", _ERROR_NOT_SUPPORTED)

    def invalid_argument(self, exc):
        return self._is(exc, "NVMLError_InvalidArgument", _ERROR_INVALID_ARGUMENT)

    def function_missing(self, exc):
        """The called function is missing below pynvml: try the older variant."""
        if isinstance(exc, AttributeError):
            return True
        mismatch = getattr(self.nv, "NVMLLibraryMismatchError", None)
        if isinstance(mismatch, type) and isinstance(exc, mismatch):
            return True
        return self._is(exc, "NVMLError_FunctionNotFound", _ERROR_FUNCTION_NOT_FOUND)

    def message(self, exc):
        if isinstance(exc, self.nv.NVMLError):
            return str(exc)
        return "%s: %s" % (type(exc).__name__, exc)

    def error(self, gpu, fields, exc):
        message = self.message(exc)
        for field in fields:
            self.errors.append({"gpu": gpu, "field": field, "error": message})

    def call(self, gpu, fields, function_names, *args, **options):
        """(ok, value) of pynvml.<function_name>(*args); not ok means every field in `fields` is null.

        `function_names` is one name or a tuple, newest variant first: a function missing from
        pynvml or from the driver (see function_missing()) moves on to the next one. NotSupported is
        silent; any other failure, every variant missing included, is one "errors" entry per field,
        except with silent_missing=True: then a function that this driver or pynvml lacks reads null
        like NotSupported (facts newer than the drivers nodecheck supports: fabric, GSP firmware).
        """
        silent_missing = options.get("silent_missing", False)
        if isinstance(function_names, str):
            function_names = (function_names,)
        absent, missing_error = [], None
        for function_name in function_names:
            function = getattr(self.nv, function_name, None)
            if function is None:
                absent.append(function_name)
                continue
            try:
                return True, function(*args)
            except Exception as exc:  # a pynvml/driver mismatch must not lose the other fields
                if self.function_missing(exc):
                    missing_error = "%s: %s" % (function_name, self.message(exc))
                    continue
                if not (isinstance(exc, self.nv.NVMLError) and self.not_supported(exc)):
                    self.error(gpu, fields, exc)
                return False, None
        if silent_missing:
            return False, None
        if missing_error is None:
            message = "pynvml has no %s" % " or ".join(absent)
        else:
            message = missing_error
            if absent:
                message += "; pynvml has no %s" % " or ".join(absent)
        for field in fields:
            self.errors.append({"gpu": gpu, "field": field, "error": message})
        return False, None

    def field(self, gpu, out, field, function_name, args, convert, silent_missing=False):
        ok, value = self.call(gpu, (field,), function_name, *args, silent_missing=silent_missing)
        if not ok:
            return
        try:
            out[field] = convert(value)
        except Exception as exc:
            self.error(gpu, (field,), exc)

    def system(self, field, function_name, convert):
        ok, value = self.call(None, (field,), function_name)
        if not ok:
            return None
        try:
            return convert(value)
        except Exception as exc:
            self.error(None, (field,), exc)
            return None

    def gpu(self, index):
        nv = self.nv
        out = {"index": index}
        for key in GPU_FIELDS:
            out[key] = None
        ok, handle = self.call(index, ("handle",), "nvmlDeviceGetHandleByIndex", index)
        if not ok:
            return out
        h = (handle,)
        self.field(index, out, "name", "nvmlDeviceGetName", h, _text)
        self.field(index, out, "uuid", "nvmlDeviceGetUUID", h, _text)
        self.field(index, out, "serial", "nvmlDeviceGetSerial", h, _text)
        self.field(index, out, "vbios", "nvmlDeviceGetVbiosVersion", h, _text)
        self.field(index, out, "pci_bus_id", "nvmlDeviceGetPciInfo", h, lambda p: _text(p.busId))
        self.field(index, out, "persistence_mode", "nvmlDeviceGetPersistenceMode", h, bool)

        ok, mode = self.call(index, ("ecc_enabled", "ecc_pending_enabled"), "nvmlDeviceGetEccMode", handle)
        if ok:
            out["ecc_enabled"], out["ecc_pending_enabled"] = bool(mode[0]), bool(mode[1])

        uncorrected = getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        corrected = getattr(nv, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
        volatile = getattr(nv, "NVML_VOLATILE_ECC", 0)
        aggregate = getattr(nv, "NVML_AGGREGATE_ECC", 1)
        for key, error_type, counter in (
            ("ecc_uncorrectable_volatile", uncorrected, volatile),
            ("ecc_uncorrectable_aggregate", uncorrected, aggregate),
            ("ecc_correctable_volatile", corrected, volatile),
        ):
            self.field(index, out, key, "nvmlDeviceGetTotalEccErrors", (handle, error_type, counter), int)

        self.field(index, out, "retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", h, bool)
        dbe = getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
        sbe = getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)
        # old pynvml returns a map object here: list() before len()
        self.field(
            index, out, "retired_pages_dbe", "nvmlDeviceGetRetiredPages", (handle, dbe), lambda pages: len(list(pages))
        )
        self.field(
            index, out, "retired_pages_sbe", "nvmlDeviceGetRetiredPages", (handle, sbe), lambda pages: len(list(pages))
        )

        self.field(index, out, "remapped_rows", "nvmlDeviceGetRemappedRows", h, _remapped_rows)

        self.field(
            index, out, "clock_event_reasons", _CLOCK_EVENT_REASONS_FUNCTIONS, h, lambda mask: _reason_names(nv, mask)
        )

        sensor = getattr(nv, "NVML_TEMPERATURE_GPU", 0)
        self.field(index, out, "temperature_c", "nvmlDeviceGetTemperature", (handle, sensor), int)
        self.field(index, out, "power_draw_w", "nvmlDeviceGetPowerUsage", h, lambda mw: mw / 1000.0)
        self.field(index, out, "power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", h, lambda mw: mw / 1000.0)

        ok, memory = self.call(index, ("memory_used_mib", "memory_total_mib"), "nvmlDeviceGetMemoryInfo", handle)
        if ok:
            out["memory_used_mib"] = memory.used / _MIB
            out["memory_total_mib"] = memory.total / _MIB

        self.field(index, out, "pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration", h, int)
        self.field(index, out, "pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", h, int)
        self.field(index, out, "pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth", h, int)
        self.field(index, out, "pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth", h, int)

        out["nvlinks"] = self.nvlinks(index, handle)
        out["fabric"] = self.fabric(index, handle)
        self.field(index, out, "gsp_firmware", "nvmlDeviceGetGspFirmwareVersion", h, _gsp_version, silent_missing=True)
        self.field(index, out, "processes", _COMPUTE_PROCESSES_FUNCTIONS, h, self.processes)
        # [current, pending]; NotSupported (no MIG on this GPU) reads null
        self.field(index, out, "mig_mode", "nvmlDeviceGetMigMode", h, lambda mode: mode[0] == _MIG_ENABLE)
        return out

    def nvlinks(self, index, handle):
        """[] when link 0 is NotSupported/InvalidArgument (no NVLink); stops at the first such link after."""
        nv = self.nv
        function = getattr(nv, "nvmlDeviceGetNvLinkState", None)
        if function is None:
            self.errors.append({"gpu": index, "field": "nvlinks", "error": "pynvml has no nvmlDeviceGetNvLinkState"})
            return None
        try:
            max_links = max(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 0)), _NVLINK_MAX_LINKS_FLOOR)
        except (TypeError, ValueError):
            max_links = _NVLINK_MAX_LINKS_FLOOR
        links = []
        for link in range(max_links):  # old pynvml's 6 or 12 would miss H100's 18 links
            try:
                active = bool(function(handle, link))
            except nv.NVMLError as exc:
                if self.not_supported(exc) or self.invalid_argument(exc):
                    break  # link 0: no NVLink at all; later: past the last link
                if link == 0:
                    self.error(index, ("nvlinks",), exc)
                    return None
                self.errors.append({"gpu": index, "field": "nvlinks", "error": "link %d: %s" % (link, exc)})
                active = None
            except Exception as exc:
                self.errors.append(
                    {"gpu": index, "field": "nvlinks", "error": "link %d: %s: %s" % (link, type(exc).__name__, exc)}
                )
                active = None
            links.append({"link": link, "active": active})
        for entry in links:
            # an inactive link's counters say nothing about the fabric; one read per counter per link
            entry["errors"] = self.link_errors(index, handle, entry["link"]) if entry["active"] else None
        return links

    def link_errors(self, index, handle, link):
        """{counter name: value} of one link; a counter NotSupported here is left out; null: none read."""
        nv = self.nv
        function = getattr(nv, "nvmlDeviceGetNvLinkErrorCounter", None)
        if function is None:
            return None
        counts = {}
        for name, constant, literal in _NVLINK_ERROR_COUNTERS:
            try:
                counts[name] = int(function(handle, link, _const(nv, (constant,), literal)))
            except Exception as exc:
                if self.function_missing(exc):
                    return None  # this driver has no such counters: not reported
                if isinstance(exc, nv.NVMLError) and (self.not_supported(exc) or self.invalid_argument(exc)):
                    continue  # this GPU/driver does not count it (e.g. crc_data on Hopper)
                self.errors.append(
                    {
                        "gpu": index,
                        "field": "nvlink_errors",
                        "error": "link %d %s: %s" % (link, name, self.message(exc)),
                    }
                )
        return counts or None

    def fabric(self, index, handle):
        """The GPU's fabric registration: nvmlDeviceGetGpuFabricInfoV (v2 struct, with the health mask),
        else the older nvmlDeviceGetGpuFabricInfo. Null where neither exists or the GPU has no fabric.

        The structures are this probe's own ctypes copies of nvml.h's: pynvml's own differ between
        releases (12.535's v1 struct had an 80-byte clusterUuid; a c_char array also stops at the first
        zero byte of a UUID), and the library writes nvml.h's layout whatever pynvml declares.
        """
        nv = self.nv
        try:
            ctypes, info_v2, info_v1 = _fabric_structs()
        except Exception as exc:  # no ctypes (a stripped Python): the fabric cannot be asked
            self.error(index, ("fabric",), exc)
            return None
        for name, struct, versioned in (
            ("nvmlDeviceGetGpuFabricInfoV", info_v2, True),
            ("nvmlDeviceGetGpuFabricInfo", info_v1, False),
        ):
            function = getattr(nv, name, None)
            if function is None:
                continue
            info = struct()
            if versioned:
                info.version = _FABRIC_INFO_V2
            try:
                function(handle, ctypes.byref(info))
            except Exception as exc:
                if self.function_missing(exc):
                    continue
                if not (isinstance(exc, nv.NVMLError) and self.not_supported(exc)):
                    self.error(index, ("fabric",), exc)
                return None
            try:
                return _fabric_fields(nv, info, versioned)
            except Exception as exc:
                self.error(index, ("fabric",), exc)
                return None
        return None  # neither function in this pynvml/driver: not reported

    def processes(self, running):
        out = []
        for process in running:
            pid = int(process.pid)
            used = getattr(process, "usedGpuMemory", None)
            out.append(
                {"pid": pid, "name": self.process_name(pid), "used_memory_mib": None if used is None else used / _MIB}
            )
        return out

    def process_name(self, pid):
        """/proc/<pid>/comm, or the running binary's longer basename where comm is cut at 15; else
        NVML's name. Never the command line: reading /proc/<pid>/cmdline takes the process's mmap
        lock, which a rank stuck in D state holds, so the read (and the Prolog with it) would block;
        /proc/<pid>/exe is read without it. argv[0] is also the process's to choose."""
        try:
            with open("%s/%d/comm" % (self.proc, pid)) as f:
                name = f.read().strip()
            if name:
                if len(name) == _COMM_MAX:
                    longer = self.exe_name(pid)
                    if longer is not None and len(longer) > len(name) and longer.startswith(name):
                        return longer
                return name
        except (OSError, UnicodeDecodeError):
            pass
        try:
            name = _text(self.nv.nvmlSystemGetProcessName(pid))
            return name or None
        except Exception:
            return None

    def exe_name(self, pid):
        """The basename of the binary /proc/<pid>/exe points to (" (deleted)" dropped), or None."""
        builtin_os = _builtin_os()  # posix: compiled in, never looked up on sys.path
        try:
            target = builtin_os.readlink("%s/%d/exe" % (self.proc, pid))
        except (OSError, ValueError, AttributeError):
            return None
        if target.endswith(" (deleted)"):
            target = target[: -len(" (deleted)")]
        name = target.rstrip("/").rsplit("/", 1)[-1]
        return name or None


def _fabric_structs():
    """(ctypes, nvmlGpuFabricInfo_v2_t, nvmlGpuFabricInfo_t) as nvml.h lays them out."""
    import ctypes

    class FabricInfoV2(ctypes.Structure):
        _fields_ = [
            ("version", ctypes.c_uint),
            ("clusterUuid", ctypes.c_ubyte * _FABRIC_UUID_LEN),
            ("status", ctypes.c_uint),  # nvmlReturn_t
            ("cliqueId", ctypes.c_uint),
            ("state", ctypes.c_ubyte),  # nvmlGpuFabricState_t is an unsigned char
            ("healthMask", ctypes.c_uint),
        ]

    class FabricInfo(ctypes.Structure):
        _fields_ = [
            ("clusterUuid", ctypes.c_ubyte * _FABRIC_UUID_LEN),
            ("status", ctypes.c_uint),
            ("cliqueId", ctypes.c_uint),
            ("state", ctypes.c_ubyte),
        ]

    return ctypes, FabricInfoV2, FabricInfo


def _fabric_fields(nv, info, versioned):
    """The probe's "fabric" object. Status, ClusterUUID and CliqueId mean something only once the
    registration completed (nvml.h: "Must be checked only if state returns complete"): null before."""
    code = int(info.state)
    if code not in _FABRIC_STATES:
        raise ValueError("unknown fabric state %d" % code)
    state = _FABRIC_STATES[code]
    out = {"state": state, "status": None, "cluster_uuid": None, "clique_id": None, "health": None}  # type: dict
    if code == _FABRIC_STATE_COMPLETED:
        status = int(info.status)
        if status == 0:
            out["status"] = "success"
        else:
            try:
                words = _text(nv.nvmlErrorString(status))
            except Exception:
                words = None
            # nvmlErrorString's words, as nvidia-smi -q prints them ("Insufficient Resources")
            out["status"] = words or "NVML error %d" % status
        raw = bytes(bytearray(info.clusterUuid))
        hexed = "".join("%02x" % b for b in bytearray(raw))
        out["cluster_uuid"] = "%s-%s-%s-%s-%s" % (hexed[:8], hexed[8:12], hexed[12:16], hexed[16:20], hexed[20:])
        out["clique_id"] = int(info.cliqueId)
    if versioned:
        mask = int(info.healthMask)
        health = {}
        for name, shift, width, words in _FABRIC_HEALTH:
            word = words.get((mask >> shift) & width)
            if word is not None:
                health[name] = word
        out["health"] = health
    return out


def _gsp_version(value):
    """The version as text; an empty one (no GSP firmware loaded) reads as null."""
    text = _text(value)
    if not isinstance(text, str):
        raise TypeError("GSP firmware version is %r, not a string" % (text,))
    return text.strip() or None


def _read_first(path):
    """The first line of a small /proc file, or None."""
    try:
        with open(path) as f:
            return f.read(_PROC_READ_MAX).split("\n", 1)[0].strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _clock_facts(proc="/proc"):
    """{"clock", "uptime_s", "boot_id"}: when this read happened, for counter rates between two reads."""
    import time

    uptime = _read_first(proc + "/uptime")
    try:
        uptime_s = float(uptime.split()[0]) if uptime else None
    except ValueError:
        uptime_s = None
    return {"clock": time.time(), "uptime_s": uptime_s, "boot_id": _read_first(proc + "/sys/kernel/random/boot_id")}


def _remapped_rows(rows):
    correctable, uncorrectable, pending, failure = rows
    return {
        "correctable": int(correctable),
        "uncorrectable": int(uncorrectable),
        "pending": bool(pending),
        "failure": bool(failure),
    }


def _reason_names(nv, mask):
    mask = int(mask)
    return [name for name, constants, literal in _CLOCK_EVENT_REASONS if mask & _const(nv, constants, literal)]


def _cuda_version(value):
    """12040 -> "12.4" (nvml.h NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR)."""
    value = int(value)
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


def collect():
    """The probe's JSON object as a dict; raises NvmlUnavailable where main() exits 3.

    {"schema": 2, "source": "nvml", "driver_version": str|null, "cuda_driver_version": "12.4"|null,
     "nvml_version": str|null, "clock": float, "uptime_s": float|null, "boot_id": str|null,
     "gpus": [{"index": int, <GPU_FIELDS>...}],
     "errors": [{"gpu": int|null, "field": str, "error": str}]}

    Per GPU, beyond the plain values: "nvlinks" [{"link": int, "active": bool|null,
    "errors": {"replay"|"recovery"|"crc_flit"|"crc_data"|"ecc_data": int}|null}], "fabric" null or
    {"state": "not_supported"|"not_started"|"in_progress"|"completed", "status": "success"|str|null,
    "cluster_uuid": str|null, "clique_id": int|null, "health": {name: word}|null}, "gsp_firmware" str|null.
    """
    try:
        import pynvml as nv
    except Exception as exc:  # ImportError, or a broken install
        raise NvmlUnavailable("cannot import pynvml (nvidia-ml-py): %s: %s" % (type(exc).__name__, exc)) from None
    try:
        nv.nvmlInit()
    except Exception as exc:
        raise NvmlUnavailable("nvmlInit failed: %s" % (exc,)) from None
    try:
        collector = _Collector(nv)
        try:
            count = int(nv.nvmlDeviceGetCount())
        except Exception as exc:
            raise NvmlUnavailable("nvmlDeviceGetCount failed: %s" % (exc,)) from None
        result = {"schema": SCHEMA, "source": "nvml"}
        result["driver_version"] = collector.system("driver_version", "nvmlSystemGetDriverVersion", _text)
        result["cuda_driver_version"] = collector.system(
            "cuda_driver_version", _CUDA_DRIVER_VERSION_FUNCTIONS, _cuda_version
        )
        result["nvml_version"] = collector.system("nvml_version", "nvmlSystemGetNVMLVersion", _text)
        result.update(_clock_facts())
        result["gpus"] = [collector.gpu(index) for index in range(count)]
        result["errors"] = collector.errors
        return result
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def main():
    try:
        result = collect()
    except NvmlUnavailable as exc:
        reason = " ".join(str(exc).split())  # one line, whatever the library said
        sys.stdout.write("%s %s\n" % (UNAVAILABLE_PREFIX, reason))
        sys.stdout.flush()
        return EXIT_UNAVAILABLE
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

SCHEMA = 1
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
    "processes",
    "mig_mode",
)

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

    def call(self, gpu, fields, function_names, *args):
        """(ok, value) of pynvml.<function_name>(*args); not ok means every field in `fields` is null.

        `function_names` is one name or a tuple, newest variant first: a function missing from
        pynvml or from the driver (see function_missing()) moves on to the next one. NotSupported is
        silent; any other failure, every variant missing included, is one "errors" entry per field.
        """
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
        if missing_error is None:
            message = "pynvml has no %s" % " or ".join(absent)
        else:
            message = missing_error
            if absent:
                message += "; pynvml has no %s" % " or ".join(absent)
        for field in fields:
            self.errors.append({"gpu": gpu, "field": field, "error": message})
        return False, None

    def field(self, gpu, out, field, function_name, args, convert):
        ok, value = self.call(gpu, (field,), function_name, *args)
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
        return links

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
        """/proc/<pid>/comm, or argv[0]'s longer basename where comm is cut at 15; else NVML's name."""
        try:
            with open("%s/%d/comm" % (self.proc, pid)) as f:
                name = f.read().strip()
            if name:
                if len(name) == _COMM_MAX:
                    longer = self.argv0_name(pid)
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

    def argv0_name(self, pid):
        """The basename of /proc/<pid>/cmdline's argv[0], or None."""
        try:
            with open("%s/%d/cmdline" % (self.proc, pid), "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0]
        except OSError:
            return None
        name = argv0.decode("utf-8", "replace").rstrip("/").rsplit("/", 1)[-1]
        return name or None


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

    {"schema": 1, "source": "nvml", "driver_version": str|null, "cuda_driver_version": "12.4"|null,
     "nvml_version": str|null, "gpus": [{"index": int, <GPU_FIELDS>...}],
     "errors": [{"gpu": int|null, "field": str, "error": str}]}
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

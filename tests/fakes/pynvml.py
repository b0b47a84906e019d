"""A fake of the nvidia-ml-py module (`import pynvml`), driven by a JSON GPU state file.

Same function, class and constant names and the same return types as nvidia-ml-py 12.x for the
calls nodecheck's NVML probe makes; see tests/fakes/README.md for what is faked, why, and the state
schema. The state is read at nvmlInit(): $NODECHECK_FAKE_NVML_STATE, else `nvml_state.json` next to
this file (so the harness can drop this module and a state into a node's site-packages).

Beyond tests/fakes/README.md's schema, the state may carry:
- top-level "missing_functions": [C symbol names] that this "driver's" libnvidia-ml lacks: calling a
  wrapper that needs one raises NVMLError_FunctionNotFound, as nvidia-ml-py's _nvmlGetFunctionPointer
  does on an older driver (e.g. "nvmlDeviceGetCurrentClocksEventReasons" before driver 535); the
  unversioned nvmlDeviceGetComputeRunningProcesses turns a missing _v3 into NVMLLibraryMismatchError,
  as nvidia-ml-py's throwOnVersionMismatch does;
- per GPU "mig_mode": [current, pending] (NVML_DEVICE_MIG_DISABLE/ENABLE); absent or null:
  nvmlDeviceGetMigMode raises NotSupported (a GPU without MIG).
- per GPU "clocks_mhz": {"graphics"|"sm"|"mem"|"video": MHz}: what nvmlDeviceGetClockInfo(handle,
  NVML_CLOCK_*) returns; a clock not listed (or no "clocks_mhz") raises NotSupported;
- per GPU "fabric", "gsp_firmware", "nvlink_errors" and "nvlink_errors_growth_per_s" (with a top-level
  "nvlink_errors_epoch"): the fabric registration, GSP firmware version and NVLink error counters, the
  last rising with time (tests/fakes/README.md has the shapes).

Plain Python 3 (no annotations, no newer syntax): it runs under whatever python3 a node has.
"""

import ctypes
import json
import os
import time
from typing import ClassVar

__version__ = "12.550.0+nodecheck.fake"

# --- constants (values from nvml.h / nvidia-ml-py) ---------------------------------------------
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_CLOCK_VIDEO = 3
NVML_SINGLE_BIT_ECC = 0
NVML_DOUBLE_BIT_ECC = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
NVML_NVLINK_MAX_LINKS = 18
NVML_DEVICE_MIG_DISABLE = 0x0
NVML_DEVICE_MIG_ENABLE = 0x1
NVML_DEVICE_PCI_BUS_ID_FMT = "%08X:%02X:%02X.0"
NVML_NVLINK_ERROR_DL_REPLAY = 0
NVML_NVLINK_ERROR_DL_RECOVERY = 1
NVML_NVLINK_ERROR_DL_CRC_FLIT = 2
NVML_NVLINK_ERROR_DL_CRC_DATA = 3
NVML_NVLINK_ERROR_DL_ECC_DATA = 4
NVML_NVLINK_ERROR_COUNT = 5
NVML_GSP_FIRMWARE_VERSION_BUF_SIZE = 0x40
NVML_GPU_FABRIC_UUID_LEN = 16
NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_STATE_NOT_STARTED = 1
NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2
NVML_GPU_FABRIC_STATE_COMPLETED = 3
NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE = 1
NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE = 2
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW = 0
NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW = 0x3
NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_TRUE = 1
NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE = 2
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY = 2
NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_RECOVERY = 0x3
NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE = 1
NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE = 2
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY = 4
NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_UNHEALTHY = 0x3
NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_TRUE = 1
NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE = 2
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY = 6
NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ACCESS_TIMEOUT_RECOVERY = 0x3
nvmlGpuFabricInfo_v2 = 0x02000024

nvmlClocksEventReasonGpuIdle = 0x1
nvmlClocksEventReasonApplicationsClocksSetting = 0x2
nvmlClocksEventReasonUserDefinedClocks = nvmlClocksEventReasonApplicationsClocksSetting
nvmlClocksEventReasonSwPowerCap = 0x4
nvmlClocksEventReasonHwSlowdown = 0x8
nvmlClocksEventReasonSyncBoost = 0x10
nvmlClocksEventReasonSwThermalSlowdown = 0x20
nvmlClocksEventReasonHwThermalSlowdown = 0x40
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80
nvmlClocksEventReasonDisplayClockSetting = 0x100
nvmlClocksEventReasonNone = 0
nvmlClocksThrottleReasonGpuIdle = nvmlClocksEventReasonGpuIdle
nvmlClocksThrottleReasonApplicationsClocksSetting = nvmlClocksEventReasonApplicationsClocksSetting
nvmlClocksThrottleReasonUserDefinedClocks = nvmlClocksEventReasonApplicationsClocksSetting
nvmlClocksThrottleReasonSwPowerCap = nvmlClocksEventReasonSwPowerCap
nvmlClocksThrottleReasonHwSlowdown = nvmlClocksEventReasonHwSlowdown
nvmlClocksThrottleReasonSyncBoost = nvmlClocksEventReasonSyncBoost
nvmlClocksThrottleReasonSwThermalSlowdown = nvmlClocksEventReasonSwThermalSlowdown
nvmlClocksThrottleReasonHwThermalSlowdown = nvmlClocksEventReasonHwThermalSlowdown
nvmlClocksThrottleReasonHwPowerBrakeSlowdown = nvmlClocksEventReasonHwPowerBrakeSlowdown
nvmlClocksThrottleReasonDisplayClockSetting = nvmlClocksEventReasonDisplayClockSetting
nvmlClocksThrottleReasonNone = 0

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_UNKNOWN = 999

# nvmlErrorString() texts as libnvidia-ml returns them
_ERROR_STRINGS = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
    NVML_ERROR_INSUFFICIENT_POWER: "Insufficient External Power",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_IRQ_ISSUE: "Interrupt request issue",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_CORRUPTED_INFOROM: "Corrupted infoROM",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
    NVML_ERROR_OPERATING_SYSTEM: "The operating system has blocked the request.",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
    NVML_ERROR_IN_USE: "In use by another client",
    NVML_ERROR_MEMORY: "Insufficient Memory",
    NVML_ERROR_NO_DATA: "No data",
    NVML_ERROR_INSUFFICIENT_RESOURCES: "Insufficient Resources",
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH: "Argument version mismatch",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


def nvmlErrorString(result):
    return _ERROR_STRINGS.get(result, "Unknown Error")


class NVMLLibraryMismatchError(Exception):
    """nvidia-ml-py raises this (not an NVMLError) from an unversioned wrapper whose symbol is missing."""


# --- errors: NVMLError(value) maps to its NVMLError_<CamelName> subclass, as in nvidia-ml-py ------
class NVMLError(Exception):
    _valClassMapping: ClassVar[dict] = {}

    def __new__(typ, value):
        if typ == NVMLError:
            typ = NVMLError._valClassMapping.get(value, typ)
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self):
        return nvmlErrorString(self.value)

    def __eq__(self, other):
        return self.value == other.value

    def __hash__(self):
        return hash(self.value)


def _extract_errors_as_classes():
    namespace = globals()
    for err_name in [n for n in list(namespace) if n.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + "".join(w.capitalize() for w in err_name[len("NVML_ERROR_") :].split("_"))
        err_val = namespace[err_name]

        def gen_new(val):
            def new(typ, *args):
                return NVMLError.__new__(typ, val)

            return new

        cls = type(class_name, (NVMLError,), {"__new__": gen_new(err_val)})
        cls.__module__ = __name__
        namespace[class_name] = cls
        NVMLError._valClassMapping[err_val] = cls


_extract_errors_as_classes()
# the classes nodecheck's tests name, spelled out so a reader (and a linter) can find them
NVMLError_Uninitialized = NVMLError._valClassMapping[NVML_ERROR_UNINITIALIZED]
NVMLError_InvalidArgument = NVMLError._valClassMapping[NVML_ERROR_INVALID_ARGUMENT]
NVMLError_NotSupported = NVMLError._valClassMapping[NVML_ERROR_NOT_SUPPORTED]
NVMLError_LibraryNotFound = NVMLError._valClassMapping[NVML_ERROR_LIBRARY_NOT_FOUND]
NVMLError_FunctionNotFound = NVMLError._valClassMapping[NVML_ERROR_FUNCTION_NOT_FOUND]
NVMLError_DriverNotLoaded = NVMLError._valClassMapping[NVML_ERROR_DRIVER_NOT_LOADED]
NVMLError_GpuIsLost = NVMLError._valClassMapping[NVML_ERROR_GPU_IS_LOST]
NVMLError_Unknown = NVMLError._valClassMapping[NVML_ERROR_UNKNOWN]


def _error(name):
    """The NVMLError subclass for a state file's error name: "DriverNotLoaded", "GpuIsLost", ..."""
    cls = globals().get("NVMLError_" + name)
    if cls is None or not issubclass(cls, NVMLError):
        raise ValueError("fake pynvml: unknown NVML error name %r in the state file" % (name,))
    return cls()


# --- return types ----------------------------------------------------------------------------
class _Struct:
    """Stands in for nvidia-ml-py's ctypes structures: attribute access, str fields already decoded."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in sorted(self.__dict__.items())))


class c_nvmlMemory_t(_Struct):
    pass


class nvmlPciInfo_t(_Struct):
    pass


class c_nvmlProcessInfo_t(_Struct):
    pass


# nvidia-ml-py 13.x's ctypes layouts (12.535's c_nvmlGpuFabricInfo_t had an 80-byte c_char clusterUuid;
# the library writes nvml.h's 16 bytes, which these match)
class c_nvmlGpuFabricInfo_t(ctypes.Structure):
    _fields_: ClassVar[list] = [
        ("clusterUuid", ctypes.c_uint8 * NVML_GPU_FABRIC_UUID_LEN),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint),
    ]


class c_nvmlGpuFabricInfo_v2_t(ctypes.Structure):
    _fields_: ClassVar[list] = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_uint8 * NVML_GPU_FABRIC_UUID_LEN),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint),
        ("healthMask", ctypes.c_uint32),
    ]

    def __init__(self):
        super().__init__(version=nvmlGpuFabricInfo_v2)


c_nvmlGpuFabricInfoV_t = c_nvmlGpuFabricInfo_v2_t


class c_nvmlDevice_t:
    """An opaque device handle."""

    def __init__(self, index):
        self._index = index

    def __repr__(self):
        return "<fake nvmlDevice_t %d>" % self._index


# --- state -----------------------------------------------------------------------------------
_state = None
_init_count = 0


def _state_path():
    return os.environ.get("NODECHECK_FAKE_NVML_STATE") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "nvml_state.json"
    )


def _check_init():
    if _init_count <= 0:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)


def _symbol(symbol):
    """nvidia-ml-py's _nvmlGetFunctionPointer: FunctionNotFound where the state's driver lacks it."""
    _check_init()
    if symbol in (_state.get("missing_functions") or ()):
        raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)


def _throw_on_version_mismatch(func):
    """nvidia-ml-py's throwOnVersionMismatch decorator for unversioned wrappers."""

    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except NVMLError_FunctionNotFound as e:
            raise NVMLLibraryMismatchError(
                "Unversioned function called and the pyNVML version does not "
                "match the NVML lib version. Either use matching pyNVML and "
                "NVML lib versions or use a versioned function such as " + func.__name__ + "_v2"
            ) from e

    wrapper.__name__ = func.__name__
    return wrapper


def _gpu(handle, function_name, *also_scripted_as):
    """The state of the GPU behind `handle`, raising what the state says `function_name` (or one of
    `also_scripted_as`: the unversioned name of a versioned wrapper) raises."""
    _symbol(function_name)
    if not isinstance(handle, c_nvmlDevice_t):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    gpu = _state["gpus"][handle._index]
    for name in (function_name,) + also_scripted_as:
        _raise_if_scripted(gpu, name)
    return gpu


def _raise_if_scripted(gpu, function_name):
    if function_name in gpu.get("not_supported", ()):
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    name = gpu.get("errors", {}).get(function_name)
    if name:
        raise _error(name)


def nvmlInit():
    global _state, _init_count
    with open(_state_path()) as f:
        state = json.load(f)
    if state.get("init_error"):
        raise _error(state["init_error"])
    _state = state
    _init_count += 1


def nvmlInitWithFlags(flags):
    nvmlInit()


def nvmlShutdown():
    global _init_count
    _check_init()
    _init_count -= 1


# --- system queries --------------------------------------------------------------------------
def nvmlSystemGetDriverVersion():
    _symbol("nvmlSystemGetDriverVersion")
    return _state["driver_version"]


def nvmlSystemGetCudaDriverVersion():
    _symbol("nvmlSystemGetCudaDriverVersion")
    return _state["cuda_driver_version"]


def nvmlSystemGetCudaDriverVersion_v2():
    _symbol("nvmlSystemGetCudaDriverVersion_v2")
    return _state["cuda_driver_version"]


def nvmlSystemGetNVMLVersion():
    _symbol("nvmlSystemGetNVMLVersion")
    return _state["nvml_version"]


def nvmlSystemGetProcessName(pid):
    _symbol("nvmlSystemGetProcessName")
    for gpu in _state["gpus"]:
        for process in gpu.get("processes") or ():
            if process["pid"] == pid:
                return process["name"]
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetCount():
    _symbol("nvmlDeviceGetCount")
    return len(_state["gpus"])


def nvmlDeviceGetHandleByIndex(index):
    _check_init()
    if not 0 <= index < len(_state["gpus"]):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    _raise_if_scripted(_state["gpus"][index], "nvmlDeviceGetHandleByIndex")
    return c_nvmlDevice_t(index)


# --- per-device queries ----------------------------------------------------------------------
def nvmlDeviceGetName(handle):
    return _gpu(handle, "nvmlDeviceGetName")["name"]


def nvmlDeviceGetUUID(handle):
    return _gpu(handle, "nvmlDeviceGetUUID")["uuid"]


def nvmlDeviceGetSerial(handle):
    return _gpu(handle, "nvmlDeviceGetSerial")["serial"]


def nvmlDeviceGetVbiosVersion(handle):
    return _gpu(handle, "nvmlDeviceGetVbiosVersion")["vbios"]


def nvmlDeviceGetPciInfo(handle):
    bus_id = _gpu(handle, "nvmlDeviceGetPciInfo")["pci_bus_id"]  # "00000000:18:00.0"
    domain, bus, rest = bus_id.split(":")
    device = rest.split(".")[0]
    return nvmlPciInfo_t(
        busId=bus_id,
        busIdLegacy="%04X:%s:%s.0" % (int(domain, 16), bus, device),
        domain=int(domain, 16),
        bus=int(bus, 16),
        device=int(device, 16),
        pciDeviceId=0x233010DE,
        pciSubSystemId=0x16C110DE,
    )


def nvmlDeviceGetPersistenceMode(handle):
    return _gpu(handle, "nvmlDeviceGetPersistenceMode")["persistence_mode"]


def nvmlDeviceGetEccMode(handle):
    return list(_gpu(handle, "nvmlDeviceGetEccMode")["ecc_mode"])  # [current, pending]


def nvmlDeviceGetTotalEccErrors(handle, errorType, counterType):
    counts = _gpu(handle, "nvmlDeviceGetTotalEccErrors")["ecc_errors"]
    if errorType not in (0, 1) or counterType not in (0, 1):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    kind = "uncorrected" if errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED else "corrected"
    counter = "aggregate" if counterType == NVML_AGGREGATE_ECC else "volatile"
    return counts[kind + "_" + counter]


def nvmlDeviceGetRetiredPagesPendingStatus(handle):
    return _gpu(handle, "nvmlDeviceGetRetiredPagesPendingStatus")["retired_pages_pending"]


def nvmlDeviceGetRetiredPages(handle, sourceFilter):
    pages = _gpu(handle, "nvmlDeviceGetRetiredPages")["retired_pages"]
    if sourceFilter == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR:
        return list(pages["dbe"])
    if sourceFilter == NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS:
        return list(pages["sbe"])
    raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)


def nvmlDeviceGetRemappedRows(handle):
    rows = _gpu(handle, "nvmlDeviceGetRemappedRows")["remapped_rows"]
    return tuple(rows)  # (corrRows, uncRows, isPending, failureOccurred)


def nvmlDeviceGetCurrentClocksEventReasons(handle):
    return _gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons")["clock_event_reasons"]


def nvmlDeviceGetCurrentClocksThrottleReasons(handle):
    return _gpu(handle, "nvmlDeviceGetCurrentClocksThrottleReasons")["clock_event_reasons"]


def nvmlDeviceGetTemperature(handle, sensor):
    gpu = _gpu(handle, "nvmlDeviceGetTemperature")
    if sensor != NVML_TEMPERATURE_GPU:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return gpu["temperature_c"]


_CLOCK_TYPE_NAMES = {
    NVML_CLOCK_GRAPHICS: "graphics",
    NVML_CLOCK_SM: "sm",
    NVML_CLOCK_MEM: "mem",
    NVML_CLOCK_VIDEO: "video",
}


def nvmlDeviceGetClockInfo(handle, type):
    clocks = _gpu(handle, "nvmlDeviceGetClockInfo").get("clocks_mhz")
    if type not in _CLOCK_TYPE_NAMES:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    if not clocks or _CLOCK_TYPE_NAMES[type] not in clocks:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # a state without the clock: not read on this GPU
    return int(clocks[_CLOCK_TYPE_NAMES[type]])  # MHz


def nvmlDeviceGetPowerUsage(handle):
    return _gpu(handle, "nvmlDeviceGetPowerUsage")["power_usage_mw"]


def nvmlDeviceGetEnforcedPowerLimit(handle):
    return _gpu(handle, "nvmlDeviceGetEnforcedPowerLimit")["enforced_power_limit_mw"]


def nvmlDeviceGetMemoryInfo(handle, version=None):
    gpu = _gpu(handle, "nvmlDeviceGetMemoryInfo")
    total, used = gpu["memory_total_bytes"], gpu["memory_used_bytes"]
    return c_nvmlMemory_t(total=total, used=used, free=total - used)


def nvmlDeviceGetCurrPcieLinkGeneration(handle):
    return _gpu(handle, "nvmlDeviceGetCurrPcieLinkGeneration")["pcie_gen_current"]


def nvmlDeviceGetMaxPcieLinkGeneration(handle):
    return _gpu(handle, "nvmlDeviceGetMaxPcieLinkGeneration")["pcie_gen_max"]


def nvmlDeviceGetCurrPcieLinkWidth(handle):
    return _gpu(handle, "nvmlDeviceGetCurrPcieLinkWidth")["pcie_width_current"]


def nvmlDeviceGetMaxPcieLinkWidth(handle):
    return _gpu(handle, "nvmlDeviceGetMaxPcieLinkWidth")["pcie_width_max"]


def nvmlDeviceGetNvLinkState(handle, link):
    states = _gpu(handle, "nvmlDeviceGetNvLinkState").get("nvlink_states")
    if states is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # a GPU without NVLink
    if not 0 <= link < len(states):  # the driver's limit, not pynvml's constant
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return states[link]  # NVML_FEATURE_ENABLED / _DISABLED


def _compute_processes(handle, symbol):
    # "not_supported"/"errors" scripted under the unversioned name apply to every variant
    processes = _gpu(handle, symbol, "nvmlDeviceGetComputeRunningProcesses").get("processes") or []
    return [
        c_nvmlProcessInfo_t(
            pid=p["pid"], usedGpuMemory=p.get("usedGpuMemory"), gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF
        )
        for p in processes
    ]


def nvmlDeviceGetComputeRunningProcesses_v2(handle):
    return _compute_processes(handle, "nvmlDeviceGetComputeRunningProcesses_v2")


def nvmlDeviceGetComputeRunningProcesses_v3(handle):
    return _compute_processes(handle, "nvmlDeviceGetComputeRunningProcesses_v3")


@_throw_on_version_mismatch
def nvmlDeviceGetComputeRunningProcesses(handle):
    return nvmlDeviceGetComputeRunningProcesses_v3(handle)  # as nvidia-ml-py >= 11.5


def nvmlDeviceGetMigMode(handle):
    mode = _gpu(handle, "nvmlDeviceGetMigMode").get("mig_mode")
    if mode is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # a GPU without MIG
    return [int(mode[0]), int(mode[1])]  # [current, pending]


def nvmlDeviceGetGspFirmwareVersion(handle, version=None):
    gsp = _gpu(handle, "nvmlDeviceGetGspFirmwareVersion").get("gsp_firmware")
    if gsp is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # no GSP firmware on this GPU
    raw = gsp.encode()[: NVML_GSP_FIRMWARE_VERSION_BUF_SIZE - 1]
    if version is not None:  # the caller's buffer, as nvidia-ml-py allows
        version.value = raw
        return NVML_SUCCESS
    return raw  # bytes: nvidia-ml-py returns the c_char buffer's .value undecoded here


# --- fabric ------------------------------------------------------------------------------------
_FABRIC_STATE_NAMES = {
    "not_supported": NVML_GPU_FABRIC_STATE_NOT_SUPPORTED,
    "not_started": NVML_GPU_FABRIC_STATE_NOT_STARTED,
    "in_progress": NVML_GPU_FABRIC_STATE_IN_PROGRESS,
    "completed": NVML_GPU_FABRIC_STATE_COMPLETED,
}


def _fabric_target(gpuFabricInfo):
    """The structure behind byref(struct) (or the structure itself), as the C library would write it."""
    target = getattr(gpuFabricInfo, "_obj", gpuFabricInfo)
    if not isinstance(target, ctypes.Structure):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return target


def _fill_fabric(handle, symbol, gpuFabricInfo, versioned):
    fabric = _gpu(handle, symbol).get("fabric")
    info = _fabric_target(gpuFabricInfo)
    if versioned and getattr(info, "version", None) != nvmlGpuFabricInfo_v2:
        raise NVMLError(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    if fabric is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # no fabric (PCIe card, pre-Hopper GPU)
    uuid = bytes.fromhex(fabric.get("cluster_uuid", "0" * 32).replace("-", ""))
    for i, byte in enumerate(uuid[:NVML_GPU_FABRIC_UUID_LEN]):
        info.clusterUuid[i] = byte
    info.status = int(fabric.get("status", NVML_SUCCESS))
    info.cliqueId = int(fabric.get("clique_id", 0))
    info.state = _FABRIC_STATE_NAMES[fabric["state"]]
    if versioned:
        info.healthMask = int(fabric.get("health_mask", 0))
    return NVML_SUCCESS


def nvmlDeviceGetGpuFabricInfo(device, gpuFabricInfo):
    return _fill_fabric(device, "nvmlDeviceGetGpuFabricInfo", gpuFabricInfo, versioned=False)


def nvmlDeviceGetGpuFabricInfoV(device, gpuFabricInfo):
    return _fill_fabric(device, "nvmlDeviceGetGpuFabricInfoV", gpuFabricInfo, versioned=True)


# --- NVLink error counters ---------------------------------------------------------------------
_NVLINK_COUNTER_NAMES = {
    NVML_NVLINK_ERROR_DL_REPLAY: "replay",
    NVML_NVLINK_ERROR_DL_RECOVERY: "recovery",
    NVML_NVLINK_ERROR_DL_CRC_FLIT: "crc_flit",
    NVML_NVLINK_ERROR_DL_CRC_DATA: "crc_data",
    NVML_NVLINK_ERROR_DL_ECC_DATA: "ecc_data",
}


def nvmlDeviceGetNvLinkErrorCounter(device, link, counter):
    gpu = _gpu(device, "nvmlDeviceGetNvLinkErrorCounter")
    states = gpu.get("nvlink_states")
    if states is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if not 0 <= link < len(states) or counter not in _NVLINK_COUNTER_NAMES:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    name = _NVLINK_COUNTER_NAMES[counter]
    counts = (gpu.get("nvlink_errors") or {}).get(str(link)) or {}
    if name not in counts:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # this GPU does not count it
    value = int(counts[name])
    growth = (gpu.get("nvlink_errors_growth_per_s") or {}).get(str(link)) or {}
    if name in growth:
        # counters that rise while the node runs: value at the state's epoch plus rate x elapsed seconds
        elapsed = max(0.0, time.time() - float(_state["nvlink_errors_epoch"]))
        value += int(float(growth[name]) * elapsed)
    return value

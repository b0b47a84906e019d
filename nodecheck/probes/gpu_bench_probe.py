"""GPU benchmark probe: GEMM TFLOPS, HBM/PCIe/P2P bandwidth with NVML telemetry, or an SDC checksum screen.

SELF-CONTAINED: stdlib + the GPU library (torch or cupy; pynvml for telemetry) only, Python >= 3.8
syntax. nodecheck sends this file as the stdin of `python3 - ARGS...` on the node or inside the job's
container, so the figures are those of the library, CUDA and cuBLAS the job itself gets.

Args: --mode perf|sdc, --backend auto|torch|cupy, --gpus all|0,1,3, --measure gemm,hbm,pcie,p2p,
--duration-s F, --gemm-size N, --dtypes bf16,fp16,fp8[,fp32], --copy-mib N, --pcie-mib N, --p2p-mib N,
--sdc-size N, --sdc-steps N, --sdc-seed N, --sdc-dtype fp32|fp16|bf16, --telemetry-interval-s F.
An unknown or out-of-bounds argument: argparse's usage on stderr, exit 2.

Output (stdout, exit 0): one JSON object, schema 1:
{"schema": 1, "mode": "perf"|"sdc",
 "backend": {"name": "torch"|"cupy", "version": str, "blas": str|null, "cuda_runtime": "12.4"|null,
             "driver": "550.90.07"|null, "cuda_driver": 12040|null},
 "gpus": [{"index": int, "name": str, "uuid": str|null, "pci_bus_id": str|null, "memory_bytes": int|null,
           "cc": "9.0"|null,
           perf: "gemm": {dtype: {"tflops", "size", "iterations", "seconds"} | {"error"} | {"unsupported"}},
                 "hbm"|"h2d"|"d2h": {"gbps", "bytes", "iterations", "seconds"} | {"error"},
                 "p2p": {"<peer index>": {"gbps", "bytes", "iterations", "seconds"} | {"error"}},
                 "telemetry": {"source": "pynvml", "samples": int, "sm_clock_mhz"|"mem_clock_mhz"|"power_w"|
                               "temp_c": {"min", "max", "mean"}|null, "throttle_reasons": [name, ...]}
                              | {"source": null, "error": str},
           sdc:  "sdc": {"checksum": sha256 hex, "dtype", "size", "steps", "seed", "repeat_equal": bool,
                         "finite": bool, "seconds": float} | {"error"},
           "errors": [str]}],
 "errors": [str]}
Only the phases measured appear (perf: no "sdc"; sdc: no "gemm"/"hbm"/"h2d"/"d2h"/"p2p"/"telemetry"). An
exception in one GPU's phase becomes that phase's {"error": ...} (300 characters at most): one failing
figure never loses the others.
Unavailable (stdout, exit 3): one line `nodecheck-gpubench-unavailable: <reason>` when neither library
can be imported with a CUDA device, or no selected GPU exists.

Timing: the library's CUDA events on each GPU's own stream (device time, not wall time). All GPUs run in
parallel, one thread each, phase by phase (a barrier between phases, so no GPU's copies overlap another
GPU's GEMMs).
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
    json.py, cupy.py or torch.py there would shadow the real module. Runs before any other import, with
    only builtin modules (posix/nt are compiled in, never looked up on sys.path).
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


if __name__ == "__main__":  # run as a script (`python3 -`)
    _drop_cwd_from_sys_path()

# after the sys.path clean-up, on purpose
import argparse  # noqa: E402 - must run after _drop_cwd_from_sys_path (a ./json.py must not shadow it)
import ctypes  # noqa: E402
import hashlib  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

SCHEMA = 1
UNAVAILABLE_PREFIX = "nodecheck-gpubench-unavailable:"
EXIT_UNAVAILABLE = 3
EXIT_USAGE = 2

# bounds on what the caller may ask (a typo must not allocate a terabyte or loop for a day)
MAX_GEMM_SIZE = 65536
MAX_MIB = 65536
MAX_STEPS = 1000
MAX_GPUS = 64
MAX_DURATION_S = 3600.0
MAX_GEMM_ITERATIONS = 1000000
MIN_GEMM_ITERATIONS = 3
ERROR_MAX = 300
# timed copies per bandwidth figure (after one untimed warm-up copy): a 1 GiB HBM copy is ~0.7 ms on
# an H100, a 256 MiB PCIe copy ~5 ms, so these stay far above the events' ~0.5 us resolution
COPY_ITERATIONS = 10
TRANSFER_ITERATIONS = 5

DTYPES = ("bf16", "fp16", "fp8", "fp32")
SDC_DTYPES = ("fp32", "fp16", "bf16")
MEASURES = ("gemm", "hbm", "pcie", "p2p")
_MIB = 1 << 20

# (name as nodecheck.parsers.gpu.CLOCK_EVENT_REASONS spells it, pynvml constant names new and old, nvml.h bit)
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
_CLOCK_EVENT_REASONS_FUNCTIONS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
# nvml.h nvmlClockType_t and nvmlTemperatureSensors_t, used when this pynvml lacks the constant
_NVML_CLOCK_SM = 1
_NVML_CLOCK_MEM = 2
_NVML_TEMPERATURE_GPU = 0


class Unavailable(Exception):
    """No usable GPU library or device: the caller gets the one-line unavailable answer (exit 3)."""


def _message(exc):
    """An exception as one bounded line."""
    text = " ".join(("%s: %s" % (type(exc).__name__, exc)).split())
    return text[:ERROR_MAX]


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _version_from_int(value):
    """12040 -> "12.4" (CUDA's major*1000 + minor*10)."""
    value = int(value)
    return "%d.%d" % (value // 1000, (value % 1000) // 10)


def _uuid_text(raw):
    """16 raw bytes (cudaDeviceProp.uuid) -> "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as NVML prints it."""
    if isinstance(raw, str):
        raw = raw.strip()
        if not raw:
            return None
        return raw if raw.startswith(("GPU-", "MIG-")) else "GPU-" + raw
    raw = bytes(raw)
    if len(raw) != 16 or not any(raw):
        return None
    h = raw.hex()
    return "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def _bus_id(domain, bus, device):
    """nvml.h NVML_DEVICE_PCI_BUS_ID_FMT: "%08X:%02X:%02X.0"."""
    return "%08X:%02X:%02X.0" % (int(domain), int(bus), int(device))


def _normal_bus_id(text):
    """NVML's "00000000:18:00.0" and CUDA's "0000:18:00.0" compare equal: domain as an int, rest upper."""
    try:
        domain, rest = str(text).strip().split(":", 1)
        return "%x:%s" % (int(domain, 16), rest.upper())
    except Exception:
        return None


# --- the library boundary: everything the measurements need, one class per library ---------------
class _Backend:
    """What the measuring code calls. Each method runs on the calling thread's current device (set by
    `device(i)`), so the measuring code is written once for both libraries."""

    name = ""
    version = ""

    def device_count(self):
        raise NotImplementedError

    def properties(self, index):
        """{"name", "uuid", "pci_bus_id", "memory_bytes", "cc": (major, minor)|None}"""
        raise NotImplementedError


class _Torch(_Backend):
    name = "torch"

    def __init__(self, sdc):
        if sdc:
            # cuBLAS is deterministic only with a fixed workspace config, set before cuBLAS starts
            # (PyTorch's reproducibility notes); use_deterministic_algorithms raises on matmul otherwise
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch = importlib.import_module("torch")  # typed as a module: no stubs needed where torch is absent
        if not torch.cuda.is_available():
            raise Unavailable("torch %s: torch.cuda.is_available() is False" % (torch.__version__,))
        self.torch = torch
        self.version = _text(torch.__version__)
        # fp32 means fp32: TF32 would be a different (faster, less exact) figure and a different checksum
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        if sdc:
            torch.backends.cudnn.deterministic = True
            try:
                torch.use_deterministic_algorithms(True, warn_only=True)
            except Exception:  # older torch: no warn_only
                pass

    def device_count(self):
        return int(self.torch.cuda.device_count())

    def blas(self):
        # torch has no cuBLAS version call; its pip wheels carry cuBLAS as the nvidia-cublas-cu* package
        try:
            from importlib import metadata
        except ImportError:
            return None
        for dist in ("nvidia-cublas-cu12", "nvidia-cublas-cu13", "nvidia-cublas-cu11", "nvidia-cublas"):
            try:
                return "cuBLAS " + metadata.version(dist)
            except Exception:
                continue
        return None

    def cuda_runtime(self):
        return self.torch.version.cuda

    def cuda_driver(self):
        return None  # torch does not expose it; pynvml's nvmlSystemGetCudaDriverVersion fills it

    def properties(self, index):
        p = self.torch.cuda.get_device_properties(index)
        uuid = getattr(p, "uuid", None)
        bus = None
        if getattr(p, "pci_bus_id", None) is not None:  # torch >= 2.4
            bus = _bus_id(getattr(p, "pci_domain_id", 0), p.pci_bus_id, getattr(p, "pci_device_id", 0))
        return {
            "name": _text(p.name),
            "uuid": _uuid_text(str(uuid)) if uuid is not None else None,
            "pci_bus_id": bus,
            "memory_bytes": int(p.total_memory),
            "cc": (int(p.major), int(p.minor)),
        }

    def device(self, index):
        return self.torch.cuda.device(index)

    def stream(self, index):
        s = self.torch.cuda.Stream(device=index)
        return s, self.torch.cuda.stream(s)

    def event(self):
        return self.torch.cuda.Event(enable_timing=True)

    def record(self, event, stream):
        event.record(stream)

    def elapsed_s(self, start, end):
        end.synchronize()
        return start.elapsed_time(end) / 1000.0

    def synchronize(self, index):
        self.torch.cuda.synchronize(index)

    def _dtype(self, name):
        t = self.torch
        return {"fp32": t.float32, "fp16": t.float16, "bf16": t.bfloat16}[name]

    def gemm(self, index, dtype, n, cc):
        """A callable that runs one n x n x n GEMM of `dtype` on the current device and stream."""
        t = self.torch
        dev = t.device("cuda", index)
        if dtype == "fp8":
            if cc is None or tuple(cc) < (8, 9):
                raise _Unsupported(
                    "fp8 needs compute capability >= 8.9 (this GPU: %s)" % ("%d.%d" % tuple(cc) if cc else "unknown")
                )
            if not hasattr(t, "float8_e4m3fn") or not hasattr(t, "_scaled_mm"):
                raise _Unsupported("fp8 needs torch.float8_e4m3fn and torch._scaled_mm (torch >= 2.1)")
            if n % 16:
                raise _Unsupported("fp8 GEMM needs a size divisible by 16 (got %d)" % n)
            a = t.randn((n, n), device=dev).to(t.float8_e4m3fn)
            # _scaled_mm wants the second operand column-major: the transpose of a row-major matrix
            b = t.randn((n, n), device=dev).to(t.float8_e4m3fn).t()
            one = t.tensor(1.0, device=dev, dtype=t.float32)

            def run_fp8():
                t._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=t.bfloat16)

            return run_fp8
        tdt = self._dtype(dtype)
        a = t.randn((n, n), device=dev, dtype=tdt)
        b = t.randn((n, n), device=dev, dtype=tdt)
        c = t.empty((n, n), device=dev, dtype=tdt)

        def run():
            t.mm(a, b, out=c)

        return run

    def device_buffer(self, index, nbytes):
        return self.torch.empty((nbytes,), dtype=self.torch.uint8, device=self.torch.device("cuda", index))

    def host_buffer(self, nbytes):
        return self.torch.empty((nbytes,), dtype=self.torch.uint8, pin_memory=True)

    def copy(self, dst, src, stream):
        """dst <- src, asynchronously on `stream` (device to device, host to device or device to host)."""
        dst.copy_(src, non_blocking=True)

    def can_access_peer(self, i, j):
        return bool(self.torch.cuda.can_device_access_peer(i, j))

    def enable_peer(self, i, j):
        pass  # torch's caching allocator enables peer access on the first copy between the two devices

    def sdc_random(self, index, seed, n, steps, dtype):
        """The SDC inputs: X0 and `steps` W_k drawn in order from the device's generator seeded `seed`."""
        t = self.torch
        dev = t.device("cuda", index)
        g = t.Generator(device=dev)
        g.manual_seed(seed)
        tdt = self._dtype(dtype)
        x = t.randn((n, n), generator=g, device=dev, dtype=t.float32).to(tdt)
        scale = 1.0 / math.sqrt(n)  # keeps X @ W of order 1, so tanh stays away from saturation
        ws = (((t.randn((n, n), generator=g, device=dev, dtype=t.float32) * scale).to(tdt)) for _ in range(steps))
        return x, ws

    def sdc_step(self, x, w):
        return self.torch.tanh(self.torch.mm(x, w))

    def to_host_bytes(self, x):
        host = x.contiguous().cpu()
        # ctypes, not numpy: a container's torch may come without numpy
        return ctypes.string_at(host.data_ptr(), host.numel() * host.element_size())

    def all_finite(self, x):
        return bool(self.torch.isfinite(x).all().item())


class _Unsupported(Exception):
    """A figure this GPU or library cannot give (fp8 on Ampere, bf16 with cupy): its error, not a failure."""


class _Cupy(_Backend):
    name = "cupy"

    def __init__(self, sdc):
        # CuPy's default already is CUPY_TF32=0; pinned here so an inherited environment cannot turn it on
        os.environ["CUPY_TF32"] = "0"
        cupy = importlib.import_module("cupy")
        self.cupy = cupy
        self.version = _text(getattr(cupy, "__version__", "unknown"))
        try:
            count = int(cupy.cuda.runtime.getDeviceCount())
        except Exception as exc:
            raise Unavailable("cupy %s: %s" % (self.version, _message(exc))) from None
        if count < 1:
            raise Unavailable("cupy %s: no CUDA device" % (self.version,))

    def device_count(self):
        return int(self.cupy.cuda.runtime.getDeviceCount())

    def blas(self):
        cp = self.cupy
        try:
            with cp.cuda.Device(0):
                v = int(cp.cuda.cublas.getVersion(cp.cuda.device.get_cublas_handle()))
        except Exception:
            return None
        # cublas_api.h CUBLAS_VERSION = major*10000 + minor*100 + patch
        return "cuBLAS %d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)

    def cuda_runtime(self):
        try:
            return _version_from_int(self.cupy.cuda.runtime.runtimeGetVersion())
        except Exception:
            return None

    def cuda_driver(self):
        try:
            return int(self.cupy.cuda.runtime.driverGetVersion())
        except Exception:
            return None

    def properties(self, index):
        p = self.cupy.cuda.runtime.getDeviceProperties(index)
        bus = None
        if "pciBusID" in p:
            bus = _bus_id(p.get("pciDomainID", 0), p["pciBusID"], p.get("pciDeviceID", 0))
        return {
            "name": _text(p.get("name", b"")),
            "uuid": _uuid_text(p["uuid"]) if p.get("uuid") is not None else None,
            "pci_bus_id": bus,
            "memory_bytes": int(p["totalGlobalMem"]) if "totalGlobalMem" in p else None,
            "cc": (int(p["major"]), int(p["minor"])) if "major" in p else None,
        }

    def device(self, index):
        return self.cupy.cuda.Device(index)

    def stream(self, index):
        s = self.cupy.cuda.Stream(non_blocking=True)
        return s, s

    def event(self):
        return self.cupy.cuda.Event()

    def record(self, event, stream):
        event.record(stream)

    def elapsed_s(self, start, end):
        end.synchronize()
        return self.cupy.cuda.get_elapsed_time(start, end) / 1000.0

    def synchronize(self, index):
        with self.cupy.cuda.Device(index) as d:
            d.synchronize()

    def _dtype(self, name):
        # CuPy's dtypes are NumPy's: "bfloat16" and "float8_e4m3fn" raise TypeError (not understood)
        return self.cupy.dtype({"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3fn"}[name])

    def gemm(self, index, dtype, n, cc):
        cp = self.cupy
        try:
            dt = self._dtype(dtype)
        except TypeError as exc:
            raise _Unsupported("%s is not supported by cupy %s (%s)" % (dtype, self.version, exc)) from None
        if dtype == "fp8":
            raise _Unsupported("fp8 GEMM is not supported by the cupy backend")
        rs = cp.random.RandomState(1)
        a = rs.standard_normal((n, n), dtype=cp.float32).astype(dt)
        b = rs.standard_normal((n, n), dtype=cp.float32).astype(dt)
        c = cp.empty((n, n), dtype=dt)

        def run():
            cp.matmul(a, b, out=c)

        return run

    def device_buffer(self, index, nbytes):
        return self.cupy.empty((nbytes,), dtype=self.cupy.uint8)

    def host_buffer(self, nbytes):
        return importlib.import_module("cupyx").empty_pinned((nbytes,), dtype="uint8")

    def copy(self, dst, src, stream):
        if isinstance(dst, self.cupy.ndarray) and isinstance(src, self.cupy.ndarray):
            # a plain cudaMemcpyAsync, between two devices too (peer access enabled: direct over NVLink/PCIe)
            dst.data.copy_from_device_async(src.data, src.nbytes, stream)
        elif isinstance(dst, self.cupy.ndarray):
            dst.set(src, stream=stream)  # pinned host -> device: asynchronous
        else:
            src.get(stream=stream, out=dst)  # device -> pinned host

    def can_access_peer(self, i, j):
        return bool(self.cupy.cuda.runtime.deviceCanAccessPeer(i, j))

    def enable_peer(self, i, j):
        try:
            with self.cupy.cuda.Device(i):
                self.cupy.cuda.runtime.deviceEnablePeerAccess(j)
        except self.cupy.cuda.runtime.CUDARuntimeError as exc:
            if "AlreadyEnabled" not in str(exc):
                raise

    def sdc_random(self, index, seed, n, steps, dtype):
        cp = self.cupy
        try:
            dt = self._dtype(dtype)
        except TypeError as exc:
            raise _Unsupported("%s is not supported by cupy %s (%s)" % (dtype, self.version, exc)) from None
        rs = cp.random.RandomState(seed)
        x = rs.standard_normal((n, n), dtype=cp.float32).astype(dt)
        scale = 1.0 / math.sqrt(n)  # keeps X @ W of order 1, so tanh stays away from saturation
        ws = ((rs.standard_normal((n, n), dtype=cp.float32) * scale).astype(dt) for _ in range(steps))
        return x, ws

    def sdc_step(self, x, w):
        return self.cupy.tanh(self.cupy.matmul(x, w))

    def to_host_bytes(self, x):
        return self.cupy.ascontiguousarray(x).get().tobytes()

    def all_finite(self, x):
        return bool(self.cupy.isfinite(x).all())


def _load_backend(choice, sdc):
    """The backend object, or Unavailable saying why neither can be used."""
    reasons = []
    order = ("torch", "cupy") if choice == "auto" else (choice,)
    for name in order:
        try:
            return (_Torch if name == "torch" else _Cupy)(sdc)
        except Unavailable as exc:
            reasons.append(str(exc))
        except Exception as exc:  # ImportError, or a broken install (a missing libcudart)
            reasons.append("cannot import %s: %s" % (name, _message(exc)))
    raise Unavailable("; ".join(reasons))


# --- telemetry: pynvml sampled in a thread while the perf phases run ---------------------------------
class _Telemetry:
    def __init__(self, interval_s):
        self.interval_s = interval_s
        self.nv = None
        self.error = None
        self.handles = {}  # CUDA index -> NVML handle
        self.samples = {}  # CUDA index -> {"sm": [...], "mem": [...], "power": [...], "temp": [...], "reasons": int}
        self.stop_event = threading.Event()
        self.thread = None
        self.driver = None
        self.cuda_driver = None
        try:
            import pynvml as nv
        except Exception:
            self.error = "pynvml not importable"
            return
        try:
            nv.nvmlInit()
        except Exception as exc:
            self.error = "nvmlInit failed: %s" % (_message(exc),)
            return
        self.nv = nv
        try:
            self.driver = _text(nv.nvmlSystemGetDriverVersion())
        except Exception:
            pass
        for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
            try:
                self.cuda_driver = int(getattr(nv, name)())
                break
            except Exception:
                continue

    def match(self, gpus):
        """NVML handles for the CUDA devices: by PCI bus id (CUDA and NVML number GPUs differently when
        CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER reorders them), else by UUID, else (the library gave
        neither) by index."""
        if self.nv is None:
            return
        nv = self.nv
        by_bus, by_uuid, by_index = {}, {}, {}
        try:
            count = min(int(nv.nvmlDeviceGetCount()), MAX_GPUS)
        except Exception as exc:
            self.error = "nvmlDeviceGetCount failed: %s" % (_message(exc),)
            return
        for k in range(count):
            try:
                h = nv.nvmlDeviceGetHandleByIndex(k)
            except Exception:
                continue
            by_index[k] = h
            try:
                by_bus[_normal_bus_id(_text(nv.nvmlDeviceGetPciInfo(h).busId))] = h
            except Exception:
                pass
            try:
                by_uuid[_text(nv.nvmlDeviceGetUUID(h))] = h
            except Exception:
                pass
        for gpu in gpus:
            bus = _normal_bus_id(gpu["pci_bus_id"]) if gpu.get("pci_bus_id") else None
            h = by_bus.get(bus) if bus else None
            if h is None and gpu.get("uuid"):
                h = by_uuid.get(gpu["uuid"])
            if h is None and not bus and not gpu.get("uuid"):  # nothing to match by (an old torch): trust the order
                h = by_index.get(gpu["index"])
            if h is not None:
                self.handles[gpu["index"]] = h
                self.samples[gpu["index"]] = {"sm": [], "mem": [], "power": [], "temp": [], "reasons": 0, "n": 0}

    def _const(self, name, literal):
        value = getattr(self.nv, name, None)
        return value if isinstance(value, int) else literal

    def _reason_bit(self, constants, literal):
        for name in constants:
            value = getattr(self.nv, name, None)
            if isinstance(value, int):
                return value
        return literal

    def sample(self):
        nv = self.nv
        if nv is None:
            return
        sm = self._const("NVML_CLOCK_SM", _NVML_CLOCK_SM)
        mem = self._const("NVML_CLOCK_MEM", _NVML_CLOCK_MEM)
        temp = self._const("NVML_TEMPERATURE_GPU", _NVML_TEMPERATURE_GPU)
        for index, h in self.handles.items():
            s = self.samples[index]
            s["n"] += 1
            for key, read in (
                ("sm", lambda: nv.nvmlDeviceGetClockInfo(h, sm)),  # noqa: B023 - called at once
                ("mem", lambda: nv.nvmlDeviceGetClockInfo(h, mem)),  # noqa: B023
                ("power", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),  # noqa: B023 - mW -> W
                ("temp", lambda: nv.nvmlDeviceGetTemperature(h, temp)),  # noqa: B023
            ):
                try:
                    value = float(read())
                except Exception:  # NotSupported on this GPU, or a failed read: that sample has no value
                    continue
                if math.isfinite(value):
                    s[key].append(value)
            for name in _CLOCK_EVENT_REASONS_FUNCTIONS:
                function = getattr(nv, name, None)
                if function is None:
                    continue
                try:
                    s["reasons"] |= int(function(h))
                    break
                except Exception:  # FunctionNotFound on drivers before 535: the older name
                    continue

    def _loop(self):
        while not self.stop_event.wait(self.interval_s):
            self.sample()

    def start(self):
        if self.nv is None or not self.handles:
            return
        self.sample()
        self.thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
        self.thread.start()

    def stop(self):
        if self.thread is not None:
            self.stop_event.set()
            self.thread.join()
            self.sample()  # the state at the end of the last phase

    def report(self, index):
        if self.nv is None:
            return {"source": None, "error": self.error or "pynvml unavailable"}
        if index not in self.handles:
            return {"source": None, "error": self.error or "no NVML device matches this GPU"}
        s = self.samples[index]
        mask = s["reasons"]
        # gpu_idle is left out: the sampler's first and last reads catch the GPU between phases
        reasons = [
            name
            for name, constants, literal in _CLOCK_EVENT_REASONS
            if name != "gpu_idle" and mask & self._reason_bit(constants, literal)
        ]
        return {
            "source": "pynvml",
            "samples": s["n"],
            "sm_clock_mhz": _stat(s["sm"]),
            "mem_clock_mhz": _stat(s["mem"]),
            "power_w": _stat(s["power"]),
            "temp_c": _stat(s["temp"]),
            "throttle_reasons": reasons,
        }

    def close(self):
        if self.nv is not None:
            try:
                self.nv.nvmlShutdown()
            except Exception:
                pass


def _stat(values):
    if not values:
        return None
    return {"min": min(values), "max": max(values), "mean": round(sum(values) / len(values), 3)}


# --- the measurements, written once over _Backend ------------------------------------------------
def _phase(out, key, function):
    """out[key] = function(), or {"error": ...}: one phase's failure never loses the others."""
    try:
        out[key] = function()
    except _Unsupported as exc:  # not a fault: this GPU or library has no such dtype
        out[key] = {"unsupported": str(exc)[:ERROR_MAX]}
    except Exception as exc:  # a CUDA error, out of memory, a library without some call
        out[key] = {"error": _message(exc)}


def _gemm(backend, index, stream, dtype, n, cc, duration_s):
    """Sustained GEMMs until device time or wall time reaches duration_s (at least 3); one untimed warm-up."""
    run = backend.gemm(index, dtype, n, cc)
    run()
    backend.synchronize(index)
    start = backend.event()
    backend.record(start, stream)
    wall0 = time.monotonic()
    iterations, batch, seconds = 0, MIN_GEMM_ITERATIONS, 0.0
    while True:
        for _ in range(batch):
            run()
        iterations += batch
        end = backend.event()
        backend.record(end, stream)
        seconds = backend.elapsed_s(start, end)
        wall = time.monotonic() - wall0
        if seconds >= duration_s or wall >= duration_s or iterations >= MAX_GEMM_ITERATIONS:
            break
        # the next batch: about half the time left, so the last check lands near duration_s without
        # syncing after every GEMM (a sync per GEMM would leave the GPU idle between them)
        per = max(seconds, wall) / iterations
        left = duration_s - max(seconds, wall)
        batch = int(max(1, min(MAX_GEMM_ITERATIONS - iterations, left / 2.0 / per if per > 0 else 1000)))
    if seconds <= 0:
        raise RuntimeError("the CUDA events measured no time for %d GEMMs" % iterations)
    return {
        "tflops": 2.0 * n**3 * iterations / seconds / 1e12,
        "size": n,
        "iterations": iterations,
        "seconds": seconds,
    }


def _bandwidth(backend, index, stream, dst, src, nbytes, iterations, factor=1.0):
    """GB/s (1e9 bytes/s) of `iterations` timed copies dst <- src after one warm-up; `factor` counts
    bytes moved per byte copied (2 for a device-to-device copy: each byte is read and written)."""
    backend.copy(dst, src, stream)
    backend.synchronize(index)
    start, end = backend.event(), backend.event()
    backend.record(start, stream)
    for _ in range(iterations):
        backend.copy(dst, src, stream)
    backend.record(end, stream)
    seconds = backend.elapsed_s(start, end)
    if seconds <= 0:
        raise RuntimeError("the CUDA events measured no time for %d copies" % iterations)
    return {
        "gbps": factor * nbytes * iterations / seconds / 1e9,
        "bytes": nbytes,
        "iterations": iterations,
        "seconds": seconds,
    }


def _sdc_once(backend, index, stream, args):
    start, end = backend.event(), backend.event()
    backend.record(start, stream)
    x, ws = backend.sdc_random(index, args.sdc_seed, args.sdc_size, args.sdc_steps, args.sdc_dtype)
    for w in ws:
        x = backend.sdc_step(x, w)
    backend.record(end, stream)
    seconds = backend.elapsed_s(start, end)
    return hashlib.sha256(backend.to_host_bytes(x)).hexdigest(), backend.all_finite(x), seconds


def _sdc(backend, index, stream, args):
    """The same deterministic GEMM chain twice: a healthy GPU gives the same checksum both times, and the
    same as every other GPU of its model under the same software."""
    first, finite1, seconds = _sdc_once(backend, index, stream, args)
    second, finite2, _ = _sdc_once(backend, index, stream, args)
    return {
        "checksum": first,
        "dtype": args.sdc_dtype,
        "size": args.sdc_size,
        "steps": args.sdc_steps,
        "seed": args.sdc_seed,
        "repeat_equal": first == second,
        "finite": bool(finite1 and finite2),
        "seconds": seconds,
    }


def _worker(backend, gpu, args, barrier, selected):
    """One GPU's phases, in order, on its own thread and stream; waits at the barrier after each phase."""
    index = gpu["index"]
    phases = []  # (name, function), so every thread passes the same number of barriers whatever fails
    state = {}

    def setup():
        state["ctx"] = backend.device(index)
        state["ctx"].__enter__()
        state["stream"], state["stream_ctx"] = backend.stream(index)
        state["stream_ctx"].__enter__()

    if args.mode == "sdc":
        phases.append(("sdc", lambda: _phase(gpu, "sdc", lambda: _sdc(backend, index, state["stream"], args))))
    else:
        if "gemm" in args.measure:

            def gemm_all():
                gpu["gemm"] = {}
                for dtype in args.dtypes:
                    _phase(
                        gpu["gemm"],
                        dtype,
                        lambda dtype=dtype: _gemm(
                            backend, index, state["stream"], dtype, args.gemm_size, gpu["_cc"], args.duration_s
                        ),
                    )

            phases.append(("gemm", gemm_all))
        if "hbm" in args.measure:

            def hbm():
                nbytes = args.copy_mib * _MIB
                src, dst = backend.device_buffer(index, nbytes), backend.device_buffer(index, nbytes)
                # a device-to-device copy reads and writes every byte: 2 x bytes per copy cross HBM
                return _bandwidth(backend, index, state["stream"], dst, src, nbytes, COPY_ITERATIONS, factor=2.0)

            phases.append(("hbm", lambda: _phase(gpu, "hbm", hbm)))
        if "pcie" in args.measure:

            def pcie():
                nbytes = args.pcie_mib * _MIB
                host, dev = backend.host_buffer(nbytes), backend.device_buffer(index, nbytes)
                s = state["stream"]
                _phase(gpu, "h2d", lambda: _bandwidth(backend, index, s, dev, host, nbytes, TRANSFER_ITERATIONS))
                _phase(gpu, "d2h", lambda: _bandwidth(backend, index, s, host, dev, nbytes, TRANSFER_ITERATIONS))

            def pcie_phase():
                try:
                    pcie()
                except Exception as exc:  # the buffers could not be had: both figures fail
                    gpu["h2d"] = gpu["d2h"] = {"error": _message(exc)}

            phases.append(("pcie", pcie_phase))
        if "p2p" in args.measure:
            gpu["p2p"] = {}
            n = len(selected)
            position = selected.index(index)
            # round r: every GPU sends to the one r places after it, so each GPU sends to one peer and
            # receives from one peer at a time (a permutation: no link is shared by two copies)
            for r in range(1, n):
                peer = selected[(position + r) % n]

                def p2p(peer=peer):
                    nbytes = args.p2p_mib * _MIB
                    if not backend.can_access_peer(index, peer):
                        return {"error": "no peer access"}
                    backend.enable_peer(index, peer)
                    src = backend.device_buffer(index, nbytes)
                    with backend.device(peer):
                        dst = backend.device_buffer(peer, nbytes)
                    return _bandwidth(backend, index, state["stream"], dst, src, nbytes, TRANSFER_ITERATIONS)

                def p2p_phase(peer=peer, p2p=p2p):
                    _phase(gpu["p2p"], str(peer), p2p)

                phases.append(("p2p", p2p_phase))
    try:
        setup()
    except Exception as exc:
        gpu["errors"].append("cannot use the device: %s" % (_message(exc),))
        state.clear()
    for name, function in phases:
        if state:
            try:
                function()
            except Exception as exc:  # not expected (each phase catches its own): never lose the thread
                gpu["errors"].append("%s: %s" % (name, _message(exc)))
        else:
            _mark_failed(gpu, name, args)
        barrier.wait()
    for key in ("stream_ctx", "ctx"):
        if key in state:
            try:
                state[key].__exit__(None, None, None)
            except Exception:
                pass


def _mark_failed(gpu, name, args):
    message = {"error": "the device could not be used"}
    if name == "gemm":
        gpu["gemm"] = {dtype: dict(message) for dtype in args.dtypes}
    elif name == "pcie":
        gpu["h2d"], gpu["d2h"] = dict(message), dict(message)
    elif name == "p2p":
        pass  # one entry per peer is added by the phase itself; a dead device has none
    else:
        gpu[name] = dict(message)


# --- arguments ------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        sys.stderr.write("%s: error: %s\n" % (self.prog, message))
        sys.exit(EXIT_USAGE)


def _bounded_int(low, high):
    def convert(text):
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError("%d is outside %d..%d" % (value, low, high))
        return value

    return convert


def _bounded_float(low, high):
    def convert(text):
        value = float(text)
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError("%s is outside %g..%g" % (text, low, high))
        return value

    return convert


def _choices(allowed):
    def convert(text):
        items = [item.strip() for item in text.split(",") if item.strip()]
        bad = [item for item in items if item not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError("%r: choose from %s" % (text, ",".join(allowed)))
        return list(dict.fromkeys(items))

    return convert


def _gpu_list(text):
    if text == "all":
        return None
    try:
        indices = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("%r: 'all' or indices like 0,1,3" % (text,)) from None
    if not indices or len(indices) > MAX_GPUS or any(not 0 <= i < MAX_GPUS for i in indices):
        raise argparse.ArgumentTypeError("%r: 1 to %d indices in 0..%d" % (text, MAX_GPUS, MAX_GPUS - 1))
    return list(dict.fromkeys(indices))


def parse_args(argv):
    p = _Parser(prog="gpu_bench_probe", description="nodecheck's GPU benchmark probe (one JSON object)")
    p.add_argument("--mode", choices=("perf", "sdc"), default="perf")
    p.add_argument("--backend", choices=("auto", "torch", "cupy"), default="auto")
    p.add_argument("--gpus", type=_gpu_list, default=None)
    p.add_argument("--measure", type=_choices(MEASURES), default=list(MEASURES))
    p.add_argument("--duration-s", type=_bounded_float(0.0, MAX_DURATION_S), default=10.0)
    p.add_argument("--gemm-size", type=_bounded_int(1, MAX_GEMM_SIZE), default=8192)
    p.add_argument("--dtypes", type=_choices(DTYPES), default=["bf16", "fp16", "fp8"])
    p.add_argument("--copy-mib", type=_bounded_int(1, MAX_MIB), default=1024)
    p.add_argument("--pcie-mib", type=_bounded_int(1, MAX_MIB), default=256)
    p.add_argument("--p2p-mib", type=_bounded_int(1, MAX_MIB), default=256)
    p.add_argument("--sdc-size", type=_bounded_int(1, MAX_GEMM_SIZE), default=2048)
    p.add_argument("--sdc-steps", type=_bounded_int(1, MAX_STEPS), default=8)
    p.add_argument("--sdc-seed", type=_bounded_int(0, 2**63 - 1), default=20261202)
    p.add_argument("--sdc-dtype", choices=SDC_DTYPES, default="fp32")
    p.add_argument("--telemetry-interval-s", type=_bounded_float(0.01, 60.0), default=0.5)
    return p.parse_args(argv)


# --- the run ----------------------------------------------------------------------------------------
def collect(args):
    """The probe's JSON object as a dict; raises Unavailable where main() exits 3."""
    backend = _load_backend(args.backend, args.mode == "sdc")
    errors = []
    try:
        count = min(backend.device_count(), MAX_GPUS)
    except Exception as exc:
        raise Unavailable("%s: cannot count CUDA devices: %s" % (backend.name, _message(exc))) from None
    if count < 1:
        raise Unavailable("%s: no CUDA device" % backend.name)
    selected = list(range(count)) if args.gpus is None else [i for i in args.gpus if i < count]
    missing = [] if args.gpus is None else [i for i in args.gpus if i >= count]
    if missing:
        errors.append("GPU %s not present (%d CUDA devices)" % (",".join(map(str, missing)), count))
    if not selected:
        raise Unavailable("%s: none of GPUs %s present (%d CUDA devices)" % (backend.name, args.gpus, count))

    gpus = []
    for index in selected:
        gpu = {"index": index, "name": None, "uuid": None, "pci_bus_id": None, "memory_bytes": None, "cc": None}  # type: dict
        gpu["errors"] = []
        try:
            props = backend.properties(index)
            gpu.update({k: props[k] for k in ("name", "uuid", "pci_bus_id", "memory_bytes")})
            gpu["_cc"] = props["cc"]
            gpu["cc"] = "%d.%d" % props["cc"] if props["cc"] else None
        except Exception as exc:
            gpu["_cc"] = None
            gpu["errors"].append("device properties: %s" % (_message(exc),))
        gpus.append(gpu)

    telemetry = _Telemetry(args.telemetry_interval_s)
    try:
        if args.mode == "perf":
            telemetry.match(gpus)
            telemetry.start()
        barrier = threading.Barrier(len(gpus))
        threads = [
            threading.Thread(target=_worker, args=(backend, gpu, args, barrier, selected), name="gpu%d" % gpu["index"])
            for gpu in gpus
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        telemetry.stop()
        if args.mode == "perf":
            for gpu in gpus:
                gpu["telemetry"] = telemetry.report(gpu["index"])
    finally:
        telemetry.close()
    for gpu in gpus:
        gpu.pop("_cc", None)

    cuda_driver = backend.cuda_driver()
    result = {
        "schema": SCHEMA,
        "mode": args.mode,
        "backend": {
            "name": backend.name,
            "version": backend.version,
            "blas": backend.blas(),
            "cuda_runtime": backend.cuda_runtime(),
            "driver": telemetry.driver,
            "cuda_driver": cuda_driver if cuda_driver is not None else telemetry.cuda_driver,
        },
        "gpus": gpus,
        "errors": errors,
    }
    return result


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        result = collect(args)
    except Unavailable as exc:
        reason = " ".join(str(exc).split())[:ERROR_MAX]  # one line, whatever the library said
        sys.stdout.write("%s %s\n" % (UNAVAILABLE_PREFIX, reason))
        sys.stdout.flush()
        return EXIT_UNAVAILABLE
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The fake CuPy's GPUs and their modeled device clocks (see tests/fakes/README.md, "cupy/").

GPUs come from the NVML state that tests/fakes/pynvml.py reads ($NODECHECK_FAKE_NVML_STATE, else
nvml_state.json in the directory holding this package), so the CUDA and NVML views of a node agree;
how fast each one is comes from the bench state ($NODECHECK_FAKE_GPU_BENCH_STATE, else
gpu_bench_state.json in that same directory; optional) and the built-in figures below.

Device time is modeled, not measured: every operation advances its device's virtual clock by the time
the figures give it (a GEMM 2mnk / (TFLOPS * 1e12 * speed) seconds, a copy bytes / (GB/s * 1e9 * speed)),
and Events read that clock. The arithmetic itself runs for real in NumPy on the CPU.
"""

import json
import os
import threading

_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Per model (matched as a substring of the NVML name, first match wins; a state's "figures" come first):
# what this fake's probe should measure, round numbers of the order public measurements give (dense,
# no sparsity); invented, not recordings. hbm_gbps counts read + write, as the probe reports a
# device-to-device copy. cc is the compute capability.
BUILTIN_FIGURES = (
    (
        "H200",
        {
            "bf16": 760,
            "fp16": 760,
            "fp32": 55,
            "hbm_gbps": 4200,
            "h2d_gbps": 53,
            "d2h_gbps": 52,
            "p2p_gbps": 380,
            "cc": [9, 0],
        },
    ),
    (
        "H100",
        {
            "bf16": 720,
            "fp16": 720,
            "fp32": 51,
            "hbm_gbps": 2950,
            "h2d_gbps": 53,
            "d2h_gbps": 52,
            "p2p_gbps": 380,
            "cc": [9, 0],
        },
    ),
    (
        "B200",
        {
            "bf16": 1500,
            "fp16": 1500,
            "fp32": 70,
            "hbm_gbps": 6500,
            "h2d_gbps": 55,
            "d2h_gbps": 55,
            "p2p_gbps": 700,
            "cc": [10, 0],
        },
    ),
    (
        "A100",
        {
            "bf16": 280,
            "fp16": 280,
            "fp32": 19,
            "hbm_gbps": 1700,
            "h2d_gbps": 25,
            "d2h_gbps": 25,
            "p2p_gbps": 250,
            "cc": [8, 0],
        },
    ),
)
DEFAULT_FIGURES = {
    "bf16": 100,
    "fp16": 100,
    "fp32": 10,
    "hbm_gbps": 500,
    "h2d_gbps": 12,
    "d2h_gbps": 12,
    "p2p_gbps": 50,
    "cc": [8, 6],
}


def _read_json(env_name, file_name, required):
    path = os.environ.get(env_name) or os.path.join(_PARENT, file_name)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        if required:
            return None
        return {}


class _State:
    def __init__(self):
        nvml = _read_json("NODECHECK_FAKE_NVML_STATE", "nvml_state.json", required=True) or {}
        bench = _read_json("NODECHECK_FAKE_GPU_BENCH_STATE", "gpu_bench_state.json", required=False)
        self.import_error = bench.get("import_error")
        self.unavailable = bench.get("unavailable")
        gpus = list(nvml.get("gpus") or ())
        if nvml.get("init_error"):  # no driver for NVML: no driver for CUDA either
            gpus = []
        # CUDA numbers the GPUs CUDA_VISIBLE_DEVICES names, in its order; NVML sees them all, so the
        # probe must match the two by PCI bus id. "speed"/"bitflip" keys are NVML (physical) indices.
        self.physical = list(range(len(gpus)))
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            self.physical = []
            for item in visible.split(","):
                item = item.strip()
                if not item.isdigit() or int(item) >= len(gpus):
                    break  # as CUDA: the list ends at the first entry that names no device
                self.physical.append(int(item))
        self.gpus = [gpus[i] for i in self.physical]
        self.cuda_driver_version = int(nvml.get("cuda_driver_version") or 12040)
        self.runtime_version = int(bench.get("cuda_runtime_version", 12040))
        self.cublas_version = int(bench.get("cublas_version", 120405))
        self.peer_access = bool(bench.get("peer_access", True))
        self.speed = {int(k): float(v) for k, v in (bench.get("speed") or {}).items()}
        self.bitflip = {int(k): v for k, v in (bench.get("bitflip") or {}).items()}
        for mode in self.bitflip.values():
            if mode not in ("persistent", "transient"):
                raise ValueError("fake cupy: bitflip mode %r is not persistent or transient" % (mode,))
        # per physical GPU: {"matmul"|"memcpy"|"h2d"|"d2h": CUDA error text} that the operation raises
        self.errors = {int(k): dict(v) for k, v in (bench.get("errors") or {}).items()}
        self.figures = list((bench.get("figures") or {}).items()) + list(BUILTIN_FIGURES)
        self.lock = threading.Lock()
        self.clocks = [0.0] * len(self.gpus)  # virtual device seconds
        self.matmuls = [0] * len(self.gpus)  # GEMMs computed per device (the transient bitflip's rule)
        self.peers_enabled = set()

    def figures_of(self, index):
        name = self.gpus[index].get("name") or ""
        for substring, figures in self.figures:
            if substring in name:
                merged = dict(DEFAULT_FIGURES)
                merged.update(figures)
                return merged
        return dict(DEFAULT_FIGURES)

    def speed_of(self, index):
        return self.speed.get(self.physical[index], 1.0)

    def fail(self, index, operation):
        """Raise the CUDA error the state scripts for `operation` on this device, if any."""
        text = self.errors.get(self.physical[index], {}).get(operation)
        if text:
            from cupy.cuda.runtime import CUDARuntimeError

            raise CUDARuntimeError(700, text)

    def bitflip_of(self, index):
        return self.bitflip.get(self.physical[index])

    def advance(self, index, seconds):
        with self.lock:
            self.clocks[index] += seconds

    def now(self, index):
        with self.lock:
            return self.clocks[index]

    def count_matmul(self, index):
        """How many GEMMs this device computed before this one."""
        with self.lock:
            n = self.matmuls[index]
            self.matmuls[index] = n + 1
            return n


STATE = _State()
_local = threading.local()


def current_device():
    stack = getattr(_local, "devices", None)
    return stack[-1] if stack else 0


def current_device_set():
    return bool(getattr(_local, "devices", None))


def push_device(index):
    if not hasattr(_local, "devices"):
        _local.devices = []
    _local.devices.append(index)


def pop_device():
    _local.devices.pop()


def current_stream():
    stack = getattr(_local, "streams", None)
    return stack[-1] if stack else None


def push_stream(stream):
    if not hasattr(_local, "streams"):
        _local.streams = []
    _local.streams.append(stream)


def pop_stream():
    _local.streams.pop()

"""A fake of CuPy (`import cupy`) for nodecheck's GPU benchmark probe: NumPy arithmetic on the CPU,
modeled device time (cupy/_state.py). Only what nodecheck/probes/gpu_bench_probe.py's cupy backend
calls; tests/fakes/README.md ("cupy/") has the state files and the rules. Stdlib + NumPy only."""

import numpy

from cupy._state import STATE, current_device, current_stream

if STATE.import_error:  # CuPy's import fails (no libcudart, a wheel for another CUDA)
    raise ImportError(STATE.import_error)

from cupy import cuda, random

__version__ = "13.3.0+nodecheck.fake"

# CuPy's dtypes are NumPy's: numpy.dtype("bfloat16") / ("float8_e4m3fn") raise TypeError as CuPy does
dtype = numpy.dtype
float16 = numpy.float16
float32 = numpy.float32
float64 = numpy.float64
uint8 = numpy.uint8

_MANTISSA_TOP_BIT = {2: 9, 4: 22, 8: 51}  # float16, float32, float64: the flipped bit of a bitflip
_FIGURE_OF_DTYPE = {"float16": "fp16", "float32": "fp32", "float64": "fp32"}


class ndarray:
    """A device array: a NumPy array plus the device it lives on."""

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        self._a = numpy.empty(shape, dtype=dtype)
        self._device = current_device()

    @classmethod
    def _wrap(cls, array, device):
        obj = cls.__new__(cls)
        obj._a = array
        obj._device = device
        return obj

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    ndim = property(lambda self: self._a.ndim)
    nbytes = property(lambda self: self._a.nbytes)
    device = property(lambda self: cuda.Device(self._device))
    data = property(lambda self: cuda.MemoryPointer(self))

    def astype(self, dtype, copy=True):
        return ndarray._wrap(self._a.astype(dtype), self._device)

    def all(self):
        return ndarray._wrap(numpy.asarray(self._a.all()), self._device)

    def __bool__(self):
        return bool(self._a)

    def __mul__(self, other):
        return ndarray._wrap((self._a * other).astype(self._a.dtype), self._device)

    __rmul__ = __mul__

    def __matmul__(self, other):
        return matmul(self, other)

    def set(self, arr, stream=None):
        """Host -> device copy (cudaMemcpyAsync from pinned memory)."""
        STATE.fail(self._device, "h2d")
        arr = numpy.ascontiguousarray(arr)
        if arr.nbytes != self.nbytes:
            raise ValueError("Shape mismatch. Old shape: %s, new shape: %s" % (self.shape, arr.shape))
        self._a.reshape(-1).view("uint8")[:] = arr.reshape(-1).view("uint8")
        on = _on(stream, self._device)
        STATE.advance(on, cuda.transfer_seconds(on, arr.nbytes, "h2d_gbps"))

    def get(self, stream=None, order="C", out=None, blocking=True):
        """Device -> host copy; into `out` (pinned) when given."""
        STATE.fail(self._device, "d2h")
        on = _on(stream, self._device)
        STATE.advance(on, cuda.transfer_seconds(on, self.nbytes, "d2h_gbps"))
        if out is None:
            return self._a.copy(order=order)
        if out.nbytes != self.nbytes:
            raise ValueError("Shape mismatch. Old shape: %s, new shape: %s" % (out.shape, self.shape))
        out.reshape(-1).view("uint8")[:] = self._a.reshape(-1).view("uint8")
        return out


def _on(stream, default):
    stream = stream if stream is not None else current_stream()
    return stream.device_id if stream is not None else default


def empty(shape, dtype=float, order="C"):
    return ndarray._wrap(numpy.empty(shape, dtype=dtype), current_device())


def ascontiguousarray(a, dtype=None):
    return ndarray._wrap(numpy.ascontiguousarray(a._a, dtype=dtype), a._device)


def tanh(x, out=None):
    # elementwise kernels take no modeled time: the figures are about GEMMs and copies
    result = numpy.tanh(x._a)
    if out is not None:
        out._a[...] = result
        return out
    return ndarray._wrap(result, x._device)


def isfinite(x):
    return ndarray._wrap(numpy.isfinite(x._a), x._device)


def _flip(result, index):
    """The bitflip state's fault: the top mantissa bit of element 0 of a GEMM result."""
    size = result.dtype.itemsize
    if size not in _MANTISSA_TOP_BIT or result.size == 0:
        return
    bits = result.reshape(-1).view("uint%d" % (8 * size))
    bits[0] ^= numpy.array(1 << _MANTISSA_TOP_BIT[size], dtype=bits.dtype)


def matmul(a, b, out=None):
    """A GEMM on a's device: NumPy's result, a modeled 2mnk / (TFLOPS * 1e12 * speed) seconds."""
    if a._device != b._device:
        raise ValueError(
            "The device where the array resides (%d) is different from the current device (%d)."
            % (b._device, a._device)
        )
    index = a._device
    STATE.fail(index, "matmul")
    result = numpy.matmul(a._a, b._a)
    earlier = STATE.count_matmul(index)
    mode = STATE.bitflip_of(index)
    # persistent: every GEMM on the device; transient: only its first GEMM in the process
    if mode == "persistent" or (mode == "transient" and earlier == 0):
        _flip(result, index)
    m, k = a._a.shape[-2], a._a.shape[-1]
    n = b._a.shape[-1]
    figures = STATE.figures_of(index)
    tflops = figures[_FIGURE_OF_DTYPE.get(result.dtype.name, "fp32")]
    STATE.advance(_on(None, index), 2.0 * m * n * k / (tflops * 1e12 * STATE.speed_of(index)))
    if out is not None:
        out._a[...] = result
        return out
    return ndarray._wrap(result, index)


__all__ = ["cuda", "random"]

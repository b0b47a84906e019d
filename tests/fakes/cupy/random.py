"""cupy.random: RandomState(seed), drawing on the current device from NumPy's PCG64 (deterministic)."""

import numpy

from cupy._state import current_device


class RandomState:
    def __init__(self, seed=None):
        self._rng = numpy.random.Generator(numpy.random.PCG64(seed))

    def standard_normal(self, size=None, dtype=float):
        import cupy

        dtype = numpy.dtype(dtype)
        if dtype.kind != "f":
            raise TypeError("cupy.random only supports float32 and float64")
        return cupy.ndarray._wrap(self._rng.standard_normal(size, dtype=dtype), current_device())

"""A fake of cupyx (CuPy's extras) for the GPU benchmark probe: empty_pinned only (tests/fakes/README.md, "cupy/")."""

import numpy


def empty_pinned(shape, dtype=float, order="C"):
    # pinned host memory is host memory a NumPy array views; the fake's copies time it as pinned
    return numpy.empty(shape, dtype=dtype, order=order)

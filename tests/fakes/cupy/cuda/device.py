"""cupy.cuda.device: the current device's cuBLAS handle."""

from cupy._state import current_device


def get_cublas_handle():
    return 0x5000 + current_device()

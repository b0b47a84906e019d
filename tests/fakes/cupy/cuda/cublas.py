"""cupy.cuda.cublas: getVersion only."""

from cupy._state import STATE


def getVersion(handle):
    return STATE.cublas_version  # CUBLAS_VERSION: major*10000 + minor*100 + patch

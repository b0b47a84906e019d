"""cupy.cuda.runtime (cupy_backends.cuda.api.runtime): the CUDA runtime calls the probe makes."""

from cupy._state import STATE


class CUDARuntimeError(RuntimeError):
    """As CuPy's: str() is "<cudaError name>: <cudaGetErrorString text>", .status the cudaError_t code."""

    def __init__(self, status, text):
        self.status = status
        super().__init__(text)


_NO_DEVICE = (100, "cudaErrorNoDevice: no CUDA-capable device is detected")
_INVALID_DEVICE = (101, "cudaErrorInvalidDevice: invalid device ordinal")
_PEER_UNSUPPORTED = (217, "cudaErrorPeerAccessUnsupported: peer access is not supported between these two devices")
_PEER_ALREADY = (704, "cudaErrorPeerAccessAlreadyEnabled: peer access is already enabled")


def check_device(index):
    if STATE.unavailable:
        raise CUDARuntimeError(_NO_DEVICE[0], STATE.unavailable)
    if not isinstance(index, int) or not 0 <= index < len(STATE.gpus):
        raise CUDARuntimeError(*_INVALID_DEVICE)


def getDeviceCount():
    if STATE.unavailable:
        raise CUDARuntimeError(_NO_DEVICE[0], STATE.unavailable)
    if not STATE.gpus:
        raise CUDARuntimeError(*_NO_DEVICE)
    return len(STATE.gpus)


def getDeviceProperties(device):
    check_device(device)
    gpu = STATE.gpus[device]
    cc = STATE.figures_of(device)["cc"]
    domain, bus, rest = gpu["pci_bus_id"].split(":")
    uuid = (gpu.get("uuid") or "")[len("GPU-") :].replace("-", "")
    return {
        "name": gpu["name"].encode(),  # CuPy returns the char[256] as bytes
        "totalGlobalMem": int(gpu["memory_total_bytes"]),
        "major": int(cc[0]),
        "minor": int(cc[1]),
        "pciDomainID": int(domain, 16),
        "pciBusID": int(bus, 16),
        "pciDeviceID": int(rest.split(".")[0], 16),
        "uuid": bytes.fromhex(uuid) if len(uuid) == 32 else b"\0" * 16,
        "multiProcessorCount": 132,
    }


def deviceCanAccessPeer(device, peerDevice):
    check_device(device)
    check_device(peerDevice)
    return int(STATE.peer_access and device != peerDevice)


def deviceEnablePeerAccess(peerDevice):
    from cupy._state import current_device

    device = current_device()
    if not deviceCanAccessPeer(device, peerDevice):
        raise CUDARuntimeError(*_PEER_UNSUPPORTED)
    if (device, peerDevice) in STATE.peers_enabled:
        raise CUDARuntimeError(*_PEER_ALREADY)
    STATE.peers_enabled.add((device, peerDevice))


def runtimeGetVersion():
    return STATE.runtime_version


def driverGetVersion():
    return STATE.cuda_driver_version

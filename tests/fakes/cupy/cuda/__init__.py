"""cupy.cuda: Device, Stream, Event, get_elapsed_time and memory pointers over the modeled device clocks."""

from cupy._state import (
    STATE,
    current_device,
    current_device_set,
    current_stream,
    pop_device,
    pop_stream,
    push_device,
    push_stream,
)
from cupy.cuda import cublas, device, runtime


class Device:
    """cupy.cuda.Device: a context manager making `id` the calling thread's current device."""

    def __init__(self, device=None):
        self.id = current_device() if device is None else int(device)

    def __enter__(self):
        runtime.check_device(self.id)
        push_device(self.id)
        return self

    def __exit__(self, *exc):
        pop_device()

    def use(self):
        runtime.check_device(self.id)
        pop_device() if current_device_set() else None
        push_device(self.id)

    def synchronize(self):
        pass  # every modeled operation is complete when its call returns

    @property
    def compute_capability(self):
        major, minor = STATE.figures_of(self.id)["cc"]
        return "%d%d" % (major, minor)


class Stream:
    """cupy.cuda.Stream: belongs to the device current at its creation; `with stream:` makes it current."""

    def __init__(self, null=False, non_blocking=False, ptr=None):
        self.device_id = current_device()
        self.ptr = id(self)

    def __enter__(self):
        push_stream(self)
        return self

    def __exit__(self, *exc):
        pop_stream()

    def synchronize(self):
        pass


def _stream_device(stream):
    stream = stream if stream is not None else current_stream()
    return stream.device_id if stream is not None else current_device()


class Event:
    """cupy.cuda.Event: record() snapshots the virtual clock of the stream's device."""

    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.disable_timing = disable_timing
        self._device = None
        self._time = None

    def record(self, stream=None):
        self._device = _stream_device(stream)
        self._time = STATE.now(self._device)

    def synchronize(self):
        pass

    @property
    def done(self):
        return True


def get_elapsed_time(start_event, end_event):
    """Milliseconds between two recorded events, as cudaEventElapsedTime."""
    if start_event._time is None or end_event._time is None:
        raise runtime.CUDARuntimeError(400, "cudaErrorInvalidResourceHandle: invalid resource handle")
    if start_event.disable_timing or end_event.disable_timing:
        raise runtime.CUDARuntimeError(1, "cudaErrorInvalidValue: invalid argument")
    return (end_event._time - start_event._time) * 1000.0


class MemoryPointer:
    """ndarray.data: the array's device memory."""

    def __init__(self, owner):
        self._owner = owner
        self.device_id = owner._device

    def copy_from_device_async(self, src, size, stream=None):
        """cudaMemcpyAsync of `size` bytes from `src` (a MemoryPointer, any device) into this memory."""
        STATE.fail(src.device_id, "memcpy")
        dst_bytes = self._owner._a.reshape(-1).view("uint8")
        src_bytes = src._owner._a.reshape(-1).view("uint8")
        if size > dst_bytes.size or size > src_bytes.size:
            raise runtime.CUDARuntimeError(1, "cudaErrorInvalidValue: invalid argument")
        dst_bytes[:size] = src_bytes[:size]
        on = _stream_device(stream)
        if src.device_id == self.device_id:
            figures = STATE.figures_of(on)
            # hbm_gbps counts read + write, as the probe reports a device-to-device copy
            seconds = 2.0 * size / (figures["hbm_gbps"] * 1e9 * STATE.speed_of(on))
        else:
            a, b = src.device_id, self.device_id
            speed = min(STATE.speed_of(a), STATE.speed_of(b))
            if (a, b) in STATE.peers_enabled:
                gbps = min(STATE.figures_of(a)["p2p_gbps"], STATE.figures_of(b)["p2p_gbps"])
            else:  # no peer access: CUDA stages the copy through host memory
                gbps = min(STATE.figures_of(a)["d2h_gbps"], STATE.figures_of(b)["h2d_gbps"]) / 2.0
            seconds = size / (gbps * 1e9 * speed)
        STATE.advance(on, seconds)

    def copy_from_device(self, src, size):
        self.copy_from_device_async(src, size)


def transfer_seconds(device, nbytes, figure):
    return nbytes / (STATE.figures_of(device)[figure] * 1e9 * STATE.speed_of(device))


__all__ = ["Device", "Event", "MemoryPointer", "Stream", "cublas", "device", "get_elapsed_time", "runtime"]

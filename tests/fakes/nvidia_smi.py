"""A fake nvidia-smi for a simulated GPU node whose GPUs are the fake pynvml's state (nvml_state.json):
it answers the GPU process query the idle guard asks, and resets GPUs.

    nvidia_smi.py CONFIG ARGS...       (the node's /usr/local/sbin/nvidia-smi execs it; CONFIG is JSON:)
      state          path of the node's nvml_state.json (the fake pynvml's GPU state)
      compute_apps   path of what `--query-compute-apps=...` prints (empty: no GPU process)
      busy           a GPU process runs: a reset is refused, as nvidia-smi refuses it
      reset_helps    false: the reset "succeeds" but the pending row remap stays (it needs a reboot)
      log            a file that gets one line per reset asked ("reset GPU 3: ok|busy|no change|...")

`-r`/`--gpu-reset` with `-i N` (or `--id=N`, or the GPU's PCI bus id in a form NVML's
nvmlDeviceGetHandleByPciBusId takes, as a failure read off an Xid line names it: `-i 0000:5d:00`;
no -i: every GPU) resets GPU N as the real tool does to
what NVML shows: its pending row remap (remapped_rows[2]) and pending page retirement are applied,
so they are no longer pending; the remapped-row counts stay. `--reboot` (the node's on-reboot hook,
not an nvidia-smi option) applies every GPU's pending remap, whatever reset_helps says.

Output, and where it comes from:
  success  "GPU 00000000:1A:00.0 was successfully reset." exit 0: NVIDIA/NVSentinel PR #1692
           (https://github.com/NVIDIA/NVSentinel/pull/1692, `nvidia-smi -r -i <uuid>`, a real run)
  busy     "The following GPUs could not be reset:\\n  GPU 00000000:1A:00.0: In use by another client"
           exit 255: the same PR (persistence mode on counts as a client)
  bad -i   "No devices were found" exit 6: constructed (no recording found; 6 is the man page's "a query
           to find an object was unsuccessful", and the text what nvidia-smi prints with no GPU)
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile

NO_DEVICE_EXIT = 6
BUSY_EXIT = 255
USAGE_EXIT = 2
# NVML's forms (hex): domain:bus:device.function, domain:bus:device, bus:device.function
# (https://docs.nvidia.com/deploy/nvml-api/, nvmlDeviceGetHandleByPciBusId_v2)
_PCI_BUS_ID = re.compile(r"(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})(?:\.([0-7]))?")


def _load(path):
    with open(path) as f:
        return json.load(f)


def _save(path, state):
    """Write-then-rename: a pynvml reading the state meanwhile sees the old or the new one, whole."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".nvml_state.")
    with os.fdopen(fd, "w") as f:
        json.dump(state, f, indent=1)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _apply_pending(gpu):
    """What a GPU reset (or a reboot) does to NVML's view: the pending remap and retirement take effect."""
    rows = gpu.get("remapped_rows")
    if rows and len(rows) >= 3:
        rows[2] = 0  # (corrRows, uncRows, isPending, failureOccurred): the counts stay
    if "retired_pages_pending" in gpu:
        gpu["retired_pages_pending"] = 0


def _log(config, line):
    if config.get("log"):
        with open(config["log"], "a") as f:
            f.write(line + "\n")


def _option_value(args, short, long):
    """The value of `-i N`, `--id N` or `--id=N` (None when absent)."""
    for k, a in enumerate(args):
        if a in (short, long) and k + 1 < len(args):
            return args[k + 1]
        if a.startswith(long + "="):
            return a.split("=", 1)[1]
    return None


def _pci_key(bus_id):
    """(domain, bus, device) of a PCI bus id in one of NVML's forms, None for anything else."""
    m = _PCI_BUS_ID.fullmatch(bus_id)
    if not m or (m.group(1) is None and m.group(4) is None):  # bus:device alone is none of them
        return None
    return tuple(int(part or "0", 16) for part in m.group(1, 2, 3))


def _index_of(gpus, which):
    """The GPU `-i` names: its index, or its PCI bus id; None when no GPU is that one."""
    if which.isdigit():
        return int(which) if int(which) < len(gpus) else None
    key = _pci_key(which)
    return next((i for i, gpu in enumerate(gpus) if key is not None and _pci_key(gpu["pci_bus_id"]) == key), None)


def reset(config, args):
    state = _load(config["state"])
    gpus = state["gpus"]
    which = _option_value(args, "-i", "--id")
    if which is None:
        indexes = list(range(len(gpus)))
    elif _index_of(gpus, which) is not None:
        indexes = [_index_of(gpus, which)]
    else:
        _log(config, f"reset GPU {which}: no such GPU")
        print("No devices were found")
        return NO_DEVICE_EXIT
    if config.get("busy"):
        for i in indexes:
            _log(config, f"reset GPU {i}: busy")
        print("The following GPUs could not be reset:")
        for i in indexes:
            print(f"  GPU {gpus[i]['pci_bus_id']}: In use by another client")
        return BUSY_EXIT
    for i in indexes:
        if config.get("reset_helps", True):
            _apply_pending(gpus[i])
            _log(config, f"reset GPU {i}: ok")
        else:
            _log(config, f"reset GPU {i}: no change")
        print(f"GPU {gpus[i]['pci_bus_id']} was successfully reset.")
    _save(config["state"], state)
    return 0


def reboot(config):
    state = _load(config["state"])
    for gpu in state["gpus"]:
        _apply_pending(gpu)
    _save(config["state"], state)
    _log(config, "reboot: every pending remap applied")
    return 0


def main(argv):
    config = _load(argv[1])
    args = argv[2:]
    if args == ["--reboot"]:
        return reboot(config)
    if any(a in ("-r", "--gpu-reset") for a in args):
        return reset(config, args)
    if any(a.startswith("--query-compute-apps=") for a in args):
        with open(config["compute_apps"], "rb") as f:
            sys.stdout.buffer.write(f.read())
        return 0
    print("fake nvidia-smi: no canned output for: " + " ".join(args), file=sys.stderr)
    return USAGE_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv))

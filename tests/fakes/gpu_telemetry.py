"""A fake `nvidia-smi --query-gpu` whose readings follow a training scenario's clock.

SimCluster.start_training() (tests/harness/sim/training.py) installs it as the node's nvidia-smi: a
/bin/sh wrapper running `/usr/bin/python3 -I <node dir>/training/gpu_telemetry.py <scenario> "$@"`,
the scenario's absolute path baked in (no environment variable needed). The readings per GPU come
from trainer.py's gpu_readings() (trainer.py lies beside this file), so the GPUs and the fake
trainer's log follow one clock and one phase table.

Answers `--query-gpu=F1,F2,... --format=csv[,noheader][,nounits]` (also `--query-gpu F`,
`--format csv`, `-i`/`--id=0,3`) in nvidia-smi's CSV: ", " between cells; a header of the field
names with "[unit]" for fields that have one (also with nounits, as netdata's recording shows);
values carry the unit unless nounits ("100 %", "190.00 W", "62000 MiB"). A field it does not know:
`Field "X" is not a valid field to query.` and a blank line on stdout, exit 2 (formats.md §6).
Anything else (no --query-gpu, no --format, other options): a note on stderr, exit 2.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import socket
import sys
import time
from pathlib import Path

_spec = importlib.util.spec_from_file_location("nodecheck_fake_trainer", Path(__file__).with_name("trainer.py"))
trainer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(trainer)

# Bus ids of an HGX H100 board (tests/fakes/nvml_states), then made-up ones for more GPUs
BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
DRIVER = "550.90.07"


def _bus_id(g: int) -> str:
    return f"00000000:{BUS_IDS[g] if g < len(BUS_IDS) else f'{0xE0 + g - len(BUS_IDS):02X}'}:00.0"


def _uuid(host: str, g: int) -> str:
    h = hashlib.sha1(f"{host}/{g}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _watts(v: float) -> str:
    return f"{v:.2f}"


def fields(scn: dict, host: str):
    """name -> (unit or None, value(gpu reading) -> str). Aliases as nvidia-smi --help-query-gpu lists them."""
    gpus, limit, total = int(scn["gpus"]), float(scn["power_limit_w"]), int(scn["memory_total_mib"])
    table = {
        "index": (None, lambda r: str(r["index"])),
        "count": (None, lambda r: str(gpus)),
        "name": (None, lambda r: scn["gpu_name"]),
        "uuid": (None, lambda r: _uuid(host, r["index"])),
        "pci.bus_id": (None, lambda r: _bus_id(r["index"])),
        "driver_version": (None, lambda r: DRIVER),
        "pstate": (None, lambda r: "P0" if r["memory_used"] else "P8"),
        "persistence_mode": (None, lambda r: "Enabled"),
        "temperature.gpu": (None, lambda r: str(30 + r["util"] // 3)),
        "utilization.gpu": ("%", lambda r: str(r["util"])),
        "utilization.memory": ("%", lambda r: str(r["util"] * 2 // 5)),
        "power.draw": ("W", lambda r: _watts(r["power"])),
        "power.limit": ("W", lambda r: _watts(limit)),
        "enforced.power.limit": ("W", lambda r: _watts(limit)),
        "power.default_limit": ("W", lambda r: _watts(limit)),
        "power.max_limit": ("W", lambda r: _watts(limit)),
        "memory.total": ("MiB", lambda r: str(total)),
        "memory.used": ("MiB", lambda r: str(r["memory_used"])),
        "memory.free": ("MiB", lambda r: str(total - r["memory_used"])),
        "clocks.current.sm": ("MHz", lambda r: "1980" if r["util"] else "345"),
        "clocks.current.graphics": ("MHz", lambda r: "1980" if r["util"] else "345"),
        "clocks.current.memory": ("MHz", lambda r: "2619"),
    }
    for alias, name in (
        ("gpu_name", "name"),
        ("gpu_uuid", "uuid"),
        ("gpu_bus_id", "pci.bus_id"),
        ("clocks.sm", "clocks.current.sm"),
        ("clocks.gr", "clocks.current.graphics"),
        ("clocks.mem", "clocks.current.memory"),
    ):
        table[alias] = table[name]
    return table


def _usage(argv: list[str]) -> int:
    print(
        "fake nvidia-smi (tests/fakes/gpu_telemetry.py): only --query-gpu=FIELDS "
        "--format=csv[,noheader][,nounits] [-i IDS] is simulated; got: " + " ".join(argv),
        file=sys.stderr,
    )
    return 2


def main(argv: list[str]) -> int:
    if not argv:
        return _usage(argv)
    scenario_path, args = Path(argv[0]), argv[1:]
    query = fmt = ids = None
    i = 0
    while i < len(args):
        a = args[i]
        for opt in ("--query-gpu", "--format", "--id", "-i"):
            if a == opt and i + 1 < len(args):
                value, i = args[i + 1], i + 2
                break
            if a.startswith(opt + "=") and opt.startswith("--"):
                value, i = a[len(opt) + 1 :], i + 1
                break
        else:
            return _usage(args)
        if opt == "--query-gpu":
            query = value
        elif opt == "--format":
            fmt = value
        else:
            ids = value
    if query is None or fmt is None:
        return _usage(args)
    opts = fmt.split(",")
    if opts[0] != "csv" or not set(opts[1:]) <= {"noheader", "nounits"}:
        return _usage(args)
    try:
        scn = trainer.check_scenario(json.loads(scenario_path.read_text()))
    except FileNotFoundError:
        print("No devices were found")
        return 6
    table = fields(scn, socket.gethostname())
    names = [f.strip() for f in query.split(",")]
    for name in names:
        if name not in table:
            print(f'Field "{name}" is not a valid field to query.\n')
            return 2
    readings = trainer.gpu_readings(scn, time.time() - float(scn["start"]))
    if ids is not None:
        try:
            wanted = [int(x) for x in ids.split(",")]
        except ValueError:
            return _usage(args)
        readings = [r for g in wanted for r in readings if r["index"] == g]
    units = "nounits" not in opts
    out = []
    if "noheader" not in opts:
        out.append(", ".join(n + (f" [{table[n][0]}]" if table[n][0] else "") for n in names))
    for r in readings:
        cells = []
        for n in names:
            unit, value = table[n]
            cells.append(value(r) + (f" {unit}" if unit and units else ""))
        out.append(", ".join(cells))
    sys.stdout.write("".join(line + "\n" for line in out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What every part of the simulated cluster shares: where the fakes are, the harness's error, and
small file and process helpers (atomic writes, pid files, liveness)."""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1]  # tests/harness
FAKES = HARNESS.parent / "fakes"  # tests/fakes
SCRIPT = HARNESS / "ssh_nodes.sh"
SLURM_SCRIPT = HARNESS / "slurm_cluster.sh"
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")


class HarnessError(RuntimeError):
    """ssh_nodes.sh failed; the message carries its stderr."""


def node_python() -> str:
    """The python3 the nodes run the Python fakes with: the system's, else this one."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def atomic_write(dest: Path, raw: bytes, mode: int, tmp_dir: Path | None = None) -> None:
    """Write-then-rename, so a node running the tool never sees half a file. tmp_dir: where the
    temp file lives (same filesystem), for directories that must never show a stray name."""
    fd, tmp = tempfile.mkstemp(dir=tmp_dir or dest.parent, prefix=f".{dest.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_pids(path: Path) -> list[int]:
    try:
        return [int(x) for x in path.read_text().split()]
    except (OSError, ValueError):
        return []


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int | None) -> bool:
    """pid exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, TypeError):
        return False
    return pid is not None and stat.rsplit(")", 1)[1].split()[0] != "Z"


def terminate(pids: Sequence[int]) -> None:
    """SIGTERM, then SIGKILL whatever still runs after 1 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.01)


def argv_has(proc: Path, wanted: set[bytes]) -> bool:
    try:
        return bool(wanted.intersection((proc / "cmdline").read_bytes().split(b"\0")))
    except OSError:
        return False


def natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def load_fake(name: str):
    """A module of tests/fakes, loaded by path (the harness also runs outside the test package): the
    trainer (its scenario schema and clock), freeze."""
    import importlib.util

    mod = sys.modules.get(f"nodecheck_fake_{name}")
    if mod is None:
        spec = importlib.util.spec_from_file_location(f"nodecheck_fake_{name}", FAKES / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[f"nodecheck_fake_{name}"] = mod
        spec.loader.exec_module(mod)
    return mod


def load_trainer():
    return load_fake("trainer")

"""A fake node tree for the driver-stack probe: library directories built from recorded `ls -l`
listings, a kernel module version file, and an `ldconfig` on PATH that prints the given cache lines.
The probe runs for real under sh against it (its root argument, which the check always sets to "/")."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from nodecheck.probes.nvidia_libraries import libraries_probe
from tests.helpers import data

LIBDIR = "/usr/lib/x86_64-linux-gnu"
# "-rw-r--r--  1 root root   2078360 Jun  3  2024 libnvidia-ml.so.550.90.07" / "lrwxrwxrwx ... a -> b"
_LS = re.compile(r"^(?P<type>[-l])\S+\s+\d+\s+\S+\s+\S+\s+(?P<size>\d+)\s+\S+\s+\S+\s+\S+\s+(?P<name>.+)$")


def tree_from_ls(root: Path, recording: str, libdir: str = LIBDIR) -> None:
    """The files of an `ls -l` recording under root+libdir: links as links, files as sparse files of
    their size; a file the test already made is kept."""
    where = root / libdir.lstrip("/")
    where.mkdir(parents=True, exist_ok=True)
    for line in data(recording).splitlines():
        m = _LS.match(line)
        assert m, line
        path = where / m["name"].split(" -> ")[0].rsplit("/", 1)[-1]
        if path.is_symlink() or path.exists():  # what the test laid out itself stays
            continue
        if m["type"] == "l":
            os.symlink(m["name"].split(" -> ")[1], path)
        else:
            with open(path, "wb") as f:
                f.truncate(int(m["size"]))


def kernel_version(root: Path, recording: str | None, where: str = "proc/driver/nvidia/version") -> None:
    if recording is not None:
        (root / where).parent.mkdir(parents=True, exist_ok=True)
        (root / where).write_text(data(recording), encoding="utf-8")


def fake_ldconfig(bindir: Path, lines: list[str] | None, rc: int = 0) -> None:
    """An ldconfig that prints these cache lines (as `ldconfig -p` does) and exits rc."""
    bindir.mkdir(parents=True, exist_ok=True)
    body = "".join(f"printf '%s\\n' '{line}'\n" for line in (lines or []))
    script = bindir / "ldconfig"
    script.write_text(f'#!/bin/sh\n[ "$1" = -p ] || exit 2\n{body}exit {rc}\n')
    script.chmod(0o755)


def cache_line(name: str, path: str, flags: str = "libc6,x86-64") -> str:
    return f"\t{name} ({flags}) => {path}"


def run_probe(root: Path, names: list[str], bindir: Path) -> str:
    probe = libraries_probe(names, root=str(root))
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "LC_ALL": "C"}
    done = subprocess.run(probe.argv, capture_output=True, text=True, env=env, timeout=30, check=True)
    assert done.stderr == "", done.stderr
    return done.stdout

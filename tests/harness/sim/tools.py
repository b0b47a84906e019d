"""Fake tools: an sh script at <state>/nodes/<node>/bin/<tool>, which is /usr/local/sbin/<tool> on
that node only. It reads its canned output from <state>/nodes/<node>/data/ by absolute path and
needs no environment variable, so it behaves the same over ssh and when a Slurm prolog (or
`nsenter -t <pid> -u -m`) runs it. Arguments given to a fake are ignored unless it replays by
arguments."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

from harness.sim.base import ClusterBase
from harness.sim.common import FAKES, HarnessError, atomic_write, node_python

FAKE_PYNVML = FAKES / "pynvml.py"
FAKE_NVIDIA_SMI = FAKES / "nvidia_smi.py"
FAKE_CUPY = (FAKES / "cupy", FAKES / "cupyx")


class Tools(ClusterBase):
    """Fake tools on a node: canned outputs, exits, hangs, scripts, sequences, crashes, floods."""

    def fake_replay(
        self,
        node: str,
        tool: str,
        data_file: str | os.PathLike,
        exit_code: int = 0,
        stderr_file: str | os.PathLike | None = None,
    ) -> Path:
        """`tool` on `node` prints data_file byte for byte (and stderr_file on stderr), then exits
        with exit_code. The files are copied, so the originals may change or go away."""
        data = self._copy_data(node, tool, "stdout", Path(data_file).read_bytes())
        lines = [f"cat {shlex.quote(str(data))}"]
        if stderr_file is not None:
            err = self._copy_data(node, tool, "stderr", Path(stderr_file).read_bytes())
            lines.append(f"cat {shlex.quote(str(err))} >&2")
        return self._write_tool(node, tool, f"replay of {data_file}", lines + [f"exit {int(exit_code)}"])

    def fake_output(
        self, node: str, tool: str, stdout: str | bytes = b"", exit_code: int = 0, stderr: str | bytes = b""
    ) -> Path:
        """Like fake_replay, with the output given inline."""
        lines = []
        for stream, text, redirect in (("stdout", stdout, ""), ("stderr", stderr, " >&2")):
            if text:
                raw = text.encode() if isinstance(text, str) else text
                lines.append(f"cat {shlex.quote(str(self._copy_data(node, tool, stream, raw)))}{redirect}")
        return self._write_tool(node, tool, "canned output", lines + [f"exit {int(exit_code)}"])

    def fake_exit(self, node: str, tool: str, code: int, stderr_text: str = "") -> Path:
        """`tool` on `node` prints stderr_text on stderr and exits with `code`."""
        return self.fake_output(node, tool, b"", code, stderr_text)

    def fake_hang(self, node: str, tool: str) -> Path:
        """`tool` on `node` never answers (sleeps an hour; down()/stop() kill it)."""
        return self._write_tool(node, tool, "hangs", ["exec sleep 3600"])

    def fake_script(self, node: str, tool: str, body: str) -> Path:
        """`tool` on `node` is the given /bin/sh script body (for fakes that need logic)."""
        return self._write_tool(node, tool, "script", [body])

    def fake_replay_by_args(
        self, node: str, tool: str, cases: list[tuple[str, str | os.PathLike]], otherwise_exit: int = 2
    ) -> Path:
        """`tool` on `node` prints the data file of the first case whose shell pattern matches its
        arguments ("$*"), e.g. [("--query-gpu=*", f1), ("-q", f2)]; no match: exit otherwise_exit."""
        lines = ['case "$*" in']
        for i, (pattern, data_file) in enumerate(cases):
            if "'" in pattern or ")" in pattern:
                raise ValueError(f"bad pattern {pattern!r}")
            data = self._copy_data(node, tool, f"case{i}", Path(data_file).read_bytes())
            # a space in a case pattern must be escaped; * and ? stay globs
            lines.append(f"  {pattern.replace(' ', chr(92) + ' ')}) cat {shlex.quote(str(data))}; exit 0 ;;")
        lines += [f'  *) echo "fake {tool}: no canned output for: $*" >&2; exit {int(otherwise_exit)} ;;', "esac"]
        return self._write_tool(node, tool, "replay by arguments", lines)

    def fake_replay_sequence(
        self, node: str, tool: str, data_files: list[str | os.PathLike], exit_code: int = 0
    ) -> Path:
        """The k-th call of `tool` on `node` prints data_files[k] (copied); from the last one on, it
        keeps printing the last (e.g. perfquery before and after a test)."""
        if not data_files:
            raise ValueError("fake_replay_sequence needs at least one data file")
        self._check_tool(tool)
        data = self.node_dir(node) / "data"
        for old in data.glob(f"{tool}.seq*"):
            old.unlink()
        copies = [self._copy_data(node, tool, f"seq{k}", Path(f).read_bytes()) for k, f in enumerate(data_files)]
        count, lock = data / f"{tool}.count", data / f"{tool}.lock"
        count.unlink(missing_ok=True)
        lines = [
            f"exec 9>>{shlex.quote(str(lock))} && flock 9 || exit 99",  # calls may overlap
            f"n=0; {{ read -r n < {shlex.quote(str(count))}; }} 2>/dev/null",
            f"echo $((n + 1)) > {shlex.quote(str(count))}",
            "exec 9>&-",
            f'[ "$n" -lt {len(copies)} ] || n={len(copies) - 1}',
            'case "$n" in',
        ]
        lines += [f"  {k}) cat {shlex.quote(str(c))} ;;" for k, c in enumerate(copies)]
        lines += ["esac", f"exit {int(exit_code)}"]
        return self._write_tool(node, tool, f"replay sequence of {len(copies)} files", lines)

    def fake_sequence_by_args(
        self, node: str, tool: str, cases: list[tuple[str, list[str | os.PathLike]]], otherwise_exit: int = 2
    ) -> Path:
        """Per shell pattern of the arguments ("$*"), its own sequence: the k-th call matching a
        pattern prints its k-th file (then the last). E.g. perfquery per port, before and after a
        test: [("*-C mlx5_3 *", [before, after]), ("*", [before])]; no match: exit otherwise_exit."""
        self._check_tool(tool)
        data = self.node_dir(node) / "data"
        lock = data / f"{tool}.lock"
        lines = [f"exec 9>>{shlex.quote(str(lock))} && flock 9 || exit 99", 'case "$*" in']
        for i, (pattern, files) in enumerate(cases):
            if "'" in pattern or ")" in pattern or not files:
                raise ValueError(f"bad case {pattern!r}")
            copies = [self._copy_data(node, tool, f"case{i}.seq{k}", Path(f).read_bytes()) for k, f in enumerate(files)]
            count = data / f"{tool}.case{i}.count"
            count.unlink(missing_ok=True)
            c = shlex.quote(str(count))
            lines += [
                f"  {pattern.replace(' ', chr(92) + ' ')})",
                f"    n=0; {{ read -r n < {c}; }} 2>/dev/null; echo $((n + 1)) > {c}",
                f'    [ "$n" -lt {len(copies)} ] || n={len(copies) - 1}',
                '    case "$n" in',
            ]
            lines += [f"      {k}) cat {shlex.quote(str(f))} ;;" for k, f in enumerate(copies)]
            lines += ["    esac ;;"]
        lines += [f"  *) exit {int(otherwise_exit)} ;;", "esac"]
        return self._write_tool(node, tool, f"sequences by arguments ({len(cases)} cases)", lines)

    def fake_killed(self, node: str, tool: str, sig: str = "KILL", stdout: str = "") -> Path:
        """`tool` on `node` prints `stdout`, then dies by signal `sig` (KILL, SEGV, ...), as a tool
        that crashed or was OOM-killed mid-run."""
        if not re.fullmatch(r"[A-Z0-9]+", sig):
            raise ValueError(f"bad signal name {sig!r}")
        lines = [f"cat {shlex.quote(str(self._copy_data(node, tool, 'stdout', stdout.encode())))}"] if stdout else []
        return self._write_tool(node, tool, f"dies by SIG{sig}", lines + [f"kill -{sig} $$", "sleep 5"])

    def fake_flood(self, node: str, tool: str, nbytes: int, line: str = "x" * 99) -> Path:
        """`tool` on `node` prints `nbytes` bytes of `line` lines (100 MB of output), then exits 0."""
        if "'" in line or "\n" in line:
            raise ValueError(f"bad flood line {line!r}")
        return self._write_tool(
            node, tool, f"prints {nbytes} bytes", [f"yes '{line}' | head -c {int(nbytes)}", "exit 0"]
        )

    def fake_stall_after(
        self, node: str, tool: str, first: bytes, rest: bytes, stall_s: float, marker: str | os.PathLike
    ) -> Path:
        """`tool` prints `first`, touches `marker` (the test's cue to inject a fault), waits
        `stall_s`, then prints `rest`: output cut by whatever the test does in between."""
        a = self._copy_data(node, tool, "stdout", first)
        b = self._copy_data(node, tool, "rest", rest)
        return self._write_tool(
            node,
            tool,
            f"prints, stalls {stall_s:g} s, prints the rest",
            [
                f"cat {shlex.quote(str(a))}",
                f"touch {shlex.quote(str(marker))}",
                f"sleep {float(stall_s):g}",
                f"cat {shlex.quote(str(b))}",
                "exit 0",
            ],
        )

    def fake_nvml(self, node: str, state_file: str | os.PathLike) -> Path:
        """nvidia-ml-py is "installed" on the node: the fake pynvml module (tests/fakes/pynvml.py)
        goes into the node's python3 site dir with `state_file` as its GPU state."""
        site = self.node_dir(node) / "py"
        atomic_write(site / "pynvml.py", FAKE_PYNVML.read_bytes(), 0o644)
        atomic_write(site / "nvml_state.json", Path(state_file).read_bytes(), 0o644)
        return site

    def fake_nvidia_smi(
        self, node: str, compute_apps: str | os.PathLike, *, busy: bool = False, reset_helps: bool = True
    ) -> Path:
        """nvidia-smi on the node is tests/fakes/nvidia_smi.py over the node's fake NVML state (fake_nvml
        first): `--query-compute-apps=...` prints compute_apps (a file); `-r -i N` resets GPU N, i.e. its
        pending row remap and page retirement are applied in nvml_state.json, unless `busy` (refused, exit
        255) or not `reset_helps` (success printed, the remap stays pending). Every reset asked is a line
        of nvidia_smi_resets(node). `nvidia-smi --reboot` (not a real option): what a reboot does to the
        GPUs, for an on_reboot() hook."""
        state = self.node_dir(node) / "py" / "nvml_state.json"
        if not state.is_file():
            raise HarnessError(f"{node}: no fake NVML state to reset (fake_nvml first)")
        script = self._copy_data(node, "nvidia-smi", "py", FAKE_NVIDIA_SMI.read_bytes())
        apps = self._copy_data(node, "nvidia-smi", "compute-apps", Path(compute_apps).read_bytes())
        log = self.node_dir(node) / "data" / "nvidia-smi.resets"
        log.unlink(missing_ok=True)
        config = {
            "state": str(state),
            "compute_apps": str(apps),
            "busy": busy,
            "reset_helps": reset_helps,
            "log": str(log),
        }
        conf = self._copy_data(node, "nvidia-smi", "json", json.dumps(config).encode())
        args = [node_python(), "-I", "-S", str(script), str(conf)]
        what = "fake nvidia-smi: compute apps" + (", busy" if busy else "") + ", GPU reset"
        return self._write_tool(node, "nvidia-smi", what, [f'exec {shlex.join(args)} "$@"'])

    def nvidia_smi_resets(self, node: str) -> list[str]:
        """The resets fake_nvidia_smi's nvidia-smi was asked for on the node, oldest first:
        "reset GPU 3: ok" (or ": busy", ": no change", ": no such GPU"); "reboot: ..." for a reboot."""
        try:
            return (self.node_dir(node) / "data" / "nvidia-smi.resets").read_text().splitlines()
        except FileNotFoundError:
            return []

    def fake_gpu_library(self, node: str, state: dict | None = None) -> Path:
        """CuPy is "installed" on the node: the fake cupy package (tests/fakes/cupy, real NumPy math on
        modeled GPUs) goes into the node's python3 site dir beside the fake pynvml, whose GPU state it
        reads; `state` (speed factors, bit flips: tests/fakes/README.md) as gpu_bench_state.json."""
        site = self.node_dir(node) / "py"
        for package in FAKE_CUPY:  # cupy and the cupyx it ships with (pinned host memory)
            shutil.rmtree(site / package.name, ignore_errors=True)
            shutil.copytree(package, site / package.name, ignore=shutil.ignore_patterns("__pycache__"))
        target = site / "gpu_bench_state.json"
        if state is None:
            target.unlink(missing_ok=True)
        else:
            atomic_write(target, json.dumps(state).encode(), 0o644)
        return site

    def install_pyspy(self, node: str | None = None) -> None:
        """The real py-spy (from the test venv) on the node's PATH."""
        spy = Path(sys.executable).parent / "py-spy"
        if not os.access(spy, os.X_OK):
            raise HarnessError(f"{spy} is not installed (pip install py-spy: the test extra has it)")
        for n in [node] if node else self.nodes:
            self._write_tool(n, "py-spy", "the real py-spy", [f'exec {shlex.quote(str(spy))} "$@"'])

    def remove_tool(self, node: str, tool: str) -> None:
        """The tool is missing on the node again (a shell answers exit 127)."""
        self._check_tool(tool)
        d = self.node_dir(node)
        (d / "bin" / tool).unlink(missing_ok=True)
        for f in (d / "data").glob(f"{tool}.*"):
            f.unlink()

    def clear_tools(self, node: str | None = None) -> None:
        """Remove every fake tool (of one node, or of all nodes)."""
        for n in [node] if node else self.nodes:
            d = self.node_dir(n)
            for sub in ("bin", "data", "py"):
                if not (d / sub).is_dir():
                    continue
                for f in (d / sub).iterdir():
                    if f.is_dir():
                        shutil.rmtree(f)  # python's __pycache__
                    else:
                        f.unlink()

    def tools(self, node: str) -> list[str]:
        return sorted(p.name for p in (self.node_dir(node) / "bin").iterdir())

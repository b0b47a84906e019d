"""Parse the GPU benchmark probe's output (nodecheck/probes/gpu_bench_probe.py, schema 1) into typed facts.

Two kinds of trouble are told apart on purpose. A probe output that breaks the schema (wrong type, unknown
key, a phase that does not belong to the mode, too many GPUs) is a ParseError: nodecheck cannot trust any
of it. A measurement that came out wrong (NaN or negative TFLOPS, a checksum that is not a sha256) is one
Figure or Sdc with an error: the rest of the run is still judged, and that figure becomes an ERROR of its
own, never a PASS - a NaN compares false with every floor, so it must not reach a judge as a number.
Strings are cut at 300 characters rather than refused: an exception text is evidence, not a schema fault.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from nodecheck.core.errors import ParseError
from nodecheck.parsers import jsonsafe
from nodecheck.parsers.jsonsafe import KIND_WORDS, kind_of
from nodecheck.parsers.lines import split_lines

TOOL = "gpu bench probe"
SCHEMA = 1
MODES = ("perf", "sdc")
BACKENDS = ("torch", "cupy")
UNAVAILABLE_PREFIX = "nodecheck-gpubench-unavailable:"  # the probe's exit-3 line
MAX_TEXT_CHARS = 4 * 1024 * 1024
MAX_GPUS = 64
MAX_PEERS = 64
MAX_DTYPES = 16
MAX_ERRORS = 64  # per list; more are summarised in one last entry
MAX_STRING = 300
THROTTLE_REASONS = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "applications_clocks_setting",
    "gpu_idle",
    "sync_boost",
    "display_clock_setting",
)
_CHECKSUM = re.compile(r"[0-9a-f]{64}", re.ASCII)
_DTYPE = re.compile(r"[a-z0-9_]{1,16}", re.ASCII)
_PEER = re.compile(r"\d{1,4}", re.ASCII)
NOT_FINITE = "not a finite number"


@dataclass(frozen=True)
class Figure:
    """One measured rate: TFLOPS for a GEMM dtype, GB/s (1e9 bytes/s) for hbm/h2d/d2h/p2p.

    error is set iff value is None. size: m=n=k for a GEMM, bytes copied for a bandwidth figure.
    unsupported: the GPU or library has no such dtype (error says which): no figure, and no fault."""

    value: float | None
    error: str = ""
    size: int | None = None
    iterations: int | None = None
    seconds: float | None = None
    unsupported: bool = False


@dataclass(frozen=True)
class Stat:
    min: float
    max: float
    mean: float


@dataclass(frozen=True)
class Telemetry:
    source: str | None  # "pynvml"; None when telemetry could not run (error says why)
    samples: int
    sm_clock_mhz: Stat | None
    mem_clock_mhz: Stat | None
    power_w: Stat | None
    temp_c: Stat | None
    throttle_reasons: tuple[str, ...]  # seen in any sample, gpu_idle excluded, in THROTTLE_REASONS order
    error: str = ""


@dataclass(frozen=True)
class Sdc:
    """The silent-data-corruption screen on one GPU: a fixed GEMM chain run twice, hashed.

    checksum is comparable across GPUs only for the same BenchRun.software_key, GPU name and cc."""

    checksum: str | None  # 64 lowercase hex; None when the screen failed or printed something else
    dtype: str
    size: int
    steps: int
    seed: int
    repeat_equal: bool  # both runs on this GPU hashed the same
    finite: bool  # no NaN/Inf in the result
    error: str = ""


@dataclass(frozen=True)
class BenchGpu:
    index: int
    name: str
    uuid: str | None
    pci_bus_id: str | None
    memory_bytes: int | None
    cc: str | None
    gemm: Mapping[str, Figure]  # dtype ("bf16", "fp16", "fp8") -> TFLOPS
    hbm: Figure | None
    h2d: Figure | None
    d2h: Figure | None
    p2p: Mapping[int, Figure]  # peer GPU index -> GB/s from this GPU to the peer
    sdc: Sdc | None
    telemetry: Telemetry | None
    errors: tuple[str, ...]


@dataclass(frozen=True)
class Backend:
    name: str  # "torch" or "cupy"
    version: str
    blas: str | None
    cuda_runtime: str | None
    driver: str | None
    cuda_driver: int | None


@dataclass(frozen=True)
class BenchRun:
    schema: int
    mode: str  # "perf" or "sdc"
    backend: Backend
    gpus: tuple[BenchGpu, ...]
    errors: tuple[str, ...]

    @property
    def software_key(self) -> str:
        """What must be identical, besides the GPU name and cc, for two SDC checksums to be comparable:
        a different BLAS or driver may pick another GEMM kernel and round differently, honestly."""
        b = self.backend
        driver = b.driver if b.driver is not None else (str(b.cuda_driver) if b.cuda_driver is not None else "?")
        return f"{b.name} {b.version} | {b.blas or '?'} | {b.cuda_runtime or '?'} | {driver}"


class GpuBenchUnavailable(ParseError):
    """The probe found no usable GPU library or device (its exit-3 line): the check is SKIPPED or ERROR by
    policy, not a parse failure of a benchmark."""

    def __init__(self, reason: str, excerpt: str = "") -> None:
        super().__init__(TOOL, reason, excerpt)


def unavailable_reason(text: str) -> str | None:
    """The reason on the probe's `nodecheck-gpubench-unavailable: <reason>` line, or None if it is not one."""
    stripped = text.strip()
    first = split_lines(stripped)[0] if stripped else ""
    if not first.startswith(UNAVAILABLE_PREFIX):
        return None
    return _cut(first[len(UNAVAILABLE_PREFIX) :].strip()) or "no reason given"


def parse_gpu_bench(text: str) -> BenchRun:
    """The probe's stdout -> BenchRun; GpuBenchUnavailable for its unavailable line, ParseError otherwise."""
    if len(text) > MAX_TEXT_CHARS:
        raise ParseError(TOOL, f"output of {len(text)} characters (at most {MAX_TEXT_CHARS} read)", text[:2000])
    reason = unavailable_reason(text)
    if reason is not None:
        raise GpuBenchUnavailable(reason, text)
    stripped = text.strip()
    if not stripped:
        raise ParseError(TOOL, "empty output", text)
    try:
        # finite_numbers=False: a NaN figure is a measurement fault of that figure, checked field by field
        doc = jsonsafe.loads(stripped, finite_numbers=False)
    except (json.JSONDecodeError, jsonsafe.JsonRefused) as exc:
        raise ParseError(TOOL, f"not JSON: {exc}", text) from None
    except RecursionError:
        raise ParseError(TOOL, "JSON nested too deeply", text) from None
    return _Reader(text).run(doc)


def _cut(value: str) -> str:
    return value if len(value) <= MAX_STRING else value[:MAX_STRING] + "…"


class _Reader:
    """Typed access to the decoded JSON; every schema fault names the field by its path."""

    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, path: str, reason: str) -> ParseError:
        return ParseError(TOOL, f"{path}: {reason}"[:400], self.text)

    def check(self, value: Any, kind: type, path: str) -> Any:
        # bool is an int subclass: JSON true must never pass for a count, nor 1 for true
        ok = type(value) in (int, float) if kind is float else type(value) is kind
        if not ok:
            raise self.fail(path, f"expected {KIND_WORDS[kind]}, got {kind_of(value)} {value!r}"[:200])
        if kind is str:
            return _cut(value)
        return float(value) if kind is float else value

    def keys(self, obj: dict, allowed: tuple[str, ...], path: str) -> None:
        unknown = sorted(str(k)[:40] for k in obj if k not in allowed)
        if unknown:
            raise self.fail(path, f"unknown key(s) {unknown[:5]}")

    def req(self, obj: dict, key: str, kind: type, path: str) -> Any:
        if key not in obj or obj[key] is None:
            raise self.fail(f"{path}.{key}", "missing" if key not in obj else "is null")
        return self.check(obj[key], kind, f"{path}.{key}")

    def opt(self, obj: dict, key: str, kind: type, path: str) -> Any:
        """A value the probe writes as null (or leaves out) when it could not learn it."""
        value = obj.get(key)
        return None if value is None else self.check(value, kind, f"{path}.{key}")

    def count(self, obj: dict, key: str, path: str, *, required: bool) -> int | None:
        value = self.req(obj, key, int, path) if required else self.opt(obj, key, int, path)
        if value is not None and value < 0:
            raise self.fail(f"{path}.{key}", f"negative {value}")
        return value

    def messages(self, obj: dict, key: str, path: str) -> tuple[str, ...]:
        raw = self.opt(obj, key, list, path) or []
        texts = [self.check(item, str, f"{path}.{key}[{i}]") for i, item in enumerate(raw[: MAX_ERRORS + 1])]
        for i, item in enumerate(raw[MAX_ERRORS + 1 :], start=MAX_ERRORS + 1):
            self.check(item, str, f"{path}.{key}[{i}]")
        if len(raw) > MAX_ERRORS:
            texts = texts[:MAX_ERRORS] + [f"… {len(raw) - MAX_ERRORS} more error(s)"]
        return tuple(texts)

    def run(self, doc: Any) -> BenchRun:
        if not isinstance(doc, dict):
            raise ParseError(TOOL, f"not a JSON object but {kind_of(doc)}", self.text)
        schema = doc.get("schema")
        if type(schema) is not int or schema != SCHEMA:
            raise ParseError(TOOL, f"unknown schema version {schema!r:.40} (this nodecheck reads {SCHEMA})", self.text)
        self.keys(doc, ("schema", "mode", "backend", "gpus", "errors"), "$")
        mode = self.req(doc, "mode", str, "$")
        if mode not in MODES:
            raise self.fail("$.mode", f"{mode!r} is not one of {MODES}")
        backend = self.backend(self.req(doc, "backend", dict, "$"))
        gpus_raw = self.req(doc, "gpus", list, "$")
        if len(gpus_raw) > MAX_GPUS:
            raise self.fail("$.gpus", f"{len(gpus_raw)} GPUs (at most {MAX_GPUS})")
        gpus = tuple(self.gpu(raw, mode, f"$.gpus[{i}]") for i, raw in enumerate(gpus_raw))
        indexes = [g.index for g in gpus]
        if len(set(indexes)) != len(indexes):
            raise self.fail("$.gpus", f"duplicate GPU index in {indexes}")
        return BenchRun(schema, mode, backend, gpus, self.messages(doc, "errors", "$"))

    def backend(self, raw: dict) -> Backend:
        path = "$.backend"
        self.keys(raw, ("name", "version", "blas", "cuda_runtime", "driver", "cuda_driver"), path)
        name = self.req(raw, "name", str, path)
        if name not in BACKENDS:
            raise self.fail(f"{path}.name", f"{name!r} is not one of {BACKENDS}")
        return Backend(
            name=name,
            version=self.req(raw, "version", str, path),
            blas=self.opt(raw, "blas", str, path),
            cuda_runtime=self.opt(raw, "cuda_runtime", str, path),
            driver=self.opt(raw, "driver", str, path),
            cuda_driver=self.count(raw, "cuda_driver", path, required=False),
        )

    def gpu(self, raw: Any, mode: str, path: str) -> BenchGpu:
        raw = self.check(raw, dict, path)
        perf_keys = ("gemm", "hbm", "h2d", "d2h", "p2p", "telemetry")
        self.keys(raw, ("index", "name", "uuid", "pci_bus_id", "memory_bytes", "cc", "sdc", "errors", *perf_keys), path)
        # the probe leaves out what it did not measure; a phase of the other mode means a confused probe
        wrong = [k for k in (perf_keys if mode == "sdc" else ("sdc",)) if k in raw]
        if wrong:
            raise self.fail(path, f"{mode} mode output has {wrong}")
        index = self.count(raw, "index", path, required=True)
        assert index is not None
        gemm_raw = self.opt(raw, "gemm", dict, path) or {}
        if len(gemm_raw) > MAX_DTYPES:
            raise self.fail(f"{path}.gemm", f"{len(gemm_raw)} dtypes (at most {MAX_DTYPES})")
        gemm = {}
        for dtype, fig in gemm_raw.items():
            if not _DTYPE.fullmatch(dtype):
                raise self.fail(f"{path}.gemm", f"not a dtype name: {dtype[:40]!r}")
            gemm[dtype] = self.figure(fig, "tflops", f"{path}.gemm.{dtype}")
        p2p_raw = self.opt(raw, "p2p", dict, path) or {}
        if len(p2p_raw) > MAX_PEERS:
            raise self.fail(f"{path}.p2p", f"{len(p2p_raw)} peers (at most {MAX_PEERS})")
        p2p = {}
        for peer, fig in p2p_raw.items():
            if not _PEER.fullmatch(peer) or int(peer) == index:
                raise self.fail(f"{path}.p2p", f"not a peer GPU index: {peer[:40]!r}")
            p2p[int(peer)] = self.figure(fig, "gbps", f"{path}.p2p.{peer}")
        copies = {
            k: self.figure(raw[k], "gbps", f"{path}.{k}") if raw.get(k) is not None else None
            for k in ("hbm", "h2d", "d2h")
        }
        return BenchGpu(
            index=index,
            name=self.req(raw, "name", str, path),
            uuid=self.opt(raw, "uuid", str, path),
            pci_bus_id=self.opt(raw, "pci_bus_id", str, path),
            memory_bytes=self.count(raw, "memory_bytes", path, required=False),
            cc=self.opt(raw, "cc", str, path),
            gemm=MappingProxyType(gemm),
            hbm=copies["hbm"],
            h2d=copies["h2d"],
            d2h=copies["d2h"],
            p2p=MappingProxyType(dict(sorted(p2p.items()))),
            sdc=self.sdc(raw["sdc"], f"{path}.sdc") if raw.get("sdc") is not None else None,
            telemetry=self.telemetry(raw["telemetry"], f"{path}.telemetry")
            if raw.get("telemetry") is not None
            else None,
            errors=self.messages(raw, "errors", path),
        )

    def figure(self, raw: Any, value_key: str, path: str) -> Figure:
        raw = self.check(raw, dict, path)
        if "error" in raw:
            self.keys(raw, ("error",), path)
            return Figure(None, error=self.req(raw, "error", str, path) or "error with no message")
        if "unsupported" in raw:  # the GPU or the library has no such dtype (fp8 on Ampere, bf16 in CuPy)
            self.keys(raw, ("unsupported",), path)
            why = self.req(raw, "unsupported", str, path) or "unsupported, no reason given"
            return Figure(None, error=why, unsupported=True)
        size_key = "size" if value_key == "tflops" else "bytes"
        self.keys(raw, (value_key, size_key, "iterations", "seconds"), path)
        value = self.req(raw, value_key, float, path)
        seconds = self.opt(raw, "seconds", float, path)
        size = self.count(raw, size_key, path, required=False)
        iterations = self.count(raw, "iterations", path, required=False)
        for key, number in ((value_key, value), ("seconds", seconds)):
            if number is not None and not (math.isfinite(number) and number >= 0):
                return Figure(None, error=f"{key}: {NOT_FINITE} >= 0 ({number!r})", size=size, iterations=iterations)
        return Figure(value, size=size, iterations=iterations, seconds=seconds)

    def sdc(self, raw: Any, path: str) -> Sdc:
        raw = self.check(raw, dict, path)
        if "error" in raw:
            self.keys(raw, ("error",), path)
            message = self.req(raw, "error", str, path) or "error with no message"
            return Sdc(None, "", 0, 0, 0, repeat_equal=False, finite=False, error=message)
        self.keys(raw, ("checksum", "dtype", "size", "steps", "seed", "repeat_equal", "finite", "seconds"), path)
        checksum = self.req(raw, "checksum", str, path)
        self.opt(raw, "seconds", float, path)  # type-checked only: the screen's verdict is its checksum, not its time
        error = ""  # set iff checksum is None, so a judge reads one field
        if not _CHECKSUM.fullmatch(checksum):
            error, checksum = f"checksum is not 64 lowercase hex digits: {checksum[:80]!r}", None
        return Sdc(
            checksum=checksum,
            dtype=self.req(raw, "dtype", str, path),
            size=self.count(raw, "size", path, required=True) or 0,
            steps=self.count(raw, "steps", path, required=True) or 0,
            seed=self.count(raw, "seed", path, required=True) or 0,
            repeat_equal=self.req(raw, "repeat_equal", bool, path),
            finite=self.req(raw, "finite", bool, path),
            error=error,
        )

    def telemetry(self, raw: Any, path: str) -> Telemetry:
        raw = self.check(raw, dict, path)
        stats = ("sm_clock_mhz", "mem_clock_mhz", "power_w", "temp_c")
        self.keys(raw, ("source", "samples", "error", "throttle_reasons", *stats), path)
        source = self.opt(raw, "source", str, path)
        error = self.opt(raw, "error", str, path) or ""
        if source is None:
            if not error:
                raise self.fail(path, "no source and no error")
            return Telemetry(None, 0, None, None, None, None, (), error=error)
        samples = self.count(raw, "samples", path, required=True) or 0
        values: dict[str, Stat | None] = {}
        faults = [error] if error else []
        for key in stats:
            values[key], fault = self.stat(raw.get(key), f"{path}.{key}")
            if fault:
                faults.append(fault)
        reasons_raw = self.opt(raw, "throttle_reasons", list, path) or []
        if len(reasons_raw) > len(THROTTLE_REASONS):
            raise self.fail(f"{path}.throttle_reasons", f"{len(reasons_raw)} entries")
        reasons = {self.check(r, str, f"{path}.throttle_reasons[{i}]") for i, r in enumerate(reasons_raw)}
        unknown = sorted(reasons - set(THROTTLE_REASONS))
        if unknown:
            raise self.fail(f"{path}.throttle_reasons", f"unknown reason(s) {unknown}")
        return Telemetry(
            source=source,
            samples=samples,
            sm_clock_mhz=values["sm_clock_mhz"],
            mem_clock_mhz=values["mem_clock_mhz"],
            power_w=values["power_w"],
            temp_c=values["temp_c"],
            throttle_reasons=tuple(r for r in THROTTLE_REASONS if r in reasons and r != "gpu_idle"),
            error="; ".join(faults)[:MAX_STRING],
        )

    def stat(self, raw: Any, path: str) -> tuple[Stat | None, str]:
        """A min/max/mean triple; a NaN or disordered one is dropped with a note (a telemetry fault, not a
        schema fault: a sensor can read garbage)."""
        if raw is None:
            return None, ""
        raw = self.check(raw, dict, path)
        self.keys(raw, ("min", "max", "mean"), path)
        low, high, mean = (self.req(raw, k, float, path) for k in ("min", "max", "mean"))
        name = path.rsplit(".", 1)[-1]
        if not all(math.isfinite(v) for v in (low, high, mean)):
            return None, f"{name}: {NOT_FINITE}"
        if not low <= mean <= high:
            return None, f"{name}: mean {mean} outside [{low}, {high}]"
        return Stat(low, high, mean), ""

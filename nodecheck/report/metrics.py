"""A sweep as a Prometheus textfile for node_exporter's textfile collector: a pure renderer and an
atomic writer (node_exporter must never read half a file). A plain run (`run --metrics`) writes the
same families named nodecheck_run_* (render(..., run=True)), without the repeat offenders.

Metrics (gauges; every status metric uses Status.rank, the severity order of nodecheck.core.model):
    nodecheck_check_status{node,check}        0 pass, 1 warn, 2 skipped, 3 error, 4 timeout,
                                              5 unreachable, 6 fail (the worst verdict of the check on the node)
    nodecheck_check_healthy{node,check}       1 pass/warn, 0 anything else (Status.healthy)
    nodecheck_node_status{node}               the node's worst status, as above
    nodecheck_node_healthy{node}              1 healthy, 0 not
    nodecheck_nodes{status}                   nodes per status (every status, zeros included)
    nodecheck_repeat_offender{node}           1 when not healthy in >= k of the last n sweeps
    nodecheck_sweep_last_timestamp_seconds    when the sweep finished (Unix time)
    nodecheck_sweep_duration_seconds
    nodecheck_sweep_complete                  0 when the deadline or a signal cut the sweep
    nodecheck_sweep_problems                  what the sweep could not keep or read (its report, the
                                              history): > 0, the diff and offenders are not to be trusted
    nodecheck_sweep_info{playbook,version}    1
    nodecheck_nccl_busbw_bytes_per_second{node,check,test}   nccl-tests busbw at the plateau (GB/s x 1e9)
    nodecheck_ib_write_bw_best_bytes_per_second{node,check,device} best ib_write_bw of the node's HCA in
                                                             ib.pairs (Gb/s x 1e9 / 8)
    nodecheck_ib_port_counter{node,port,counter}   an IB error counter's raw value at the sweep's
                                              read (ib.counters' second read; the error counters
                                              the history keeps). A gauge, not a counter: take
                                              increase()/rate() over it; a reboot or perfquery -R
                                              resets it, which shows as a drop (rate() reads a drop
                                              as a counter reset, as it should). The value is
                                              written as the exact integer, up to 2^64-1.
    nodecheck_gpu_gemm_flops{node,gpu,dtype}  gpu.perf's GEMM throughput (TFLOPS x 1e12)
    nodecheck_gpu_bandwidth_bytes_per_second{node,gpu,path}  gpu.perf's copies (GB/s x 1e9): hbm, h2d,
                                              d2h, nvlink (the GPU's slowest pair)
    nodecheck_nvlink_gpu_counter{node,gpu,counter}  an NVLink error counter (replay, recovery,
                                              crc_flit, crc_data, ecc_data) summed over the GPU's links
                                              at nvlink.errors' second read; a gauge like the IB one
                                              (a GPU reset or reboot shows as a drop).
No sample carries a timestamp: the textfile collector refuses them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from nodecheck import __version__
from nodecheck.core.model import SEVERITY
from nodecheck.report.diff import (
    BUSBW,
    NVLINK_COUNTER_CHECK,
    PAIR_BW,
    PERF_CHECK,
    Offender,
    SweepSnapshot,
    counter_check,
)

COUNTER_METRIC = "nodecheck_ib_port_counter"
GPU_GEMM_METRIC = "nodecheck_gpu_gemm_flops"
GPU_GEMM_HELP = "gpu.perf's sustained dense GEMM throughput of the GPU (TFLOPS x 1e12)"
GPU_BW_METRIC = "nodecheck_gpu_bandwidth_bytes_per_second"
GPU_BW_HELP = (
    "gpu.perf's copy bandwidth of the GPU (GB/s x 1e9): path hbm (read + write), h2d, d2h, nvlink (its slowest pair)"
)
NVLINK_COUNTER_METRIC = "nodecheck_nvlink_gpu_counter"
METRICS_FILE_MODE = 0o644  # node_exporter's user reads it; why not 0640: write_atomic

STATUS_HELP = ", ".join(f"{s.rank} {s.value}" for s in SEVERITY)
# (measurement name, unit) -> (metric, factor to base units, the subject's label, help)
MEASUREMENT_METRICS = {
    (BUSBW, "GB/s"): (
        "nodecheck_nccl_busbw_bytes_per_second",
        1e9,
        "test",
        "nccl-tests bus bandwidth at the plateau sizes (nccl-tests GB/s x 1e9)",
    ),
    (PAIR_BW, "Gb/s"): (
        "nodecheck_ib_write_bw_best_bytes_per_second",
        1e9 / 8,
        "device",
        "the best ib_write_bw this node's HCA reached with any partner in ib.pairs",
    ),
}


def render(
    snap: SweepSnapshot,
    found: Sequence[Offender] = (),
    version: str = __version__,
    problems: int = 0,
    *,
    run: bool = False,
) -> str:
    """The textfile. `run`: a plain `nodecheck run --metrics`, whose families are named
    nodecheck_run_* (nodecheck_run_check_status, nodecheck_run_last_timestamp_seconds, …) and have
    no repeat offenders: node_exporter reads every *.prom of its directory, and a run's file beside
    the sweep's with the same series would make it refuse both."""
    out: list[str] = []

    def _family(out: list[str], name: str, text: str, samples: Iterable[tuple[dict, float]]) -> None:
        if run:
            name = "nodecheck_run_" + name.removeprefix("nodecheck_").removeprefix("sweep_")
            text = text.replace("the last sweep", "the run").replace("last sweep", "run")
        write_family(out, name, text, samples)

    checks = snap.checks()
    statuses = snap.node_statuses
    _family(
        out,
        "nodecheck_check_status",
        f"Worst status of the check on the node in the last sweep: {STATUS_HELP}",
        [({"node": n, "check": c}, s.status.rank) for (n, c), s in checks.items()],
    )
    _family(
        out,
        "nodecheck_check_healthy",
        "1 if the check passed or only warned on the node in the last sweep",
        [({"node": n, "check": c}, int(s.status.healthy)) for (n, c), s in checks.items()],
    )
    _family(
        out,
        "nodecheck_node_status",
        f"The node's worst status in the last sweep: {STATUS_HELP}",
        [({"node": n}, s.rank) for n, s in statuses.items()],
    )
    _family(
        out,
        "nodecheck_node_healthy",
        "1 if every check passed or only warned on the node",
        [({"node": n}, int(s.healthy)) for n, s in statuses.items()],
    )
    counts = defaultdict(int, dict.fromkeys(SEVERITY, 0))
    for s in statuses.values():
        counts[s] += 1
    _family(
        out,
        "nodecheck_nodes",
        "Nodes of the last sweep per status",
        [({"status": s.value}, counts[s]) for s in SEVERITY],
    )
    flagged = {o.node for o in found}
    if not run:  # offenders are the sweeps' history; a run has none
        _family(
            out,
            "nodecheck_repeat_offender",
            "1 if the node was not healthy in at least k of the last n sweeps",
            [({"node": n}, int(n in flagged)) for n in [*statuses, *sorted(flagged - set(statuses))]],
        )
    _family(
        out,
        "nodecheck_sweep_last_timestamp_seconds",
        "When the last sweep finished, Unix time",
        [({}, snap.finished.timestamp())],
    )
    _family(
        out,
        "nodecheck_sweep_duration_seconds",
        "How long the last sweep took",
        [({}, (snap.finished - snap.started).total_seconds())],
    )
    _family(
        out,
        "nodecheck_sweep_complete",
        "0 if the deadline or a signal cut the last sweep short",
        [({}, int(snap.complete))],
    )
    _family(
        out,
        "nodecheck_sweep_problems",
        "What the last sweep could not keep or read (its report, the history); see its log",
        [({}, problems)],
    )
    _family(
        out,
        "nodecheck_sweep_info",
        "The last sweep's playbook and nodecheck version",
        [({"playbook": snap.playbook, "version": version}, 1)],
    )
    by_metric: dict[tuple, list] = defaultdict(list)
    for m in snap.measurements:
        spec = MEASUREMENT_METRICS.get((m.name, m.unit))
        if spec is not None:
            name, factor, label, text = spec
            by_metric[(name, text)].append(({"node": m.node, "check": m.check, label: m.subject}, m.value * factor))
        elif m.check == PERF_CHECK and m.name.startswith("gemm_") and m.unit == "TFLOPS":
            by_metric[(GPU_GEMM_METRIC, GPU_GEMM_HELP)].append(
                ({"node": m.node, "gpu": m.subject, "dtype": m.name.removeprefix("gemm_")}, m.value * 1e12)
            )
        elif m.check == PERF_CHECK and m.unit == "GB/s":
            by_metric[(GPU_BW_METRIC, GPU_BW_HELP)].append(
                ({"node": m.node, "gpu": m.subject, "path": m.name}, m.value * 1e9)
            )
    for (name, text), samples in by_metric.items():
        _family(out, name, text, samples)
    ib = [c for c in snap.counters if counter_check(c.counter) != NVLINK_COUNTER_CHECK]
    nvlink = [c for c in snap.counters if counter_check(c.counter) == NVLINK_COUNTER_CHECK]
    if ib:  # ints: number() writes them exactly, 2^64-1 included
        _family(
            out,
            COUNTER_METRIC,
            "An IB error counter's raw value at the last sweep (ib.counters' second "
            "read); use increase() or rate(): a reboot or perfquery -R resets it, shown as a drop",
            [({"node": c.node, "port": c.port, "counter": c.counter}, c.value) for c in ib],
        )
    if nvlink:
        _family(
            out,
            NVLINK_COUNTER_METRIC,
            "An NVLink error counter summed over the GPU's links at the last sweep (nvlink.errors' second "
            "read); use increase() or rate(): a GPU reset or reboot resets it, shown as a drop",
            [({"node": c.node, "gpu": c.port, "counter": c.counter}, c.value) for c in nvlink],
        )
    return "".join(out)


def write_family(out: list[str], name: str, text: str, samples: Iterable[tuple[dict, float]]) -> None:
    out.append(f"# HELP {name} {escape_help(text)}\n# TYPE {name} gauge\n")
    for labels, value in samples:
        pairs = ",".join(f'{k}="{escape_label(str(v))}"' for k, v in labels.items())
        out.append(f"{name}{{{pairs}}} {number(value)}\n" if pairs else f"{name} {number(value)}\n")


def escape_label(value: str) -> str:
    """The exposition format's label value escapes: backslash, double quote, line feed."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text escapes backslash and line feed (a quote is literal there)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def number(value: float) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def write_atomic(path: str | Path, text: str) -> None:
    """A temporary file beside the target (same filesystem; a name node_exporter ignores: it reads
    *.prom only), synced, then renamed over it (report.store.write_atomic).

    0644, unlike every other file nodecheck writes (0640): node_exporter reads it as its own user,
    and what it holds is not secret: statuses, counts, bandwidths, node and check names, the
    playbook and version, never a message, an argv or tool output."""
    from nodecheck.report.store import Access
    from nodecheck.report.store import write_atomic as replace_file

    replace_file(path, text, Access(METRICS_FILE_MODE, 0o755))

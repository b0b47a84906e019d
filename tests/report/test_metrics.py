"""The Prometheus textfile of a sweep: exact samples, the exposition format checked line by line
(prometheus_client is not a dependency, so the format rules are spelled out here), atomic writes."""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import replace

import pytest

from nodecheck.core.model import SEVERITY, Status
from nodecheck.report import diff as D
from nodecheck.report import metrics
from nodecheck.report.diff import Offender, ResultRow
from tests.report.test_diff import T1, current_report, nvlink, report

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{(.*)\}})? (\S+)$")
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_textfile(text: str) -> dict[tuple[str, frozenset], float]:
    """The text exposition format as node_exporter's textfile collector reads it, strictly: every
    family has one HELP and one TYPE line before its samples and is not split; label values use
    only the three escapes; no timestamps; no duplicate series; a final newline."""
    assert text.endswith("\n") and "\r" not in text
    samples: dict[tuple[str, frozenset], float] = {}
    helped, typed, done, current = set(), set(), set(), None
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert re.fullmatch(_NAME, name) and name not in helped, line
            helped.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("gauge", "counter", "untyped") and name in helped and name not in typed, line
            typed.add(name)
            if current is not None and current != name:
                done.add(current)
            current = name
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.groups()
        assert name == current and name not in done and name in typed, f"{name} outside its family"
        pairs = []
        if labels:
            rest = labels
            while rest:
                lm = _LABEL.match(rest)
                assert lm, f"bad label in {line!r}"
                pairs.append((lm.group(1), re.sub(r'\\[\\"n]', lambda e: _UNESCAPE[e.group()], lm.group(2))))
                rest = rest[lm.end() :]
                assert rest == "" or rest.startswith(","), line
                rest = rest[1:]
            assert len({k for k, _ in pairs}) == len(pairs), line
        number = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf}.get(value)
        key = (name, frozenset(pairs))
        assert key not in samples, f"duplicate series {line!r}"
        samples[key] = number if number is not None else float(value)
    return samples


def sample(samples, name, **labels) -> float:
    return samples[(name, frozenset(labels.items()))]


OFFENDERS = [Offender("node1", 2, 3, ("ib.ports",)), Offender("node4", 3, 3, ("gpu.health",))]


def rendered() -> str:
    return metrics.render(D.snapshot(current_report()), OFFENDERS, version="0.1.0")


def test_check_and_node_statuses_use_the_status_rank():
    text = rendered()
    lines = text.splitlines()
    assert lines[:5] == [
        "# HELP nodecheck_check_status Worst status of the check on the node in the last sweep: 0 pass, "
        "1 warn, 2 skipped, 3 error, 4 timeout, 5 unreachable, 6 fail",
        "# TYPE nodecheck_check_status gauge",
        'nodecheck_check_status{node="node1",check="ib.ports"} 6',
        'nodecheck_check_status{node="node1",check="gpu.health"} 0',
        'nodecheck_check_status{node="node1",check="ib.counters"} 0',
    ]
    assert 'nodecheck_check_status{node="node1",check="kernel.version"} 3' in lines
    assert 'nodecheck_check_healthy{node="node5",check="gpu.health"} 0' in lines
    assert 'nodecheck_check_healthy{node="node2",check="ib.ports"} 1' in lines
    assert [s.rank for s in SEVERITY] == [0, 1, 2, 3, 4, 5, 6]
    samples = parse_textfile(text)
    assert len([k for k in samples if k[0] == "nodecheck_check_status"]) == 19
    assert sample(samples, "nodecheck_node_status", node="node3") == 6
    assert sample(samples, "nodecheck_node_healthy", node="node2") == 0


def test_sweep_level_gauges_counts_and_offenders():
    samples = parse_textfile(rendered())
    assert {dict(k[1])["status"]: v for k, v in samples.items() if k[0] == "nodecheck_nodes"} == {
        "pass": 0,
        "warn": 0,
        "skipped": 0,
        "error": 0,
        "timeout": 0,
        "unreachable": 0,
        "fail": 4,
    }
    assert {dict(k[1])["node"]: v for k, v in samples.items() if k[0] == "nodecheck_repeat_offender"} == {
        "node1": 1,
        "node2": 0,
        "node3": 0,
        "node5": 0,
        "node4": 1,
    }
    assert sample(samples, "nodecheck_sweep_last_timestamp_seconds") == 1795950192.5  # 11:03:12.5 UTC
    assert sample(samples, "nodecheck_sweep_duration_seconds") == 42.5
    assert sample(samples, "nodecheck_sweep_complete") == 1
    assert sample(samples, "nodecheck_sweep_problems") == 0
    assert sample(samples, "nodecheck_sweep_info", playbook="sweep", version="0.1.0") == 1
    assert "nodecheck_sweep_problems 2\n" in metrics.render(D.snapshot(current_report()), [], problems=2)


def test_bandwidths_are_in_bytes_per_second():
    samples = parse_textfile(rendered())
    assert (
        sample(
            samples,
            "nodecheck_nccl_busbw_bytes_per_second",
            node="node1",
            check="nccl.allreduce_single",
            test="all_reduce",
        )
        == 452.1e9
    )
    best = {dict(k[1])["node"]: v for k, v in samples.items() if k[0] == "nodecheck_ib_write_bw_best_bytes_per_second"}
    assert best == {"node1": 391.5e9 / 8, "node2": 391.5e9 / 8, "node3": 120e9 / 8}
    assert (
        'nodecheck_ib_write_bw_best_bytes_per_second{node="node3",check="ib.pairs",device="mlx5_0"} '
        "15000000000" in rendered().splitlines()
    )


def test_label_values_are_escaped_and_read_back_exactly():
    odd = 'gpu"7\\b\nx'
    snap = D.snapshot(current_report())
    snap = replace(snap, nodes=(odd,), results=(ResultRow(odd, "ib.ports", Status.TIMEOUT, "t"),), measurements=())
    text = metrics.render(snap, [], version='1.0 "dev"\\')
    assert 'nodecheck_check_status{node="gpu\\"7\\\\b\\nx",check="ib.ports"} 4\n' in text
    samples = parse_textfile(text)
    assert sample(samples, "nodecheck_check_status", node=odd, check="ib.ports") == 4
    assert sample(samples, "nodecheck_sweep_info", playbook="sweep", version='1.0 "dev"\\') == 1
    assert metrics.escape_help("a\\b\nc") == "a\\\\b\\nc"


@pytest.mark.parametrize(
    "value, text",
    [
        (6, "6"),
        (True, "1"),
        (42.5, "42.5"),
        (1e20, "1e+20"),
        (452.1e9, "452100000000"),
        (math.nan, "NaN"),
        (-math.inf, "-Inf"),
    ],
)
def test_numbers(value, text):
    assert metrics.number(value) == text


def test_the_strict_reader_refuses_what_node_exporter_refuses():
    good = "# HELP a x\n# TYPE a gauge\na 1\n"
    assert parse_textfile(good) == {("a", frozenset()): 1.0}
    for bad in (
        "# HELP a x\n# TYPE a gauge\na 1",  # no final newline
        "# TYPE a gauge\na 1\n",  # no HELP
        '# HELP a x\n# TYPE a gauge\na{n="x\\t"} 1\n',  # an escape the format lacks
        "# HELP a x\n# TYPE a gauge\na 1 1700000000000\n",  # a timestamp
        "# HELP a x\n# TYPE a gauge\na 1\na 2\n",  # a duplicate series
        "# HELP a x\n# TYPE a gauge\na 1\n# HELP b x\n# TYPE b gauge\nb 1\na 2\n",
    ):  # split family
        with pytest.raises(AssertionError):
            parse_textfile(bad)


def test_the_write_is_atomic_readable_and_leaves_nothing_behind(tmp_path):
    target = tmp_path / "nodecheck.prom"
    target.write_text("old\n")
    metrics.write_atomic(target, "# HELP a x\n# TYPE a gauge\na 1\n")
    assert target.read_text() == "# HELP a x\n# TYPE a gauge\na 1\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644  # node_exporter runs as another user
    assert os.listdir(tmp_path) == ["nodecheck.prom"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path, monkeypatch):
    target = tmp_path / "nodecheck.prom"
    target.write_text("old\n")
    seen = []

    def fail(src, dst):
        seen.append(os.path.basename(src))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        metrics.write_atomic(target, "new\n")
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["nodecheck.prom"]
    [temporary] = seen
    assert temporary.startswith(".nodecheck.prom.") and not temporary.endswith(".prom")  # never collected


def test_ib_error_counters_are_one_gauge_series_per_node_port_counter():
    text = rendered()
    start = text.index("# HELP nodecheck_ib_port_counter ")
    assert text[start:].splitlines() == [
        "# HELP nodecheck_ib_port_counter An IB error counter's raw value at the last sweep (ib.counters' second "
        "read); use increase() or rate(): a reboot or perfquery -R resets it, shown as a drop",
        "# TYPE nodecheck_ib_port_counter gauge",
        'nodecheck_ib_port_counter{node="node1",port="mlx5_0/1",counter="LinkDownedCounter"} 1',
        'nodecheck_ib_port_counter{node="node1",port="mlx5_0/1",counter="SymbolErrorCounter"} 50',
        'nodecheck_ib_port_counter{node="node1",port="mlx5_1/1",counter="LinkDownedCounter"} 9',
        'nodecheck_ib_port_counter{node="node1",port="mlx5_2/1",counter="LinkDownedCounter"} 0',
        'nodecheck_ib_port_counter{node="node2",port="mlx5_0/1",counter="LinkDownedCounter"} 0',
        'nodecheck_ib_port_counter{node="node2",port="mlx5_0/1",counter="SymbolErrorCounter"} 0',
    ]  # PortXmitData: not kept
    samples = parse_textfile(text)  # HELP and TYPE once, no duplicate series
    assert (
        sample(samples, "nodecheck_ib_port_counter", node="node1", port="mlx5_0/1", counter="SymbolErrorCounter") == 50
    )
    # the families that were there before are all still there, under the same names
    assert {k[0] for k in samples} == {
        "nodecheck_check_status",
        "nodecheck_check_healthy",
        "nodecheck_node_status",
        "nodecheck_node_healthy",
        "nodecheck_nodes",
        "nodecheck_repeat_offender",
        "nodecheck_sweep_last_timestamp_seconds",
        "nodecheck_sweep_duration_seconds",
        "nodecheck_sweep_complete",
        "nodecheck_sweep_problems",
        "nodecheck_sweep_info",
        "nodecheck_nccl_busbw_bytes_per_second",
        "nodecheck_ib_write_bw_best_bytes_per_second",
        "nodecheck_ib_port_counter",
    }


def test_a_64_bit_counter_is_written_as_its_exact_integer_and_no_counters_no_family():
    snap = D.snapshot(current_report())
    big = [
        D.CounterRow("node1", "mlx5_0/1", name, v, "boot-1", "perfquery -x")
        for name, v in (("SymbolErrorCounter", 2**64 - 1), ("LinkDownedCounter", 2**53 + 1))
    ]
    lines = metrics.render(replace(snap, counters=tuple(big)), []).splitlines()
    assert lines[-2:] == [  # float(2**53 + 1) would print ...992; 2**64-1 1.8446744073709552e+19
        'nodecheck_ib_port_counter{node="node1",port="mlx5_0/1",counter="SymbolErrorCounter"} 18446744073709551615',
        'nodecheck_ib_port_counter{node="node1",port="mlx5_0/1",counter="LinkDownedCounter"} 9007199254740993',
    ]
    assert "nodecheck_ib_port_counter" not in metrics.render(replace(snap, counters=()), [])


def test_nvlink_counters_are_their_own_family_by_gpu():
    snap = D.snapshot(report("r", T1, ["node1"], [nvlink("node1", "GPU3", "b1", replay=2, crc_flit=5)]))
    samples = parse_textfile(metrics.render(snap, version="0.1.0"))
    assert sample(samples, metrics.NVLINK_COUNTER_METRIC, node="node1", gpu="GPU3", counter="crc_flit") == 5
    assert not any(name == metrics.COUNTER_METRIC for name, _ in samples)


def test_gpu_perf_figures_are_gauges_per_gpu_in_base_units():
    snap = D.snapshot(report("r", T1, ["node1"], []))
    figures = (
        D.Measurement("node1", "gpu.perf", "gemm_bf16", "GPU3", 712.5, "TFLOPS"),
        D.Measurement("node1", "gpu.perf", "hbm", "GPU3", 2500.0, "GB/s"),
        D.Measurement("node1", "gpu.perf", "nvlink", "GPU3", 390.0, "GB/s"),
    )
    samples = parse_textfile(metrics.render(replace(snap, measurements=figures), version="0.1.0"))
    assert sample(samples, metrics.GPU_GEMM_METRIC, node="node1", gpu="GPU3", dtype="bf16") == 712.5e12
    assert sample(samples, metrics.GPU_BW_METRIC, node="node1", gpu="GPU3", path="hbm") == 2500e9
    assert sample(samples, metrics.GPU_BW_METRIC, node="node1", gpu="GPU3", path="nvlink") == 390e9

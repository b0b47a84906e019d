"""A GPU figure against its node's own history: gpu.perf's figures are kept as measurements, and a sweep
warns on one below the node's median of its recent sweeps (history_warn_below_pct)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from nodecheck.config.playbook import load_playbook
from nodecheck.core.model import CheckResult, Status, Verdict
from nodecheck.fleet.history import History
from nodecheck.fleet.perf_history import with_history_warnings
from nodecheck.report import Report
from nodecheck.report.diff import Measurement, gpu_figures, snapshot

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
H100 = "NVIDIA H100 80GB HBM3"


def report(k: int, gemm: float, nvlink: tuple[float, float] = (395.0, 390.0)) -> Report:
    figures = [
        {"gpu": 0, "metric": "gemm_bf16", "subject": "GPU0", "value": gemm, "unit": "TFLOPS", "source": "probe"},
        {"gpu": 0, "metric": "nvlink", "subject": "GPU0->GPU1", "value": nvlink[0], "unit": "GB/s", "source": "x"},
        {"gpu": 0, "metric": "nvlink", "subject": "GPU0->GPU2", "value": nvlink[1], "unit": "GB/s", "source": "x"},
        {"gpu": 1, "metric": "hbm", "subject": "GPU1", "value": float("nan"), "unit": "GB/s", "source": "probe"},
    ]
    return Report(
        f"run{k}", "sweep", "sweep.yml", "0" * 64, "hosts.yml", T0 + timedelta(hours=k), T0 + timedelta(hours=k),
        600.0, True, (("n1", "n1"),), (CheckResult("gpu.perf", ("n1",), Verdict(Status.PASS, "8 GPUs: ...")),),
        extras={"gpu.perf": {"nodes": {"n1": {"gpus": {"0": H100, "1": H100}, "figures": figures}}}},
    )  # fmt: skip


def test_gpu_figures_are_kept_per_gpu_with_the_slowest_nvlink_pair_and_no_nan():
    assert gpu_figures(report(0, 700.0)) == (
        Measurement("n1", "gpu.perf", "gemm_bf16", "GPU0", 700.0, "TFLOPS"),
        Measurement("n1", "gpu.perf", "nvlink", "GPU0", 390.0, "GB/s"),
    )


def playbook(tmp_path, relative: str):
    path = tmp_path / "sweep.yml"
    path.write_text(f"version: 1\nchecks:\n  gpu.perf: {{relative: {relative}}}\n")
    return load_playbook(str(path))


def test_a_figure_below_the_nodes_recent_median_warns(tmp_path):
    book = playbook(tmp_path, "{fail_below_pct: 10, history_warn_below_pct: 7}")
    with History.open(tmp_path / "h.sqlite") as h:
        assert with_history_warnings(report(0, 640.0), book, h).results == report(0, 640.0).results  # no history
        for k, gemm in enumerate((700.0, 710.0, 690.0), start=1):
            h.record(snapshot(report(k, gemm)), None)
        fine = report(4, 680.0)
        assert with_history_warnings(fine, book, h) is fine
        slow = with_history_warnings(report(5, 630.0), book, h)
    [added] = slow.results[1:]
    assert (added.check, added.nodes, added.verdict.status, added.verdict.subject) == (
        "gpu.perf",
        ("n1",),
        Status.WARN,
        "GPU0",
    )
    assert added.verdict.message == (
        "GPU0: gemm_bf16 630 TFLOPS, 10.0% below this node's median of its last 3 sweeps (700 TFLOPS)"
    )


def test_without_a_history_band_nothing_is_read(tmp_path):
    book = playbook(tmp_path, "{fail_below_pct: 10}")
    with History.open(tmp_path / "h.sqlite") as h:
        for k in range(1, 4):
            h.record(snapshot(report(k, 700.0)), None)
        slow = report(4, 500.0)
        assert with_history_warnings(slow, book, h) is slow

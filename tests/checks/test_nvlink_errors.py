"""nvlink.errors on constructed before/after GPU facts: rising, steady, reset, unread."""

from __future__ import annotations

from dataclasses import replace

import pytest

from nodecheck.checks import nvlink_errors as E
from nodecheck.checks.gpu import GPU
from nodecheck.core.model import Status
from nodecheck.parsers.gpu import Gpu, GpuFacts, NvLink
from nodecheck.parsers.nvidia_smi_nvlink import parse_nvlink_errors
from tests.helpers import captures, data

ZERO = (("replay", 0), ("recovery", 0), ("crc_flit", 0), ("crc_data", 0))


def gpu_facts(
    counters: dict[tuple[int, int], dict] | None = None,
    *,
    uptime=1000.0,
    clock=None,
    boot="b1",
    n_gpus=2,
    n_links=4,
    unread=(),
):
    gpus = []
    for g in range(n_gpus):
        links = []
        for link in range(n_links):
            values = dict(ZERO) | (counters or {}).get((g, link), {})
            errors = None if (g, link) in unread else tuple(values.items())
            links.append(NvLink(link, True, 25.0, errors))
        gpus.append(Gpu(g, uuid=f"GPU-{g}", nvlinks=tuple(links)))
    return GpuFacts(
        "nvml", "550.90.07", "12.4", tuple(gpus), clock=clock or 1.7e9 + uptime, uptime_s=uptime, boot_id=boot
    )


@pytest.fixture
def run(monkeypatch):
    def run(before: GpuFacts, after: GpuFacts, **params):
        table = {"before": before, "after": after}
        monkeypatch.setattr(E, "parse_gpu_probe", lambda text: table[text])
        out = {**captures(GPU, "before"), **captures(E.GPU_AFTER, "after")}
        return list(E.errors(out, E.NvlinkErrors(**params)))

    return run


def test_the_after_probe_is_the_gpu_probe_under_its_own_name():
    assert E.GPU_AFTER.name == "gpu.after" and E.GPU_AFTER.argv == GPU.argv and E.GPU_AFTER.stdin == GPU.stdin


def test_steady_counters_pass_and_keep_the_second_read(run):
    old = gpu_facts({(0, 1): {"crc_flit": 7}})
    new = gpu_facts({(0, 1): {"crc_flit": 7}}, uptime=1600.0)
    got = run(old, new)
    assert [(v.status, v.message) for v in got] == [
        (Status.PASS, "GPU0: no NVLink error counter rose in 600.0 s on 4 links (NVML)"),
        (Status.PASS, "GPU1: no NVLink error counter rose in 600.0 s on 4 links (NVML)"),
    ]
    snap = got[0].observed["snapshot"]
    assert snap["counters"] == {"replay": 0, "recovery": 0, "crc_flit": 7, "crc_data": 0}
    assert snap["links"]["1"]["crc_flit"] == 7 and snap["boot_id"] == "b1"


def test_rising_counters_are_named_by_gpu_link_and_counter(run):
    new = gpu_facts({(1, 2): {"crc_flit": 120_000, "recovery": 1}}, uptime=1600.0)
    bad = [(v.status, v.message) for v in run(gpu_facts(), new) if v.status is not Status.PASS]
    assert bad == [
        (Status.FAIL, "GPU1 link 2: recovery +1 in 600 s, expected no increase (recovery errors (link retrains))"),
        (Status.FAIL, "GPU1 link 2: crc_flit +120000 in 600 s = 200/s, expected < 100/s (CRC flit errors)"),
    ]


def test_a_few_crc_errors_warn(run):
    new = gpu_facts({(0, 0): {"crc_data": 3}}, uptime=1600.0)
    bad = [(v.status, v.message) for v in run(gpu_facts(), new) if v.status is not Status.PASS]
    assert bad == [(Status.WARN, "GPU0 link 0: crc_data +3 in 600 s = 0.005/s, expected <= 0/h (CRC data errors)")]


def test_a_reboot_counts_from_zero_by_the_wall_clock_and_says_so(run):
    old = gpu_facts({(0, 0): {"replay": 500}})
    new = gpu_facts({(0, 0): {"replay": 2}}, uptime=100.0, clock=1.7e9 + 1900.0, boot="b2")
    got = [(v.status, v.message) for v in run(old, new) if v.subject == "GPU0"]
    assert got[0] == (
        Status.FAIL,
        "GPU0 link 0: replay +2 in 900 s (counters reset in between: at least), expected no increase "
        "(replay errors (data link retransmits))",
    )
    assert got[1][0] is Status.WARN and "(the node rebooted)" in got[1][1]


def test_no_read_time_is_an_error_not_a_rate(run):
    old, new = gpu_facts(), gpu_facts()
    new = GpuFacts(new.source, new.driver_version, new.cuda_driver_version, new.gpus)
    got = run(old, new)
    assert [v.status for v in got] == [Status.ERROR] and "window is unknown" in got[0].message


def test_a_gpu_reset_within_one_boot_is_a_reset_not_a_drop(run):
    old = gpu_facts({(0, 3): {"replay": 500}})
    new = gpu_facts({(0, 3): {"replay": 1}}, uptime=1600.0)
    got = [(v.status, v.message) for v in run(old, new) if v.subject == "GPU0"]
    assert (
        Status.FAIL,
        "GPU0 link 3: replay +1 in 600 s (counters reset in between: at least), expected no increase "
        "(replay errors (data link retransmits))",
    ) in got
    assert any(s is Status.WARN and "reset during the 600.0 s window on link 3" in m for s, m in got)


def test_unread_counters_are_not_zero(run):
    old = gpu_facts(unread=[(0, link) for link in range(4)])
    new = gpu_facts(unread=[(0, link) for link in range(4)], uptime=1600.0)
    got = [(v.status, v.message) for v in run(old, new) if v.subject == "GPU0"]
    assert got == [(Status.ERROR, "GPU0: NVLink error counters not read (NVML) on link 0, 1, 2, 3")]
    some = gpu_facts(unread=[(0, 2)], uptime=1600.0)
    got = [(v.status, v.message) for v in run(gpu_facts(), some) if v.subject == "GPU0"]
    assert (Status.WARN, "GPU0: NVLink error counters not read (NVML) on link 2") in got


def test_rates_only_for_rated_counters():
    with pytest.raises(ValueError):
        E.NvlinkErrors(rates={"replay": {"fail_per_hour": 1}})
    assert E.NvlinkErrors(rates={"crc_flit": {"fail_per_second": 10}}).rates["crc_flit"].per_hour("fail") == 36000


def recorded_gpu(path: str) -> Gpu:
    """GPU0 of a real `nvidia-smi nvlink -e` recording, as the GPU parser reads its counters."""
    per_link = parse_nvlink_errors(data(path))[0]
    return Gpu(0, uuid="GPU-0", nvlinks=tuple(NvLink(n, True, None, errors) for n, errors in sorted(per_link.items())))


@pytest.mark.parametrize(
    "path",
    [
        "nvidia-smi-nvlink/srt-slurm-pr307-gb300-nvlink-e-excerpt.txt",
        "nvidia-smi-nvlink/derived-ml-engineering-h100-nvlink-e-links-0-1-17.txt",
    ],
)
def test_recorded_nvidia_smi_counters_are_judged_without_gaps(run, path):
    gpu = recorded_gpu(path)
    old = GpuFacts("nvidia-smi", None, None, (gpu,), clock=1.7e9, uptime_s=1000.0, boot_id="b1")
    new = GpuFacts("nvidia-smi", None, None, (gpu,), clock=1.7e9 + 600, uptime_s=1600.0, boot_id="b1")
    got = run(old, new)
    n = len(gpu.nvlinks or ())
    assert [(v.status, v.message) for v in got] == [
        (Status.PASS, f"GPU0: no NVLink error counter rose in 600.0 s on {n} links (nvidia-smi)")
    ]
    risen = replace(
        gpu,
        nvlinks=tuple(
            replace(link, errors=(("replay", 4), ("recovery", 0), ("crc_flit", 0))) for link in gpu.nvlinks or ()
        ),
    )
    got = run(old, replace(new, gpus=(risen,)))
    assert [v.status for v in got if v.status is not Status.PASS] == [Status.FAIL] * n

"""mem on captures built from recorded /proc/meminfo and EDAC listings (the probe's sections)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from nodecheck.checks.mem import MemParams, mem
from nodecheck.core.errors import ParseError
from nodecheck.core.model import CheckResult, Status
from nodecheck.probes.memory import MEMORY
from nodecheck.report import Report, table
from tests.helpers import captures, data

PASS, WARN, FAIL, ERROR, SKIPPED = Status.PASS, Status.WARN, Status.FAIL, Status.ERROR, Status.SKIPPED
NOT_CHECKED = "ECC errors not checked (ecc: off where this platform has no EDAC driver)"
H100 = "meminfo/sichek-2tib-gpu-node-no-hugepages-no-swap.txt"
ONE_DIMM_LESS = "meminfo/derived-sichek-2tib-gpu-node-one-dimm-missing.txt"
HEALTHY_EDAC = "sysfs_edac/constructed-dgx-h100-i10nm-32-dimms-healthy.txt"
DAY = 86400


def section(name: str, text: str, rc: int = 0) -> str:
    return f"@@nodecheck begin {name}\n{text}@@nodecheck end {name} rc={rc}\n"


def walked(edac: str) -> str:
    """The line the probe prints after its EDAC walk: how many files it listed (one line each)."""
    return f"@@nodecheck edac-walked files={len(edac.splitlines())}\n"


def probe_out(meminfo: str, edac: str | None, uptime_s: float = 3 * DAY, meminfo_rc: int = 0, walk: str | None = None):
    text = section("meminfo", meminfo, meminfo_rc) + section("uptime", f"{uptime_s:.2f} 1.00\n")
    if edac is None:
        text += "@@nodecheck edac absent\n"
    else:
        text += section("edac", edac) + (walked(edac) if walk is None else walk)
    return captures(MEMORY, text)


def rows(verdicts):
    return [(v.status, v.subject, v.message) for v in verdicts]


# the h100-sxm-8 profile's values (DGX H100: 2 TiB in 32 DIMMs, no swap)
H100_PARAMS = MemParams(total_gib=2015, swap="off", dimms=32, ecc="required")


def test_a_healthy_dgx_h100():
    assert rows(mem(probe_out(data(H100), data(HEALTHY_EDAC)), H100_PARAMS)) == [
        (PASS, "MemTotal", "MemTotal 2015.5 GiB (2015 GiB ± 1.5%)"),
        (PASS, "MemAvailable", "MemAvailable 97.4 % (>= 10 %) (1962.5 of 2015.5 GiB)"),
        (PASS, "swap", "swap off (SwapTotal 0)"),
        (PASS, "DIMMs", "EDAC DIMMs 32"),
        (
            PASS,
            "ECC",
            "ECC: 8 memory controllers, 32 DIMMs/ranks: 0 uncorrectable, 0 corrected in 72.0 h "
            "(<= 10 per DIMM per day)",
        ),
    ]


def test_one_dimm_missing_fails_the_total():
    verdicts = list(mem(probe_out(data(ONE_DIMM_LESS), data(HEALTHY_EDAC)), H100_PARAMS))
    assert rows(verdicts)[0] == (
        FAIL,
        "MemTotal",
        "MemTotal 1951.5 GiB (-3.2%), expected 2015 GiB ± 1.5% (one DIMM of 32 is -3.1%, of 16 -6.25%)",
    )
    assert verdicts[0].observed["mem_total_kb"] == 2046304872


def test_the_total_as_a_floor_and_unjudged():
    floor = MemParams(total_floor_gib={"fail_below": 1990, "warn_below": 2000})
    assert rows(mem(probe_out(data(ONE_DIMM_LESS), None), floor))[0] == (
        FAIL,
        "MemTotal",
        "MemTotal 1951.5 GiB, expected >= 1990 GiB",
    )
    assert rows(mem(probe_out(data(H100), None), MemParams()))[0] == (
        PASS,
        "MemTotal",
        "MemTotal 2015.5 GiB (no expected total: not judged)",
    )


def test_an_uncorrectable_error_fails_naming_the_dimm():
    edac = data("sysfs_edac/constructed-dgx-h100-i10nm-ue-on-mc5-dimm2.txt")
    bad = [v for v in mem(probe_out(data(H100), edac), H100_PARAMS) if v.status is not PASS]
    assert rows(bad) == [
        (
            FAIL,
            "CPU_SrcID#1_MC#1_Chan#1_DIMM#0 (mc5/dimm2)",
            "1 uncorrectable memory error(s) on DIMM CPU_SrcID#1_MC#1_Chan#1_DIMM#0 (mc5/dimm2) of "
            "mc5 (Intel_10nm Socket#1 IMC#1), expected 0",
        )
    ]


def test_an_uncorrectable_error_without_a_dimm_names_the_controller():
    # CONSTRUCTED in the probe's format: a controller-level count no DIMM carries
    edac = "/sys/devices/system/edac/mc/mc0/ue_count\t0\n/sys/devices/system/edac/mc/mc1/ue_noinfo_count\t2\n"
    bad = [v for v in mem(probe_out(data(H100), edac), MemParams()) if v.status is not PASS]
    assert rows(bad) == [(FAIL, "mc1", "2 uncorrectable memory error(s) on mc1 (no DIMM named), expected 0")]


def test_corrected_errors_are_judged_as_a_rate_per_day():
    burst = data("sysfs_edac/constructed-dgx-h100-i10nm-ce-burst-480-on-mc2-dimm1.txt")
    bad = [v for v in mem(probe_out(data(H100), burst, uptime_s=10 * DAY), H100_PARAMS) if v.status is not PASS]
    # the counters were reset 3 days ago (seconds_since_reset 259200): the rate is over those 3 days
    assert rows(bad) == [
        (
            FAIL,
            "CPU_SrcID#0_MC#2_Chan#0_DIMM#1 (mc2/dimm1)",
            "CPU_SrcID#0_MC#2_Chan#0_DIMM#1 (mc2/dimm1): 480 corrected ECC errors in 72.0 h = 160 per day, "
            "expected <= 100 per day",
        )
    ]
    # DERIVED inline: the same DIMM with 40 corrected errors in the 3 days
    fewer = burst.replace("dimm1/dimm_ce_count\t480", "dimm1/dimm_ce_count\t40").replace(
        "ce_count\t480", "ce_count\t40"
    )
    bad = [v for v in mem(probe_out(data(H100), fewer), H100_PARAMS) if v.status is not PASS]
    assert [(v.status, v.observed) for v in bad] == [(WARN, {"ce_count": 40, "window_h": 72.0, "ce_per_day": 13.33})]


def test_a_few_corrected_errors_right_after_boot_count_as_a_day():
    # 9 corrected errors (2 on one DIMM) on the ThunderX2 of the ghes_edac thread, one hour after boot
    edac = data("sysfs_edac/lkml-2019-ghes-edac-thunderx2-nonzero-counters.txt")
    assert rows(mem(probe_out(data(H100), edac, uptime_s=3600), MemParams()))[-1] == (
        PASS,
        "ECC",
        "ECC: 2 memory controllers, 7 DIMMs/ranks: 0 uncorrectable, 9 corrected in 1.0 h (<= 10 per DIMM per day)",
    )


def test_ranks_are_counted_when_the_controller_cannot_name_dimms():
    edac = data("sysfs_edac/edac-utils-15-rank-dimm-ce-count-mc0-rank4-1.txt")
    verdicts = list(mem(probe_out(data(H100), edac), MemParams(dimms=16)))
    assert rows(verdicts)[-2:] == [
        (ERROR, "DIMMs", "EDAC lists no dimmN directories (ranks or csrows only): DIMMs not counted"),
        (
            PASS,
            "ECC",
            "ECC: 4 memory controllers, 16 DIMMs/ranks: 0 uncorrectable, 1 corrected in 72.0 h "
            "(<= 10 per DIMM per day)",
        ),
    ]


def test_a_dimm_edac_lists_without_memory_fails_the_dimm_count():
    # DERIVED inline: one DIMM of the healthy listing reports size 0 (slot empty)
    edac = data(HEALTHY_EDAC).replace("mc3/dimm1/size\t65536", "mc3/dimm1/size\t0")
    verdicts = [v for v in mem(probe_out(data(H100), edac), H100_PARAMS) if v.subject == "DIMMs"]
    assert rows(verdicts) == [(FAIL, "DIMMs", "EDAC DIMMs 31, expected 32")]
    assert "CPU_SrcID#0_MC#3_Chan#0_DIMM#1 (mc3/dimm1): 0 MB" in verdicts[0].excerpt


def test_no_edac_is_skipped_not_passed_and_warns_when_required():
    ecc = [v for v in mem(probe_out(data(H100), None), MemParams()) if v.subject == "ECC"]
    assert rows(ecc) == [(SKIPPED, "ECC", f"EDAC not loaded (no /sys/devices/system/edac/mc): {NOT_CHECKED}")]
    ecc = [v for v in mem(probe_out(data(H100), None), H100_PARAMS) if v.subject == "ECC"]
    assert rows(ecc) == [
        (
            WARN,
            "ECC",
            "EDAC not loaded (no /sys/devices/system/edac/mc): ECC errors not checked, expected EDAC (ecc: required)",
        )
    ]
    assert not [v for v in mem(probe_out(data(H100), None), MemParams(ecc="off")) if v.subject == "ECC"]


def test_edac_without_controllers_and_unreadable_counters():
    empty = [v for v in mem(probe_out(data(H100), ""), MemParams()) if v.subject == "ECC"]
    assert rows(empty) == [
        (
            SKIPPED,
            "ECC",
            f"EDAC loaded but no memory controller registered (no EDAC driver for this platform): {NOT_CHECKED}",
        )
    ]
    unreadable = "/sys/devices/system/edac/mc/mc0/ue_count\t!unreadable\n"
    ecc = [v for v in mem(probe_out(data(H100), unreadable), MemParams()) if v.subject == "ECC"]
    assert (ecc[0].status, ecc[0].message) == (
        ERROR,
        "EDAC files not read: /sys/devices/system/edac/mc/mc0/ue_count (unreadable)",
    )


def test_a_garbled_edac_listing_is_an_error_beside_the_memory_verdicts():
    verdicts = list(mem(probe_out(data(H100), "nonsense\n"), MemParams()))
    assert verdicts[-1].status is ERROR and verdicts[-1].message.startswith("cannot read EDAC sysfs output")
    assert verdicts[0].subject == "MemTotal"


def test_swap_as_expected():
    swapping = data("meminfo/htop-447-593gb-swap-500gb-truncated.txt")
    assert next(v for v in mem(probe_out(swapping, None), MemParams(swap=False)) if v.subject == "swap").message == (
        "swap on: 476.9 GiB, 0 GiB used, expected swap off"
    )
    assert [v.status for v in mem(probe_out(swapping, None), MemParams(swap=True)) if v.subject == "swap"] == [PASS]
    assert [v.status for v in mem(probe_out(data(H100), None), MemParams(swap="on")) if v.subject == "swap"] == [FAIL]
    used = data("meminfo/node-exporter-fixture-3.6gib-swap-in-use.txt")
    assert [v.message for v in mem(probe_out(used, None), MemParams()) if v.subject == "swap"] == [
        "swap on: 4 GiB, 1 GiB used (not judged)"
    ]


def test_available_memory_floor():
    low = data("meminfo/htop-447-593gb-swap-500gb-truncated.txt")
    assert next(v for v in mem(probe_out(low, None), MemParams()) if v.subject == "MemAvailable").message == (
        "MemAvailable 5.8 %, expected >= 10 % (32.7 of 565.6 GiB)"
    )
    in_gib = MemParams(available_pct=None, available_gib={"fail_below": 64})
    assert rows(v for v in mem(probe_out(low, None), in_gib) if v.subject == "MemAvailable") == [
        (FAIL, "MemAvailable", "MemAvailable 32.7 GiB, expected >= 64 GiB")
    ]
    old = data("meminfo/procfs-fixture-15gib-zswap-no-swap.txt")
    assert next(v for v in mem(probe_out(old, None), MemParams()) if v.subject == "MemAvailable").message == (
        "MemAvailable 86 % (>= 10 %) (12.8 of 14.9 GiB, estimated as MemFree+Buffers+Cached "
        "(no MemAvailable before Linux 3.14))"
    )


def test_hugepages_as_configured():
    verdicts = mem(probe_out(data(H100), None), MemParams(hugepages_total=1024, hugepage_size_kb=2048))
    assert rows(v for v in verdicts if v.subject.startswith("Huge")) == [
        (FAIL, "HugePages_Total", "HugePages_Total 0 pages, expected 1024 pages"),
        (PASS, "Hugepagesize", "Hugepagesize 2048 kB"),
    ]
    # DERIVED inline: the 2 TiB node with a 1024-page pool, 1000 of them in use
    pooled = (
        data(H100)
        .replace("HugePages_Total:       0", "HugePages_Total:    1024")
        .replace("HugePages_Free:        0", "HugePages_Free:       24")
        .replace("Hugetlb:               0 kB", "Hugetlb:         2097152 kB")
    )
    verdicts = list(mem(probe_out(pooled, None), MemParams(hugepages_total=1024, hugepages_free={"fail_below": 512})))
    assert rows(v for v in verdicts if v.subject.startswith("Huge")) == [
        (PASS, "HugePages_Total", "HugePages_Total 1024 pages"),
        (FAIL, "HugePages_Free", "HugePages_Free 24 pages, expected >= 512 pages"),
    ]
    available = next(v for v in verdicts if v.subject == "MemAvailable")
    assert available.message.endswith("(1962.5 of 2013.5 GiB outside the 2 GiB hugepage pool)")
    absent = data("meminfo/htop-447-593gb-swap-500gb-truncated.txt")
    assert rows(v for v in mem(probe_out(absent, None), MemParams(hugepages_total=0)) if v.status is ERROR) == [
        (ERROR, "HugePages_Total", "no HugePages_Total in /proc/meminfo (no hugetlbfs in this kernel)")
    ]


def test_poisoned_pages_warn():
    poisoned = data(H100).replace("HardwareCorrupted:     0 kB", "HardwareCorrupted:     4 kB")
    assert rows(v for v in mem(probe_out(poisoned, None), MemParams()) if v.status is WARN) == [
        (WARN, "HardwareCorrupted", "HardwareCorrupted 4 kB: pages poisoned by memory errors, expected 0")
    ]


def test_an_unreadable_meminfo_is_a_parse_error():
    with pytest.raises(ParseError, match="exited 1"):
        list(mem(probe_out("head: cannot open '/proc/meminfo'\n", None, meminfo_rc=1), MemParams()))


@pytest.mark.parametrize(
    "params",
    [{"total_tolerance_pct": 60}, {"swap": "maybe"}, {"ecc": "always"}, {"dimms": 0}, {"total_gib": float("nan")}],
)
def test_bad_params_are_refused(params):
    with pytest.raises(ValidationError):
        MemParams(**params)


def test_yaml_words_on_and_off():
    assert (MemParams(swap=False).swap, MemParams(swap=True).swap, MemParams(ecc=False).ecc) == ("off", "on", "off")


def test_a_node_whose_ecc_was_not_checked_does_not_read_as_all_passed():
    verdicts = mem(probe_out(data(H100), None), MemParams())
    results = tuple(CheckResult("mem", ("n1",), v) for v in verdicts)
    t0 = datetime(2026, 12, 7, tzinfo=timezone.utc)
    report = Report("id", "p", "p", "", None, t0, t0, 1.0, True, (("n1", "n1"),), results)
    text = table.render(report)
    assert "of 4 pass" not in text and report.node_status("n1") is SKIPPED
    assert "n1       skipped   mem      EDAC not loaded (no /sys/devices/system/edac/mc): ECC errors not" in text
    assert "1 node: 1 skipped. Status SKIPPED (exit 3)." in text


# -- issue 32, 3.1: an EDAC listing that is not whole is an ERROR, never a PASS ---------------------


def test_an_edac_listing_cut_short_is_an_error_not_a_pass():
    # the healthy 32-DIMM listing cut after mc3: the probe walked 184 files, 95 arrived
    whole = data(HEALTHY_EDAC)
    cut = "".join(whole.splitlines(keepends=True)[:95])
    ecc = [v for v in mem(probe_out(data(H100), cut, walk=walked(whole)), MemParams()) if v.subject == "ECC"]
    assert rows(ecc) == [
        (ERROR, "ECC", "EDAC listing incomplete: the probe listed 184 files, 95 arrived: ECC errors not judged")
    ]


def test_an_edac_listing_without_its_end_of_walk_line_is_an_error():
    ecc = [v for v in mem(probe_out(data(H100), data(HEALTHY_EDAC), walk=""), MemParams()) if v.subject == "ECC"]
    assert rows(ecc) == [
        (
            ERROR,
            "ECC",
            "EDAC listing without the probe's end-of-walk line: not known to be whole; ECC errors not judged",
        )
    ]


# -- issue 32, 3.2: a number no counter holds is a clear ERROR, not an internal error ---------------


def test_a_400_digit_meminfo_value_is_a_parse_error_not_an_overflow():
    huge = data(H100).replace("2113413736", "9" * 400, 1)
    with pytest.raises(ParseError, match=r"MemTotal: .* is not a count \(at most 2\^64-1\)"):
        list(mem(probe_out(huge, None), MemParams()))


def test_a_400_digit_edac_counter_is_an_error_beside_the_memory_verdicts():
    huge = data(HEALTHY_EDAC).replace("mc2/dimm1/dimm_ce_count\t0", "mc2/dimm1/dimm_ce_count\t" + "9" * 400)
    verdicts = list(mem(probe_out(data(H100), huge), MemParams()))
    assert verdicts[0].subject == "MemTotal"
    assert (verdicts[-1].status, verdicts[-1].subject) == (ERROR, "ECC")
    assert "is not a count (at most 2^64-1)" in verdicts[-1].message

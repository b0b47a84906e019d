"""pcie.aer: AER counters of the GPUs, HCAs and their bridges, read before and after the run."""

from __future__ import annotations

from nodecheck.checks.pcie import PcieAer, aer
from nodecheck.core.model import Status
from nodecheck.probes.pcie import AER_AFTER, AER_BEFORE
from tests.helpers import captures, data

ZERO = {
    k: data(f"sysfs_aer/procfs-fixture-0000-01-00-0-aer_dev_{k}-zero.txt") for k in ("correctable", "nonfatal", "fatal")
}
COUNTS = {
    k: data(f"sysfs_aer/procfs-fixture-0000-00-1f-6-aer_dev_{k}-counts.txt")
    for k in ("correctable", "nonfatal", "fatal")
}


def read(files: dict[str, dict[str, str]], paths=("GPU 0000:04:00.0 0000:00:02.0",), uptime=7200.0, boot="b1") -> str:
    """What the AER probe prints: uptime, boot id, each device's files, then each target's path."""
    out = [f"@@nodecheck uptime {uptime}", f"@@nodecheck boot_id {boot}"]
    for device, kinds in files.items():
        for kind, text in kinds.items():
            out += [
                f"@@nodecheck begin aer:{device}:{kind}",
                text.rstrip("\n"),
                f"@@nodecheck end aer:{device}:{kind} rc=0",
            ]
    out += [f"@@nodecheck path {p}" for p in paths]
    return "\n".join(out) + "\n"


def judge(before: str, after: str, **params) -> list:
    out = {**captures(AER_BEFORE, before), **captures(AER_AFTER, after)}
    return list(aer(out, PcieAer(**params)))


def test_zero_counters_pass_for_the_gpu_and_its_root_port():
    clean = read({"0000:04:00.0": ZERO, "0000:00:02.0": ZERO})
    [v] = judge(clean, clean)
    assert (
        v.status is Status.PASS and v.message == "no AER errors on 2 device(s) (GPUs/HCAs and the bridges above them)"
    )


def test_fatal_fails_nonfatal_warns_and_a_rising_correctable_count_warns_naming_the_bridge():
    before = read({"0000:04:00.0": ZERO, "0000:00:02.0": ZERO})
    after = read({"0000:04:00.0": ZERO, "0000:00:02.0": COUNTS})
    verdicts = judge(before, after)
    by_status = {(v.status, v.message.split(": ")[1].split(" ")[1]) for v in verdicts}
    assert by_status == {(Status.FAIL, "fatal"), (Status.WARN, "nonfatal"), (Status.WARN, "AER")}
    fatal = next(v for v in verdicts if v.status is Status.FAIL)
    assert fatal.subject == "0000:00:02.0"
    assert fatal.message.startswith(
        "bridge 0000:00:02.0 above GPU 0000:04:00.0: 28 fatal AER error(s) since boot (Undefined 10"
    )
    rose = next(v for v in verdicts if "rose" in v.message)
    assert "correctable AER errors rose by 9 during the run (0 -> 9: RxErr 1" in rose.message


def test_a_reboot_between_the_reads_does_not_count_as_a_rise_but_a_rate_since_boot_can_warn():
    before = read({"0000:04:00.0": ZERO}, boot="b1")
    after = read({"0000:04:00.0": {"correctable": COUNTS["correctable"]}}, boot="b2", uptime=1800.0)
    [v] = judge(before, after, correctable_per_hour=10)
    assert v.status is Status.WARN and v.message == (
        "GPU 0000:04:00.0: 9 correctable AER errors in 0.5 h since boot (18.0/h), expected <= 10/h"
    )


def test_devices_without_aer_files_are_said_not_judged():
    clean = read({"0000:04:00.0": ZERO})
    [v] = judge(clean, clean)
    assert v.status is Status.PASS and v.message.endswith("; not judged (no AER files): 0000:00:02.0")
    bare = read({})
    [s] = judge(bare, bare)
    assert s.status is Status.SKIPPED and "no AER counters on any of 2 device(s)" in s.message


def test_no_gpu_or_hca_in_sysfs_is_an_error():
    empty = read({}, paths=())
    [v] = judge(empty, empty)
    assert v.status is Status.ERROR and v.message == "no GPU or HCA in /sys/bus/pci/devices: no AER counters to judge"

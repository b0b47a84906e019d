import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.cpu_sysfs import Throttle, parse_cpu_sysfs
from tests.helpers import data, data_files


def test_every_recording_is_read():
    assert data_files("sysfs_cpu") == [
        "sysfs_cpu/buildhost-kvm-2cpu-no-cpufreq-smt-notsupported.txt",
        "sysfs_cpu/derived-node-exporter-fixture-4cpu-powersave-throttled.txt",
    ]


def test_a_vm_without_cpufreq_or_throttle_counters():
    got = parse_cpu_sysfs(data("sysfs_cpu/buildhost-kvm-2cpu-no-cpufreq-smt-notsupported.txt"))
    assert (got.online, got.offline) == (frozenset({0, 1}), frozenset())
    assert (got.smt_active, got.smt_control) == (False, "notsupported")
    assert got.governors == {} and got.throttle == ()


def test_governors_and_throttle_counters():
    got = parse_cpu_sysfs(data("sysfs_cpu/derived-node-exporter-fixture-4cpu-powersave-throttled.txt"))
    assert got.online == frozenset(range(4))
    assert got.smt_active is None and got.smt_control is None
    assert got.governor_counts() == {"powersave": 4}
    assert got.throttle == (Throttle(0, 5, 30), Throttle(1, 0, 30), Throttle(2, 0, 6), Throttle(3, 9, 6))


def test_unreadable_files_are_listed():
    got = parse_cpu_sysfs("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor\t!unreadable\n")
    assert got.governors == {}
    assert got.unreadable == (("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "unreadable"),)


@pytest.mark.parametrize(
    "text",
    [
        "/etc/passwd\troot\n",
        "/sys/devices/system/cpu/smt/active\t2\n",
        "/sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count\tlots\n",
        "/sys/devices/system/cpu/online\t0-\n",
        "no tab\n",
        # issue 32, 3.2: no counter or CPU number has this many digits
        "/sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count\t" + "9" * 400 + "\n",
        "/sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count\t" + "9" * 5000 + "\n",
        "/sys/devices/system/cpu/cpu" + "9" * 5000 + "/cpufreq/scaling_governor\tperformance\n",
        "/sys/devices/system/cpu/online\t" + "9" * 5000 + "\n",
    ],
)
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_cpu_sysfs(text)

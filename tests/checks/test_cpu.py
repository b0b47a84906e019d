"""cpu on captures built from recorded lscpu outputs and CPU sysfs listings (the probe's sections)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nodecheck.checks.cpu import CpuParams, cpu
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status
from nodecheck.probes.cpu import CPU
from tests.helpers import captures, data, data_files

PASS, WARN, FAIL, ERROR = Status.PASS, Status.WARN, Status.FAIL, Status.ERROR
SPR = "lscpu/hf-blog-sapphire-rapids-8480plus-2s-56c-smt-224cpu.txt"
VM_SYSFS = "sysfs_cpu/buildhost-kvm-2cpu-no-cpufreq-smt-notsupported.txt"
THROTTLED = "sysfs_cpu/derived-node-exporter-fixture-4cpu-powersave-throttled.txt"
# the h100-sxm-8 profile's values: 2x Xeon 8480C, 56 cores each, SMT on
H100_PARAMS = CpuParams(cpus=224, sockets=2, cores_per_socket=56, threads_per_core=2, smt="on")


def section(name: str, text: str, rc: int = 0) -> str:
    return f"@@nodecheck begin {name}\n{text}@@nodecheck end {name} rc={rc}\n"


def probe_out(lscpu: str | None, sysfs: str, uptime_s: float = 7200, lscpu_rc: int = 0):
    text = section("uptime", f"{uptime_s:.2f} 1.00\n")
    text += section("lscpu", lscpu, lscpu_rc) if lscpu is not None else "@@nodecheck lscpu missing\n"
    return captures(CPU, text + section("cpu-sysfs", sysfs))


def rows(verdicts):
    return [(v.status, v.subject, v.message) for v in verdicts]


def test_a_healthy_dgx_h100_class_node_on_a_vm_sysfs():
    # the simulated nodes: lscpu replays the 2-socket server, sysfs is a VM's (no cpufreq, no throttle counters)
    assert rows(cpu(probe_out(data(SPR), data(VM_SYSFS)), H100_PARAMS)) == [
        (PASS, "CPUs", "224 CPUs online (lscpu)"),
        (PASS, "Socket(s)", "Socket(s) 2"),
        (PASS, "Core(s) per socket", "Core(s) per socket 56"),
        (PASS, "Thread(s) per core", "Thread(s) per core 2"),
        (PASS, "SMT", "SMT on (lscpu: 2 threads per core)"),
        (
            PASS,
            "governor",
            "no cpufreq scaling_governor in sysfs (frequency set by firmware, or a VM): governor not judged",
        ),
        (PASS, "thermal throttle", "no thermal_throttle counters in sysfs (AMD, ARM or a VM): throttling not judged"),
    ]


def test_nothing_asked_reports_the_topology():
    assert rows(cpu(probe_out(data(SPR), data(VM_SYSFS)), CpuParams()))[:2] == [
        (PASS, "CPUs", "224 CPUs online, none offline (no expected count) (lscpu)"),
        (PASS, "topology", "2 sockets x 56 cores x 2 threads (SMT on), Intel(R) Xeon(R) Platinum 8480+ (not judged)"),
    ]


def test_an_offline_cpu_fails():
    offline = data("lscpu/derived-hf-blog-8480plus-cpu112-offline.txt")
    assert rows(cpu(probe_out(offline, data(VM_SYSFS)), H100_PARAMS))[0] == (
        FAIL,
        "CPUs",
        "223 CPUs online, expected 224; offline: 112 (lscpu)",
    )
    assert rows(cpu(probe_out(offline, data(VM_SYSFS)), CpuParams()))[0] == (
        FAIL,
        "CPUs",
        "1 CPU offline: 112, expected none (223 online, lscpu)",
    )


def test_siblings_offline_with_smt_turned_off_are_said_not_failed():
    # CONSTRUCTED sysfs of a node booted with nosmt (smt/control off): the siblings are offline
    sysfs = (
        "/sys/devices/system/cpu/online\t0-111\n/sys/devices/system/cpu/offline\t112-223\n"
        "/sys/devices/system/cpu/smt/active\t0\n/sys/devices/system/cpu/smt/control\toff\n"
    )
    verdicts = rows(cpu(probe_out(None, sysfs), CpuParams()))
    assert verdicts[0] == (
        PASS,
        "CPUs",
        "112 CPUs online; 112 offline are SMT siblings (smt/control off) (no expected count: not compared) "
        "(sysfs: no lscpu on the node)",
    )
    assert rows(cpu(probe_out(None, sysfs), CpuParams(smt="on")))[0][0] is FAIL
    assert rows(v for v in cpu(probe_out(None, sysfs), CpuParams(smt="on")) if v.subject == "SMT") == [
        (FAIL, "SMT", "SMT off (smt/control off), expected on")
    ]


def test_smt_mismatch_fails():
    smt_off = data("lscpu/inxi-136-epyc-7281-2s-16c-smt-off-flat-layout-truncated.txt")
    assert rows(v for v in cpu(probe_out(smt_off, data(VM_SYSFS)), CpuParams(smt=True)) if v.subject == "SMT") == [
        (FAIL, "SMT", "SMT off (lscpu: 1 threads per core), expected on")
    ]
    assert [
        v.status for v in cpu(probe_out(data(SPR), data(VM_SYSFS)), CpuParams(smt=False)) if v.subject == "SMT"
    ] == [FAIL]


def test_topology_mismatch_and_unknown_sockets():
    epyc = data("lscpu/inxi-136-epyc-7281-2s-16c-smt-off-flat-layout-truncated.txt")
    assert rows(v for v in cpu(probe_out(epyc, data(VM_SYSFS)), H100_PARAMS) if v.subject.endswith("per socket")) == [
        (FAIL, "Core(s) per socket", "Core(s) per socket 16, expected 56")
    ]
    container = data("lscpu/warp-ik-gh200-container-socket-dash-core-per-cluster.txt")
    assert rows(v for v in cpu(probe_out(container, data(VM_SYSFS)), CpuParams(sockets=1)) if v.status is ERROR) == [
        (ERROR, "Socket(s)", "Socket(s) not known (lscpu prints Socket(s): -), expected 1")
    ]


def test_governor_powersave_fails_and_throttling_is_a_rate():
    verdicts = list(cpu(probe_out(data(SPR), data(THROTTLED)), CpuParams(governor="performance")))
    assert rows(v for v in verdicts if v.status is not PASS) == [
        (
            FAIL,
            "governor",
            "scaling_governor powersave on 4 of 4 CPUs, expected performance on all (not: CPU 0-3)",
        ),
        (
            WARN,
            "CPU3",
            "CPU3: 9 core thermal throttle events in 2.0 h = 4.5 per hour, expected <= 1 per hour "
            "(CPUs with events: 0,3)",
        ),
        (
            FAIL,
            "CPU0",
            "CPU0: 30 package thermal throttle events in 2.0 h = 15 per hour, expected <= 12 per hour "
            "(CPUs with events: 0-3)",
        ),
    ]


def test_old_throttle_counts_over_a_long_uptime_pass():
    verdicts = list(cpu(probe_out(data(SPR), data(THROTTLED), uptime_s=30 * 86400), CpuParams()))
    assert rows(v for v in verdicts if v.subject == "thermal throttle") == [
        (
            PASS,
            "thermal throttle",
            "thermal throttling within 1 per hour on 4 CPUs (worst CPU3: 9 core thermal throttle events in 720.0 h, "
            "CPU0: 30 package thermal throttle events in 720.0 h)",
        )
    ]


def test_a_governor_asked_of_a_node_without_cpufreq_warns():
    verdicts = cpu(probe_out(data(SPR), data(VM_SYSFS)), CpuParams(governor="performance"))
    assert [(v.status, v.subject) for v in verdicts if v.status is not PASS] == [(WARN, "governor")]


def test_a_failing_lscpu_is_a_parse_error():
    with pytest.raises(ParseError, match="exited 1"):
        list(
            cpu(
                probe_out("lscpu: cannot open /proc/cpuinfo: No such file or directory\n", data(VM_SYSFS), lscpu_rc=1),
                CpuParams(),
            )
        )


@pytest.mark.parametrize("params", [{"cpus": 0}, {"governor": "performance; rm -rf /"}, {"smt": "sometimes"}])
def test_bad_params_are_refused(params):
    with pytest.raises(ValidationError):
        CpuParams(**params)


# -- issue 32, 3.1: lscpu's own numbers must add up; a hole in them is an ERROR, never a PASS -------

METEOR_LAKE = "lscpu/util-linux-tests-meteor-lake-ultra9-185h-hybrid-2t-16c-22cpu.txt"
ARM_4_TYPES = "lscpu/util-linux-tests-arm-a510-a710-a715-x3-hybrid-4-types.txt"


def test_an_online_list_short_of_cpus_without_an_offline_line_is_an_error():
    # DERIVED inline: the healthy 224-CPU lscpu whose Off-line line was lost (CPU 223 neither online nor offline)
    lost = data(SPR).replace("On-line CPU(s) list:   0-223", "On-line CPU(s) list:   0-222")
    assert rows(cpu(probe_out(lost, data(VM_SYSFS)), CpuParams()))[0] == (
        ERROR,
        "CPUs",
        "lscpu says CPU(s) 224, but lists 223 online and 0 offline (CPU 223 in neither): its output is incomplete",
    )


def test_no_online_list_is_an_error():
    lost = data(SPR).replace("  On-line CPU(s) list:   0-223\n", "")
    assert rows(cpu(probe_out(lost, data(VM_SYSFS)), CpuParams(cpus=224)))[0] == (
        ERROR,
        "CPUs",
        "lscpu printed no On-line CPU(s) list: online CPUs not known",
    )


def test_an_lscpu_cut_before_its_topology_is_an_error_not_question_marks():
    # DERIVED inline: the first six lines of the 224-CPU lscpu, as a crash after them would leave
    cut = "".join(data(SPR).splitlines(keepends=True)[:6])
    verdicts = rows(cpu(probe_out(cut, data(VM_SYSFS)), CpuParams()))
    assert verdicts[1] == (
        ERROR,
        "topology",
        "lscpu printed no Thread(s) per core, Core(s) per socket or Socket(s) line: the topology is not known",
    )
    assert not [v for v in verdicts if "?" in v[2]]


def test_a_block_missing_its_socket_line_is_an_error():
    lost = data(SPR).replace("    Socket(s):           2\n", "")
    assert [v for v in rows(cpu(probe_out(lost, data(VM_SYSFS)), CpuParams())) if v[1] == "topology"] == [
        (
            ERROR,
            "topology",
            "lscpu's Intel(R) Xeon(R) Platinum 8480+ block has no Socket(s) line: the topology is not known",
        )
    ]


def test_a_topology_that_cannot_make_the_cpus_is_an_error():
    garbled = data(SPR).replace("Core(s) per socket:  56", "Core(s) per socket:  5")
    assert [v for v in rows(cpu(probe_out(garbled, data(VM_SYSFS)), H100_PARAMS)) if v[0] is not PASS] == [
        (
            ERROR,
            "topology",
            "lscpu's topology, 2 sockets x 5 cores x 2 threads, cannot hold its 224 online CPUs: its output is garbled",
        )
    ]
    too_many = data(SPR).replace("Socket(s):           2", "Socket(s):           8")
    assert [v.status for v in cpu(probe_out(too_many, data(VM_SYSFS)), CpuParams()) if v.subject == "topology"] == [
        ERROR
    ]


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        # an Intel hybrid: 2 threads per core is the P cores'; 16 cores x 2 is more than its 22 CPUs
        (METEOR_LAKE, "1 sockets x 16 cores x 2 threads (SMT on), Intel(R) Core(TM) Ultra 9 185H (not judged)"),
        # ARM big.LITTLE: four blocks of 3 + 2 + 2 + 1 cores; the first block alone is 3 of the 8
        (ARM_4_TYPES, "1 sockets x 3 cores x 1 threads (SMT off), Cortex-A510 (not judged)"),
    ],
)
def test_hybrid_cpus_are_not_refused(path, shape):
    verdicts = rows(cpu(probe_out(data(path), data(VM_SYSFS)), CpuParams()))
    assert [v for v in verdicts if v[0] is not PASS] == []
    assert (PASS, "topology", shape) in verdicts


@pytest.mark.parametrize("path", data_files("lscpu"))
def test_every_recording_adds_up(path):
    verdicts = list(cpu(probe_out(data(path), data(VM_SYSFS)), CpuParams()))
    assert [v.message for v in verdicts if v.status is ERROR] == []

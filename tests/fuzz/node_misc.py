"""Fuzz targets of the node-level parsers (issue 32, section 3): misc.

Every public reader in nodecheck/parsers/ that no other slice owns: the kernel's and the driver's
files (aer, cmdline, modules, nvidia_driver, nvidia_libraries, sxid, uptime), the node tools (fstab,
systemctl, nvbandwidth, gpu_bench, nvlink_fabric, nvidia-smi's `nvlink -e` and query CSV), the
active checks' step lines (pairtest, reachability, tools), Slurm's squeue / reservation / sbatch
answers and the NHC configuration import. Seeds: the tool's corpus files under tests/data
(tests/data/SOURCES.md), or, where a tool has no recording, the lines its probe prints as its parser
tests construct them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from nodecheck.parsers import (
    aer,
    cmdline,
    fstab,
    gatelog,
    gpu_bench,
    modules,
    nhc_conf,
    nvbandwidth,
    nvidia_driver,
    nvidia_libraries,
    nvidia_smi_csv,
    nvidia_smi_nvlink,
    nvlink_fabric,
    pairtest,
    reachability,
    slurm,
    sxid,
    systemctl,
    tools,
    uptime,
)
from tests.fuzz.targets import Target
from tests.helpers import data

OWNER = "misc"
_NOW = datetime(2025, 2, 23, 16, 31, tzinfo=timezone.utc)


# -- seeds for the lines nodecheck's own steps print (no recording: what the probes print) ----------

TOOLS_STEP = (
    "@@nodecheck have all_reduce_perf /opt/nccl-tests/build/all_reduce_perf\n"
    "@@nodecheck missing mpirun\n@@nodecheck have srun /usr/bin/srun\n",
)
PROCESS_LIST = ("42\tsame\t0\tslurmd\n43\tother\t0\tslurmd\n44\tunknown\t?\tmunged\n412\tsame\t0\tnv-fabricmanage\n",)
UPTIME = ("18481.75 19829.75\n", "350735.47 234388.90", "12\n")
CLOCK = ("1764662400.250000000\n18481.75 19829.75\n2f4e9a1c-7b3d-4e8a-9c51-0d6e2f8a1b01\n",)
RESERVATION = (
    "ReservationName=maint StartTime=2026-12-06T12:00:00 Nodes=node[1-3,7] NodeCnt=4 Flags=MAINT,IGNORE_JOBS\n",
)
SBATCH = ("4242\n", "4242;cluster1\n")
# the gate log's lines as nodecheck.gate.command.GateLog writes them (tests/remedy/test_memory.py)
GATE_LOG = (
    '2026-12-07T21:00:00Z nodecheck[prolog] action=drain node=node2 job=41 check="gpu.xid" '
    'reason="nodecheck[ab12]: gpu.xid Xid 48 on PCI:0000:3b:00" evidence="reports/x/report.json"\n'
    '2026-12-07T21:05:00Z nodecheck[health] action=resume node=node2 reason="" message="re-proven"\n'
    '2026-12-07T21:06:00Z nodecheck[sweep] action=breaker node=- message="5 of 8 nodes failed"\n',
)


def _from(module: str, name: str) -> Callable[[], tuple[str, ...]]:
    """A parser test's constructed output, imported when the seeds are first read."""

    def seeds() -> tuple[str, ...]:
        from importlib import import_module

        value = getattr(import_module(module), name)
        return (value,) if isinstance(value, str) else tuple(value)

    return seeds


def _fabric_seeds() -> tuple[str, ...]:
    from tests.parsers.test_nvlink_fabric import probe_output

    return (
        probe_output(
            lspci=data("lspci-nvswitch/nvidia-fm-guide-hgx-h100-4-nvswitches.txt"),
            imex="/dev/nvidia-caps-imex-channels/channel0",
        ),
        probe_output(systemd=False, procs=PROCESS_LIST[0]),
    )


def _const(*texts: str) -> Callable[[], tuple[str, ...]]:
    return lambda: texts


def _steps(*names: str) -> Callable[[], tuple[str, ...]]:
    """The step lines tests/parsers/test_step_lines.py constructs (what the probes print)."""

    def seeds() -> tuple[str, ...]:
        return tuple(s for name in names for s in _from("tests.parsers.test_step_lines", name)())

    return seeds


# -- wrappers: the calls the checks make ------------------------------------------------------------


def _aer(text: str):
    # pcie.aer reads one file of each kind; the same text is tried as each
    return [aer.parse_aer(text, kind) for kind in aer.KINDS]


def _nvbandwidth(text: str):
    # what gpu.perf's judge reads of a run (judging/gpu_perf_rules.py)
    run = nvbandwidth.parse_nvbandwidth(text)
    return (
        nvbandwidth.host_to_device(run),
        nvbandwidth.device_to_host(run),
        [nvbandwidth.device_to_device(run, name) for name in nvbandwidth.D2D_TESTS],
    )


def _sxids(text: str):
    return sxid.parse_sxids(text, now=_NOW, uptime_s=3600.0, utc_offset_s=3600)


def _file_versions(text: str):
    return [nvidia_libraries.file_version(word) for word in text.split()]


def _node_clock(text: str):
    # the probe's clock, uptime and boot id lines; a part the text lacks is not read (None)
    lines: list[str | None] = [*text.split("\n"), None, None, None]
    return uptime.node_clock(lines[0], lines[1], lines[2])


def _start_state(text: str):
    return [pairtest.start_state(text, device) for device in ("mlx5_0", "mlx5_1", "mlx5_2")]


def _squeue(text: str):
    return slurm.parse_squeue_job(text, text.split("\x1f", 1)[0].strip()[:20] or "1")


SQUEUE = ("slurm-job/*squeue-O*",)
TARGETS: tuple[Target, ...] = (
    Target("aer.parse_aer", _aer, ("sysfs_aer/*",), OWNER),
    Target("cmdline.parse_cmdline", cmdline.parse_cmdline, ("proc-cmdline/*",), OWNER),
    Target("fstab.parse_fstab", fstab.parse_fstab, ("fstab/*",), OWNER),
    Target("gatelog.parse_gate_log", gatelog.parse_gate_log, (), OWNER, _const(*GATE_LOG)),
    Target("gatelog.parse_gate_log_line", gatelog.parse_gate_log_line, (), OWNER, _const(*GATE_LOG)),
    Target("gpu_bench.parse_gpu_bench", gpu_bench.parse_gpu_bench, ("gpu_bench/*",), OWNER),
    Target("gpu_bench.unavailable_reason", gpu_bench.unavailable_reason, ("gpu_bench/*unavailable*",), OWNER),
    Target("modules.parse_lsmod", modules.parse_lsmod, ("lsmod/*",), OWNER),
    Target("modules.parse_proc_modules", modules.parse_proc_modules, ("proc-modules/*",), OWNER),
    Target("nhc_conf.parse_nhc_conf", nhc_conf.parse_nhc_conf, ("nhc-conf/*",), OWNER),
    Target("nvbandwidth.parse_nvbandwidth", _nvbandwidth, ("nvbandwidth/*",), OWNER),
    Target(
        "nvidia_driver.parse_proc_version", nvidia_driver.parse_proc_version, ("proc-driver-nvidia-version/*",), OWNER
    ),
    Target(
        "nvidia_driver.parse_sys_module_version",
        nvidia_driver.parse_sys_module_version,
        ("sys-module-nvidia-version/*",),
        OWNER,
    ),
    Target("nvidia_libraries.parse_ldconfig", nvidia_libraries.parse_ldconfig, ("ldconfig-p/*",), OWNER),
    Target(
        "nvidia_libraries.parse_libraries_probe",
        nvidia_libraries.parse_libraries_probe,
        (),
        OWNER,
        _from("tests.parsers.test_nvidia_libraries", "PROBE"),
    ),
    Target("nvidia_libraries.file_version", _file_versions, ("ls-l-driver-libs/*",), OWNER),
    Target(
        "nvidia_smi_csv.gpus_from_query_gpu",
        nvidia_smi_csv.gpus_from_query_gpu,
        ("scenarios/*query-gpu*.csv",),
        OWNER,
    ),
    Target(
        "nvidia_smi_nvlink.parse_nvlink_errors",
        nvidia_smi_nvlink.parse_nvlink_errors,
        ("nvidia-smi-nvlink/*-e-*",),
        OWNER,
    ),
    Target("nvlink_fabric.parse_nvlink_fabric", nvlink_fabric.parse_nvlink_fabric, (), OWNER, _fabric_seeds),
    Target("nvlink_fabric.nvswitches_from_lspci", nvlink_fabric.nvswitches_from_lspci, ("lspci-nvswitch/*",), OWNER),
    Target("sxid.parse_sxids", _sxids, ("dmesg-sxid/*",), OWNER),
    Target("systemctl.parse_systemctl_show", systemctl.parse_systemctl_show, ("systemctl-show/*",), OWNER),
    Target("systemctl.parse_process_list", systemctl.parse_process_list, (), OWNER, _const(*PROCESS_LIST)),
    Target("uptime.parse_uptime", uptime.parse_uptime, (), OWNER, _const(*UPTIME)),
    Target("uptime.node_clock", _node_clock, (), OWNER, _const(*CLOCK)),
    Target("pairtest.made_directory", pairtest.made_directory, (), OWNER, _steps("PAIR_START")),
    Target("pairtest.ready_servers", pairtest.ready_servers, (), OWNER, _steps("PAIR_START")),
    Target("pairtest.start_state", _start_state, (), OWNER, _steps("PAIR_START")),
    Target("reachability.listener_made", reachability.listener_made, (), OWNER, _steps("REACH_START")),
    Target("reachability.listened_ports", reachability.listened_ports, (), OWNER, _steps("REACH_START")),
    Target(
        "reachability.listener_said_nopython",
        reachability.listener_said_nopython,
        (),
        OWNER,
        _steps("REACH_START", "REACH_FAILED_START"),
    ),
    Target(
        "reachability.listener_ready",
        reachability.listener_ready,
        (),
        OWNER,
        _steps("REACH_START", "REACH_FAILED_START"),
    ),
    Target(
        "reachability.listener_start_state",
        reachability.listener_start_state,
        (),
        OWNER,
        _steps("REACH_FAILED_START"),
    ),
    Target("reachability.listener_alive", reachability.listener_alive, (), OWNER, _steps("REACH_STOP")),
    Target("reachability.listener_stop_state", reachability.listener_stop_state, (), OWNER, _steps("REACH_STOP")),
    Target("reachability.connection_results", reachability.connection_results, (), OWNER, _steps("REACH_CONNECT")),
    Target("tools.missing_tools", tools.missing_tools, (), OWNER, _const(*TOOLS_STEP)),
    Target("slurm.parse_squeue_job", _squeue, SQUEUE, OWNER),
    Target(
        "slurm.parse_reservation_nodes",
        lambda t: slurm.parse_reservation_nodes(t, "maint"),
        (),
        OWNER,
        _const(*RESERVATION),
    ),
    Target("slurm.parse_sbatch_parsable", slurm.parse_sbatch_parsable, (), OWNER, _const(*SBATCH)),
)


# -- checks judged on a real passing output, hollowed (tests/fuzz/test_hollow_not_pass.py) ---------


def _kernel_modules(text: str):
    from nodecheck.checks.kernel_modules import KernelModules, modules
    from tests.checks.test_kernel_modules import GPU_PROFILE, probe_out

    want = KernelModules(**GPU_PROFILE)
    return list(modules(probe_out(want, text), want))


def _pcie_aer(text: str):
    # the GPU's three files as the text (each kind read from it), its root port's counters zero
    from tests.checks.test_pcie_aer import ZERO, judge, read

    out = read({"0000:04:00.0": dict.fromkeys(aer.KINDS, text), "0000:00:02.0": ZERO})
    return judge(out, out)


def _nvlink_sxid(text: str):
    from tests.checks.test_nvlink_sxid import judge

    return judge(text)


# check -> (judge of one output as the runner routes it, a real output it passes)
HOLLOW: dict[str, tuple[Callable[[str], Any], str]] = {
    "kernel.modules": (_kernel_modules, data("lsmod/gpud-pr39-h100-fm535-lsmod-grep-peermem.txt")),
    "pcie.aer": (_pcie_aer, data("sysfs_aer/procfs-fixture-0000-01-00-0-aer_dev_correctable-zero.txt")),
    # a kernel log without an SXid line passes; hollowed, it is no kernel log
    "nvlink.sxid": (_nvlink_sxid, data("scenarios/derived-dmesg-T-nvrm-gpu-at-no-xid.txt")),
}

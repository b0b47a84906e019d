"""Every public parser in nodecheck/parsers/, each with the real outputs it is fuzzed from.

A target is a parse function taking the text as the transport hands it over (str, or bytes for the
flight recorder) and the seeds mutations start from: the corpus files of its tool under tests/data
(tests/data/SOURCES.md says which tool wrote which file) and, where a tool has no recording, the
outputs its parser tests construct. `owner` is the slice that fixes a failure (issue 17's split).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from typing import Any

from nodecheck.parsers import (
    containers,
    flight_recorder,
    forensics,
    gids,
    ibstat,
    kernel_log,
    nccl_tests,
    nccl_tests_json,
    networkmanager,
    nvidia_smi,
    nvidia_smi_csv,
    nvidia_smi_nvlink,
    nvidia_smi_q,
    nvml,
    perfquery,
    perftest,
    pyspy,
    rankcounts,
    sections,
    slurm,
    sysfs,
    versions,
    watch_sample,
    xid_codes,
)
from nodecheck.parsers import nccl_config as ncclenv
from tests.helpers import DATA


@dataclass(frozen=True)
class Target:
    name: str  # "ibstat.parse_ibstat"
    parse: Callable[[Any], Any]
    seed_paths: tuple[str, ...]  # globs under tests/data
    owner: str
    extra_seeds: Callable[[], tuple[str, ...]] = lambda: ()
    binary: bool = False  # takes bytes (the flight recorder reads dump files)

    @property
    def seeds(self) -> tuple:
        return _seeds(self)


@cache
def _seeds(target: Target) -> tuple:
    found = []
    for pattern in target.seed_paths:
        for path in sorted(DATA.glob(pattern)):
            if path.is_file() and path.name not in ("SOURCES.md", "build_fixtures.py", "record.py"):
                raw = path.read_bytes()
                found.append(raw if target.binary else raw.decode("utf-8", "replace"))
    found += [s.encode() if target.binary else s for s in target.extra_seeds()]
    assert found, f"{target.name}: no seeds"
    return tuple(found)


# -- seeds for tools with no recording: what their parser tests construct ---------------------------


def _ncclenv_seeds() -> tuple[str, ...]:
    from tests.parsers.test_nccl_config import output

    return (
        output(
            node_env="NCCL_DEBUG=INFO\nMASTER_ADDR=node1\nNCCL_SOCKET_IFNAME=ib0\n", etc_conf="NCCL_IB_GID_INDEX=3\n"
        ),
        output(),
    )


def _nmcli_seeds() -> tuple[str, ...]:
    from tests.parsers.test_networkmanager import NMCLI

    return (NMCLI,)


def _nm_conf_seeds() -> tuple[str, ...]:
    from tests.parsers.test_networkmanager import CONF

    return (
        CONF,
        "[main]\nplugins=keyfile\n[keyfile]\nunmanaged-devices=interface-name:rnic*;mac:00:11:22:33:44:55\n"
        "unmanaged-devices+=except:type:ethernet\n",
    )


def _nvml_seeds() -> tuple[str, ...]:
    from tests.parsers.test_nvml import doc

    return (json.dumps(doc()) + "\n", json.dumps(doc(), indent=1) + "\n")


def _sysfs_seeds() -> tuple[str, ...]:
    return (
        "/sys/class/infiniband/mlx5_0/ports/1/gids/3\t0000:0000:0000:0000:0000:ffff:0a4d:0003\n"
        "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3\tRoCE v2\n"
        "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/4\t!cat: types/4: Invalid argument\n"
        "/sys/class/infiniband/mlx5_0/ports/1/state\t4: ACTIVE\n"
        "/sys/class/infiniband/mlx5_0/ports/1/link_layer\tEthernet\n"
        "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/3\trnic3\n",
    )


def _versions(name: str) -> Callable[[], tuple[str, ...]]:
    def seeds() -> tuple[str, ...]:
        from tests.parsers import test_versions as t

        return {
            "uname": ("5.15.0-112-generic\n",),
            "os_release": (t.DEBIAN_12,),
            "ldconfig": (f"{t.DEB} -> {t.DEB_TARGET}\n",),
            "header": (t.HEADER,),
            "conf": ("NCCL_IB_GID_INDEX=3\n# comment\nNCCL_SOCKET_IFNAME=ib0\n",),
            "env": ("NCCL_DEBUG=INFO\nNCCL_IB_HCA=mlx5_0,mlx5_1\n",),
        }[name]

    return seeds


def _rankcounts_seeds() -> tuple[str, ...]:
    return ("rank,count\n0,30871\n1,30850\n", "0, 30871\n\n1 ,30850\n")


def _section(name: str, body: str, rc: int = 0) -> str:
    return f"@@nodecheck begin {name}\n{body}@@nodecheck end {name} rc={rc}\n"


def _sections_seeds() -> tuple[str, ...]:
    return (
        "@@nodecheck runtime docker\n"
        + _section("inspect", "[]\n")
        + _section("sum", "abc\n", 1)
        + "@@nodecheck begin cut\npartial",
    )


# -- wrappers: the calls the checks make ------------------------------------------------------------

_NOW = datetime(2025, 2, 23, 16, 31, tzinfo=timezone.utc)


def _kernel_log(text: str):
    return kernel_log.parse_kernel_log(text, now=_NOW, uptime_s=3600.0)


def _compute_apps_seeds() -> tuple[str, ...]:
    return (
        "GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9, 48213, python3, 1021\n"
        "GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3, 48214, /usr/bin/python3, 70000\n",
    )


def _facts_from_csv(text: str):
    return nvidia_smi.gpu_facts_from_nvidia_smi(query_gpu=text, compute_apps=None, q=None, nvlink=None)


def _facts_from_q(text: str):
    return nvidia_smi.gpu_facts_from_nvidia_smi(query_gpu=None, compute_apps=None, q=text, nvlink=None)


def _xid_codes(text: str):
    """classify() takes the code the kernel-log parser read: every code of the mutated log."""
    log = _kernel_log(text)
    return [xid_codes.classify(event.code) for event in getattr(log, "xids", ())]


def _sysfs_counters(text: str):
    return perfquery.counters_from_sysfs(sysfs.parse_sysfs_dump(text))


def _sysfs_gids(text: str):
    return gids.ports_from_sysfs(sysfs.parse_sysfs_dump(text))


def _watch_progress(text: str):
    """The log tail read by a watch config's regexes (the users' regexes: lines cut at LINE_CHARS)."""
    from nodecheck.watch.config import ProgressSource

    src = ProgressSource(
        log="/x/train.log",  # the default regexes, and a per-rank one
        rank_time_regex=r"rank (?P<rank>\d+) step \d+ time (?P<seconds>\d+(?:\.\d+)?)s",
    )
    return watch_sample.read_progress(text, src)


def _pyspy_failure(text: str):
    return pyspy.pyspy_failure(text, text, 1), pyspy.pyspy_failure("", text, 1)


def _rank_counts(text: str):
    return [rankcounts.parse_rank_counts(text, fmt) for fmt in ("auto", "csv")]


PY_SPY_TEXT = ("py-spy/*.txt",)
TARGETS: tuple[Target, ...] = (
    # slice F
    Target(
        "containers.parse_image_inspect",
        containers.parse_image_inspect,
        ("scenarios/*docker-image-inspect*", "container-digests/bon-in-a-box*"),
        "F",
    ),
    Target(
        "containers.parse_sha256sum",
        containers.parse_sha256sum,
        (),
        "F",
        lambda: (
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  /shared/a.sqsh\n"
            "sha256sum: /shared/b.sqsh: No such file or directory\n"
            "SHA256 (/c.sif) = " + "ab" * 32 + "\n",
        ),
    ),
    Target(
        "containers.parse_enroot_list",
        containers.parse_enroot_list,
        (),
        "F",
        lambda: (
            "pytorch\nnemo+24.10\n",
            __import__("tests.parsers.test_containers", fromlist=["ENROOT_FANCY"]).ENROOT_FANCY,
        ),
    ),
    Target("networkmanager.parse_nmcli_devices", networkmanager.parse_nmcli_devices, (), "F", _nmcli_seeds),
    Target(
        "networkmanager.unmanaged_devices",
        lambda t: networkmanager.specs_not_by_name(networkmanager.unmanaged_devices(t)),
        (),
        "F",
        _nm_conf_seeds,
    ),
    Target(
        "perfquery.parse_perfquery", perfquery.parse_perfquery, ("perfquery/*", "scenarios/derived-perfquery*"), "F"
    ),
    Target("perfquery.counters_from_sysfs", _sysfs_counters, ("sysfs_ib_counters/derived*",), "F"),
    Target("watch_sample.parse_sample", watch_sample.parse_sample, ("watch/*",), "F"),
    Target("watch_sample.read_progress", _watch_progress, ("watch/*",), "F"),
    Target("xid_codes.classify", _xid_codes, ("dmesg-xid/*",), "F"),
    # slice D1
    Target("nccl_tests.parse_nccl_tests", nccl_tests.parse_nccl_tests, ("nccl-tests/*.txt", "nccl-debug-info/*"), "D1"),
    Target(
        "nccl_tests_json.parse_nccl_tests_json", nccl_tests_json.parse_nccl_tests_json, ("nccl-tests/*.json",), "D1"
    ),
    Target("perftest.parse_perftest", lambda t: perftest.parse_perftest(t, 0), ("perftest/*",), "D1"),
    Target("versions.parse_uname_r", versions.parse_uname_r, (), "D1", _versions("uname")),
    Target("versions.parse_os_release", versions.parse_os_release, (), "D1", _versions("os_release")),
    Target("versions.parse_ofed_info", versions.parse_ofed_info, ("scenarios/ofed_info*",), "D1"),
    Target(
        "versions.parse_ldconfig_nccl",
        versions.parse_ldconfig_nccl,
        ("scenarios/ldconfig*",),
        "D1",
        _versions("ldconfig"),
    ),
    Target("versions.parse_nccl_header", versions.parse_nccl_header, (), "D1", _versions("header")),
    Target("versions.parse_nccl_conf", versions.parse_nccl_conf, (), "D1", _versions("conf")),
    Target("versions.parse_nccl_env", versions.parse_nccl_env, (), "D1", _versions("env")),
    Target("rankcounts.parse_rank_counts", _rank_counts, ("job/*",), "D1", _rankcounts_seeds),
    Target("nccl_config.parse_probe", ncclenv.parse_probe, (), "D1", _ncclenv_seeds),
    # slice D2
    Target(
        "nvidia_smi_csv.parse_query_gpu",
        nvidia_smi_csv.parse_query_gpu,
        ("nvidia-smi-query-csv/*", "scenarios/*.csv"),
        "D2",
    ),
    Target(
        "nvidia_smi_csv.parse_query_gpu(fields)",
        lambda t: nvidia_smi_csv.parse_query_gpu(t, nvidia_smi_csv.QUERY_GPU_FIELDS),
        ("scenarios/*.csv",),
        "D2",
    ),
    Target(
        "nvidia_smi_csv.parse_compute_apps",
        lambda t: nvidia_smi_csv.parse_compute_apps(t, nvidia_smi_csv.COMPUTE_APPS_FIELDS),
        (),
        "D2",
        _compute_apps_seeds,
    ),
    Target("nvidia_smi_q.parse_q", nvidia_smi_q.parse_q, ("nvidia-smi-q/*",), "D2"),
    Target(
        "nvidia_smi_nvlink.parse_nvlink_status",
        nvidia_smi_nvlink.parse_nvlink_status,
        ("nvidia-smi-nvlink/*-s-*",),
        "D2",
    ),
    Target("nvidia_smi.gpu_facts_from_nvidia_smi(query_gpu)", _facts_from_csv, ("scenarios/*.csv",), "D2"),
    Target("nvidia_smi.gpu_facts_from_nvidia_smi(q)", _facts_from_q, ("nvidia-smi-q/*",), "D2"),
    Target("nvml.parse_nvml_probe", nvml.parse_nvml_probe, (), "D2", _nvml_seeds),
    Target("kernel_log.parse_kernel_log", _kernel_log, ("dmesg-xid/*", "dmesg-oom/*", "scenarios/*dmesg*"), "D2"),
    Target("ibstat.parse_ibstat", ibstat.parse_ibstat, ("ibstat/*",), "D2"),
    Target("sysfs.parse_sysfs_dump", sysfs.parse_sysfs_dump, ("sysfs_ib_counters/derived*",), "D2", _sysfs_seeds),
    Target("gids.ports_from_sysfs", _sysfs_gids, (), "D2", _sysfs_seeds),
    Target("sections.split_sections", sections.split_sections, ("watch/*",), "D2", _sections_seeds),
    # slice A
    Target(
        "flight_recorder.parse_dump",
        flight_recorder.parse_dump,
        ("flight-recorder/*/nccl_trace_rank_[01]", "flight-recorder/*/json/nccl_trace_rank_0", "flight-recorder/bad/*"),
        "A",
        binary=True,
    ),
    Target("forensics.parse_snapshot", forensics.parse_snapshot, ("forensics/*snapshot*",), "A"),
    Target("forensics.parse_stacks", forensics.parse_stacks, ("forensics/*stacks*",), "A"),
    Target("forensics.parse_fetch", forensics.parse_fetch, ("forensics/*fetch*",), "A"),
    Target("pyspy.parse_pyspy_dump", pyspy.parse_pyspy_dump, PY_SPY_TEXT, "A"),
    Target("pyspy.pyspy_failure", _pyspy_failure, ("py-spy/*exit1*",), "A"),
    # slice C
    Target("slurm.parse_show_node", slurm.parse_show_node, ("slurm/*",), "C"),
)


# The node-level parsers (issue 32, section 3): one module per slice, each listing its own targets
# and the checks whose hollowed passing output must not pass (tests/fuzz/test_hollow_not_pass.py).
NODE_SLICES = ("node_fs", "node_cpu_mem", "node_pcie_dcgm", "node_time_ib", "node_misc")


def _node_slices() -> list[Any]:
    # imported here, not at the top: each slice imports Target from this module
    from importlib import import_module

    return [import_module(f"tests.fuzz.{name}") for name in NODE_SLICES]


TARGETS = TARGETS + tuple(t for module in _node_slices() for t in module.TARGETS)
BY_NAME = {t.name: t for t in TARGETS}


def node_hollow_checks() -> dict[str, tuple[Callable[[str], Any], str]]:
    return {name: judged for module in _node_slices() for name, judged in module.HOLLOW.items()}

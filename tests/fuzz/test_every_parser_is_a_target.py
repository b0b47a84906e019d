"""Every public function in nodecheck/parsers/ is fuzzed (a target in targets.py or a node_*.py slice)
or says here why not (issue 32, section 3: the node-level parsers were never fuzz targets, and that is
how their crashes and false PASSes went unseen). A new parser cannot skip fuzzing: this test names it
until it is a target, or a non-parser helper on NOT_FUZZED with its reason."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import nodecheck.parsers
from tests.fuzz.targets import TARGETS

# "module.function" -> why it is not a target of its own: it reads no tool text (it takes parsed
# facts or a single value), or it is a parser's helper whose every call is fuzzed through that parser.
NOT_FUZZED = {
    # helpers on parsed facts: no text in
    "containers.digest_of": "takes a parsed ImageRecord",
    "containers.digests_of": "takes a parsed ImageRecord",
    "findmnt.last_mount": "takes parsed mounts",
    "findmnt.mount_of": "takes parsed mounts",
    "gids.roce_v2_ipv4": "takes parsed ports",
    "lscpu.format_cpu_list": "formats CPU numbers",
    "lscpu.count_problem": "takes a parsed Lscpu (run on every parse_lscpu result by its target)",
    "lscpu.topology_problem": "takes a parsed Lscpu (run on every parse_lscpu result by its target)",
    "networkmanager.is_unmanaged": "takes a netdev name and parsed specs",
    "networkmanager.specs_not_by_name": "takes parsed specs (run on unmanaged_devices' result by its target)",
    "nvbandwidth.host_to_device": "takes a parsed run (called on every parse_nvbandwidth result by its target)",
    "nvbandwidth.device_to_host": "takes a parsed run (called on every parse_nvbandwidth result by its target)",
    "nvbandwidth.device_to_device": "takes a parsed run (called on every parse_nvbandwidth result by its target)",
    "nvlink_fabric.is_nvswitch": "takes a parsed PCI device",
    "pyspy.main_thread": "takes parsed stacks",
    "nccl_tests_facts.human_bytes": "formats a byte count",
    "nccl_tests_facts.int_or_none": "a value helper of the nccl-tests parsers (fuzzed through them)",
    "nccl_tests_facts.out_of_bounds_failure": "builds a Failure from a parsed count",
    "nccl_tests_facts.avg_busbw_failure": "builds a Failure from a parsed value",
    "nvidia_smi_values.grouped": "groups parsed pairs",
    "nvidia_smi_values.expect_unique_indexes": "checks parsed GPUs",
    "slurm.reason_mark": "writes nodecheck's own drain reason",
    "slurm.reason_owner": "reads a reason parse_show_node already parsed (fuzzed through it)",
    "slurm.reason_body": "reads a reason parse_show_node already parsed (fuzzed through it)",
    "slurm.held_for_a_person": "reads a reason parse_show_node already parsed (fuzzed through it)",
    "sysctl.path_of": "maps a validated key to its /proc/sys path",
    "sysctl.shown": "normalises a value's blanks (str.split)",
    "versions.is_64bit": "reads ldconfig's flags that parse_ldconfig_nccl already parsed",
    "modules.canonical": "maps a module name's '-' to '_'",
    # a single value a parser took out of the text: fuzzed through that parser
    "counts.u64": "reads one count for the parsers of counters, sizes and pids (fuzzed through them)",
    "ps.parse_elapsed": "reads one ps field for parse_ps (fuzzed through it; its ValueError is parse_ps's ParseError)",
    "escapes.unescape": "decodes one value for nccl_config, forensics, nvidia_libraries and statfs (fuzzed "
    "through them; its ValueError is their ParseError)",
    "findmnt.unoctal": "decodes one field for parse_findmnt, parse_mountinfo and parse_fstab (fuzzed through them)",
    "gids.make_gid": "reads one GID for ports_from_sysfs (fuzzed through it; its ValueError is its ParseError)",
    "jsonsafe.loads": "the bounded json.loads of dcgm_diag, findmnt, gpu_bench and nccl_tests_json (fuzzed through "
    "them; its JSONDecodeError and JsonRefused are their ParseError)",
    "jsonsafe.kind_of": "names a JSON value's type for a message",
    "lines.split_lines": "splits every parser's text (fuzzed through all of them)",
    "nccl_config.first_line": "a message helper",
    "nccl_config.key_values": "reads one section for parse_probe and job/probe.py (fuzzed through parse_probe)",
    "nccl_config.read_confs": "reads one section for parse_probe and job/probe.py (fuzzed through parse_probe)",
    "nccl_config.read_node_env": "reads one section for parse_probe and job/probe.py (fuzzed through parse_probe)",
    "nccl_config.unescaped": "decodes one value for parse_probe and job/probe.py (fuzzed through parse_probe)",
    "nvidia_smi_values.available": "reads one value for the nvidia-smi parsers (fuzzed through them)",
    "nvidia_smi_values.check_failure": "reads nvidia-smi's failure line for its parsers (fuzzed through them)",
    "nvidia_smi_values.expect_unique": "checks parsed names for parse_q",
    "nvidia_smi_values.normalise_bus_id": "reads one bus id for the nvidia-smi parsers (fuzzed through them)",
    "nvidia_smi_values.read_flag": "reads one value for the nvidia-smi parsers (fuzzed through them)",
    "nvidia_smi_values.read_float": "reads one value for the nvidia-smi parsers (fuzzed through them)",
    "nvidia_smi_values.read_count": "reads one value for the nvidia-smi parsers (fuzzed through them)",
    "watch_sample.read_gpus": "reads one section for parse_sample and forensics.parse_snapshot (fuzzed through them)",
    "watch_sample.read_procs": "reads one section for parse_sample and forensics.parse_snapshot (fuzzed through them)",
}


def public_functions() -> set[str]:
    """ "module.function" of every public function defined in a nodecheck/parsers/ module."""
    found = set()
    for info in pkgutil.iter_modules(nodecheck.parsers.__path__):
        module = importlib.import_module(f"nodecheck.parsers.{info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("_") and function.__module__ == module.__name__:
                found.add(f"{info.name}.{name}")
    return found


def target_names() -> set[str]:
    """What each target fuzzes: its name without a variant ("nvidia_smi_csv.parse_query_gpu(fields)")."""
    return {target.name.split("(")[0] for target in TARGETS}


def test_every_public_parser_function_is_a_fuzz_target_or_says_why_not():
    missing = sorted(public_functions() - target_names() - set(NOT_FUZZED))
    assert not missing, (
        "public functions in nodecheck/parsers/ that no fuzz target reads (add a Target in your slice's "
        f"tests/fuzz/node_*.py, or, for a helper that reads no tool text, a reason on NOT_FUZZED): {missing}"
    )


def test_every_target_and_exclusion_names_a_function_that_is_there():
    """A parser renamed or deleted leaves no stale name here. (A target may also fuzz a reader outside
    nodecheck/parsers/, "limits.read_limits": only names of a parsers module are checked.)"""
    functions = public_functions()
    modules = {name.split(".")[0] for name in functions}
    named = [n for n in target_names() if n.count(".") == 1]  # "lspci.PciTree.above": a method
    assert sorted(n for n in named if n.split(".")[0] in modules and n not in functions) == []
    assert sorted(set(NOT_FUZZED) - functions) == []

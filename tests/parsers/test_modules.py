"""Loaded kernel modules: every lsmod and /proc/modules recording, users seen as loaded, states, and
output that is no module list."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.modules import Module, parse_lsmod, parse_proc_modules
from tests.helpers import data, data_files

# per file: (module count, one module as parsed, the names seen only as users, sorted)
LSMOD = {
    "lsmod/derived-gpud-pr39-h100-no-nvidia-peermem.txt": (
        2,
        Module("nvidia", 56717312, ("nvidia_uvm", "nvidia_modeset")),
        [
            "ib_cm",
            "ib_ipoib",
            "ib_umad",
            "ib_uverbs",
            "iw_cm",
            "mlx5_ib",
            "nvidia_modeset",
            "nvidia_uvm",
            "rdma_cm",
            "rdma_ucm",
        ],
    ),
    "lsmod/gpu-operator-2511-8gpu-nvlink-lsmod-sort-grep-mlx5.txt": (
        9,
        Module("mlx5_ib", 487424, ()),
        ["bonding", "ib_umad"],
    ),
    "lsmod/gpud-pr39-h100-fm535-lsmod-grep-peermem.txt": (
        3,
        Module("nvidia_peermem", 16384, ()),
        [
            "ib_cm",
            "ib_ipoib",
            "ib_umad",
            "ib_uverbs",
            "iw_cm",
            "mlx5_ib",
            "nvidia_modeset",
            "nvidia_uvm",
            "rdma_cm",
            "rdma_ucm",
        ],
    ),
    "lsmod/linux-file-systems-thinkpad-ubuntu-full-lsmod-no-gpu.txt": (
        159,
        Module(
            "snd_hda_ext_core",
            32768,
            (
                "snd_soc_avs",
                "snd_soc_hda_codec",
                "snd_sof_intel_hda_common",
                "snd_soc_hdac_hda",
                "snd_sof_intel_hda_mlink",
                "snd_soc_skl",
                "snd_sof_intel_hda",
            ),
        ),
        [],
    ),
}
PROC_MODULES = {
    "proc-modules/derived-gpud-pr39-h100-as-proc-modules.txt": (3, Module("nvidia_peermem", 16384, (), "Live")),
    "proc-modules/derived-gpud-pr39-h100-peermem-unloading.txt": (3, Module("nvidia_peermem", 16384, (), "Unloading")),
}


def test_every_recording_has_expectations():
    assert sorted(LSMOD) == data_files("lsmod")
    assert sorted(PROC_MODULES) == data_files("proc-modules")


@pytest.mark.parametrize("path", data_files("lsmod"))
def test_lsmod_recordings(path):
    count, module, holders = LSMOD[path]
    loaded = parse_lsmod(data(path))
    assert (len(loaded.modules), loaded.form) == (count, "lsmod")
    assert loaded.modules[module.name] == module
    assert sorted(loaded.holders) == holders


@pytest.mark.parametrize("path", data_files("proc-modules"))
def test_proc_modules_recordings(path):
    count, module = PROC_MODULES[path]
    loaded = parse_proc_modules(data(path))
    assert (len(loaded.modules), loaded.form) == (count, "proc-modules")
    assert loaded.modules[module.name] == module
    assert loaded.modules["ib_core"].users[-1] == "ib_cm"  # the trailing "," of /proc/modules is no name
    assert loaded.loaded("nvidia-uvm")  # a user of nvidia, written the modprobe way


def test_a_user_of_a_listed_module_counts_as_loaded_and_permanent_is_no_name():
    loaded = parse_lsmod(data("lsmod/gpud-pr39-h100-fm535-lsmod-grep-peermem.txt"))
    assert loaded.loaded("mlx5_ib") and loaded.loaded("nvidia_peermem") and not loaded.loaded("gdrdrv")
    # constructed: /proc/modules shows a module that cannot be unloaded with "[permanent]," as users
    perm = parse_proc_modules("ipv6 589824 144 [permanent], Live 0x0000000000000000\n")
    assert perm.modules["ipv6"].users == () and perm.holders == frozenset()


@pytest.mark.parametrize(
    ("parse", "text", "tool", "reason"),
    [
        (parse_lsmod, "Module                  Size  Used by\n", "lsmod", "no module listed"),
        (parse_lsmod, "", "lsmod", "no module listed"),
        (parse_lsmod, "lsmod: command not found\n", "lsmod", "not a module line: 'lsmod: command not found'"),
        (parse_lsmod, "nvidia  5671", "lsmod", "not a module line: 'nvidia  5671'"),
        (
            parse_proc_modules,
            "nvidia_peermem         16384  0\n",
            "/proc/modules",
            "not a module line: 'nvidia_peermem         16384  0'",
        ),
    ],
)
def test_not_a_module_list(parse, text, tool, reason):
    with pytest.raises(ParseError) as caught:
        parse(text)
    assert (caught.value.tool, caught.value.reason) == (tool, reason)


@pytest.mark.parametrize("size", ["9" * 5000, "9" * 400], ids=["5000 digits", "400 digits"])
def test_a_module_size_no_kernel_prints_is_a_parse_error(size):
    # 5000 digits raised ValueError from int()
    with pytest.raises(ParseError, match="module size is not a count"):
        parse_lsmod(f"Module                  Size  Used by\nnvidia_peermem {size}  0\n")

"""`ldconfig -p` recordings, and the driver-stack probe's records (escaped names, cut-off output)."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.nvidia_libraries import LIBRARY_NAME, file_version, parse_ldconfig, parse_libraries_probe
from tests.helpers import data, data_files

LDCONFIG = {
    # file: (entries, native entries, (soname, path) of the libnvidia-ml.so.1 entry)
    "ldconfig-p/derived-nvidia-docker-876-fedora-415.22-lib64-and-lib32.txt": (
        12,
        7,
        ("libnvidia-ml.so.1", "/lib64/libnvidia-ml.so.1"),
    ),
    "ldconfig-p/gst-notes-460.32.03-grep-libcuda-libnvidia-libnvcuvid.txt": (
        12,
        12,
        ("libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"),
    ),
}


@pytest.mark.parametrize("path", data_files("ldconfig-p"))
def test_every_ldconfig_recording(path):
    entries = parse_ldconfig(data(path))
    count, native, ml = LDCONFIG[path]
    assert len(entries) == count
    assert sum(e.native for e in entries) == native
    assert next((e.soname, e.path) for e in entries if e.soname == "libnvidia-ml.so.1") == ml


def test_a_32_bit_entry_with_an_os_abi_is_not_native():
    (lib64, lib32) = parse_ldconfig(data("ldconfig-p/derived-nvidia-docker-876-fedora-415.22-lib64-and-lib32.txt"))[:2]
    assert (lib64.flags, lib64.native) == ("libc6,x86-64, OS ABI: Linux 2.3.99", True)
    assert (lib32.flags, lib32.native, lib32.path) == (
        "libc6, OS ABI: Linux 2.3.99",
        False,
        "/lib/libnvidia-tls.so.415.22",
    )


def test_the_cache_header_line_is_skipped_and_garbage_raises():
    assert len(parse_ldconfig("1234 libs found in cache `/etc/ld.so.cache'\n")) == 0
    with pytest.raises(ParseError):
        parse_ldconfig("\tlibcuda.so.1 (libc6,x86-64) =>\n")
    with pytest.raises(ParseError):
        parse_ldconfig("ldconfig: Can't open cache file /etc/ld.so.cache\n")


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("libnvidia-ml.so.1", True),
        ("libnvidia-nvvm.so.4", True),
        ("libcuda.so", True),
        ("libstdc++.so.6", True),
        ("libnvidia-ml.so.1 -x", False),
        ("../libcuda.so.1", False),
        ("libcuda.so.1\n", False),
        ("-libcuda.so.1", False),
        ("libcuda", False),
    ],
)
def test_library_names(name, ok):
    assert bool(LIBRARY_NAME.fullmatch(name)) is ok


def test_file_versions():
    assert file_version("/usr/lib64/libnvidia-ml.so.550.90.07") == "550.90.07"
    assert file_version("libcuda.so.555.58") == "555.58"
    assert file_version("libcuda.so.1") is None
    assert file_version("libcuda.so") is None


PROBE = (
    "@@nodecheck begin proc-version\n"
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024\n"
    "@@nodecheck end proc-version rc=0\n"
    "@@nodecheck begin ldconfig\n"
    "\\x09libcuda.so.1 (libc6,x86-64) => /opt/odd\\x40dir/libcuda.so.1\n"
    "@@nodecheck end ldconfig rc=0\n"
    "@@nodecheck begin libs\n"
    "link\t/opt/odd\\x40dir/libcuda.so.1\tlibcuda.so.550.90.07\n"
    "file\t/opt/odd\\x40dir/libcuda.so.550.90.07\t28581024\tregular file\n"
    "sibling\t/opt/odd\\x40dir/libcuda.so.535.104.05\t0\n"
    "@@nodecheck end libs rc=0\n"
)


def test_escaped_names_are_decoded():
    facts = parse_libraries_probe(PROBE)
    assert facts.entries[0].path == "/opt/odd@dir/libcuda.so.1"
    chain = facts.chains["/opt/odd@dir/libcuda.so.1"]
    assert (chain.shown(), chain.version, chain.size) == ("libcuda.so.1 -> libcuda.so.550.90.07", "550.90.07", 28581024)
    assert facts.siblings == {"/opt/odd@dir/libcuda.so.550.90.07": (("/opt/odd@dir/libcuda.so.535.104.05", 0),)}


@pytest.mark.parametrize(
    ("cut", "why"),
    [
        (PROBE.split("@@nodecheck end libs")[0], "cut off"),
        (PROBE.split("@@nodecheck begin libs")[0], "no 'libs' section"),
        (PROBE.replace("link\t", "link\tx\t", 1), "unknown record"),
        (PROBE.replace("file\t", "unknown\t"), "unknown record"),
        (PROBE.replace("Kernel Module  550.90.07", "Kernel Module"), "NVRM"),
        (PROBE.replace("end proc-version rc=0", "end proc-version rc=1"), "could not be read"),
        ("@@nodecheck kernel-module none\n", "no 'ldconfig' section"),
        ("garbage\n", "neither"),
        (PROBE.replace("/opt/odd", "/opt/ödd"), "not written by the probe"),
    ],
)
def test_truncated_or_foreign_output_raises(cut, why):
    with pytest.raises(ParseError) as raised:
        parse_libraries_probe(cut)
    assert why in str(raised.value) or why in raised.value.reason

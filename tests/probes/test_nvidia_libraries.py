"""The driver-stack probe run for real under sh against fake node trees built from recorded `ls -l`
listings: what it reports for links, empty files, leftovers and hostile names, and what it refuses."""

from __future__ import annotations

import os
import time

from nodecheck.parsers.nvidia_libraries import parse_libraries_probe
from nodecheck.probes.nvidia_libraries import MAX_LINKS, SCRIPT, libraries_probe
from tests.probes.nvidia_tree import LIBDIR, cache_line, fake_ldconfig, kernel_version, run_probe, tree_from_ls

ML = "libnvidia-ml.so.1"
PROC_550 = "proc-driver-nvidia-version/nixgl-186-open-565.57.01-ubuntu2404.txt"


def test_the_root_is_an_argument_and_names_never_reach_the_script_text():
    probe = libraries_probe(["libnvidia-ml.so.1", "libcuda.so.1"])
    assert probe.argv[:4] == ("sh", "-c", SCRIPT, "nodecheck-nvidia-libraries")
    assert probe.argv[4:] == ("/", "libcuda.so.1", "libnvidia-ml.so.1")
    assert "libnvidia-ml" not in SCRIPT and probe.name.startswith("nvidia-libraries:")
    assert libraries_probe(["libcuda.so.1"]).name != probe.name


def test_a_recorded_550_layout_resolves_link_by_link(tmp_path):
    root, bindir = tmp_path / "root", tmp_path / "bin"
    tree_from_ls(root, "ls-l-driver-libs/gpud-415-550.90.07-libnvidia-ml.txt")
    tree_from_ls(root, "ls-l-driver-libs/gpud-415-550.90.07-grep-cuda.txt")
    kernel_version(root, PROC_550)
    fake_ldconfig(bindir, [cache_line(ML, f"{LIBDIR}/{ML}"), cache_line("libcuda.so.1", f"{LIBDIR}/libcuda.so.1")])
    started = time.monotonic()
    text = run_probe(root, [ML, "libcuda.so.1"], bindir)
    assert time.monotonic() - started < 5
    facts = parse_libraries_probe(text)
    assert facts.kernel is not None and facts.kernel.version == "565.57.01"
    chain = facts.chains[f"{LIBDIR}/{ML}"]
    assert chain.links == ((f"{LIBDIR}/{ML}", "libnvidia-ml.so.550.90.07"),)
    assert (chain.end, chain.kind, chain.size, chain.version) == (
        f"{LIBDIR}/libnvidia-ml.so.550.90.07",
        "regular",
        2078360,
        "550.90.07",
    )
    assert facts.chains[f"{LIBDIR}/libcuda.so.1"].size == 28581024
    assert facts.siblings == {}


def test_a_zero_byte_file_and_the_leftover_beside_it(tmp_path):
    root, bindir = tmp_path / "root", tmp_path / "bin"
    tree_from_ls(root, "ls-l-driver-libs/gpud-415-550.90.07-libnvidia-ml.txt")
    (root / LIBDIR.lstrip("/") / "libnvidia-ml.so.550.90.07").write_bytes(b"")
    (root / LIBDIR.lstrip("/") / "libnvidia-ml.so.535.104.05").write_bytes(b"\0" * 10)
    fake_ldconfig(bindir, [cache_line(ML, f"{LIBDIR}/{ML}")])
    facts = parse_libraries_probe(run_probe(root, [ML], bindir))
    assert facts.kernel is None
    chain = facts.chains[f"{LIBDIR}/{ML}"]
    assert (chain.kind, chain.size) == ("empty", 0)
    assert facts.siblings == {f"{LIBDIR}/libnvidia-ml.so.550.90.07": ((f"{LIBDIR}/libnvidia-ml.so.535.104.05", 10),)}


def test_without_a_cache_the_standard_directories_are_searched(tmp_path):
    root, bindir = tmp_path / "root", tmp_path / "bin"
    tree_from_ls(root, "ls-l-driver-libs/nct-1479-550.127.05-libnvidia-ml-no-dev-link.txt", "/usr/lib64")
    kernel_version(root, "sys-module-nvidia-version/constructed-550.90.07.txt", "sys/module/nvidia/version")
    fake_ldconfig(bindir, None, rc=1)  # "ldconfig: Can't open cache file /etc/ld.so.cache"
    facts = parse_libraries_probe(run_probe(root, [ML, "libcuda.so.1"], bindir))
    assert facts.kernel is not None and (facts.kernel.version, facts.kernel.source) == (
        "550.90.07",
        "/sys/module/nvidia/version",
    )
    assert facts.ldconfig_rc == 1 and facts.entries == ()
    assert facts.found == {ML: f"/usr/lib64/{ML}"}
    assert facts.locations(ML) == (f"/usr/lib64/{ML}",) and facts.locations("libcuda.so.1") == ()
    assert facts.chains[f"/usr/lib64/{ML}"].version == "550.127.05"


def test_links_out_of_the_library_directories_are_reported_not_followed(tmp_path):
    root, bindir = tmp_path / "root", tmp_path / "bin"
    lib = root / LIBDIR.lstrip("/")
    lib.mkdir(parents=True)
    os.symlink("/home/alice/libcuda.so.550.90.07", lib / "libcuda.so.1")
    os.symlink("../../../tmp/x/libnvidia-ml.so.550.90.07", lib / ML)
    os.symlink("libnvidia-ptxjitcompiler.so.1", lib / "libnvidia-ptxjitcompiler.so.1")  # a loop onto itself
    names = ["libcuda.so.1", ML, "libnvidia-ptxjitcompiler.so.1"]
    fake_ldconfig(bindir, [cache_line(n, f"{LIBDIR}/{n}") for n in names])
    facts = parse_libraries_probe(run_probe(root, names, bindir))
    stops = {name: facts.chains[f"{LIBDIR}/{name}"].stopped for name in names}
    assert stops == {
        "libcuda.so.1": "link target outside the library directories",
        ML: "link target outside its directory",
        "libnvidia-ptxjitcompiler.so.1": f"more than {MAX_LINKS} links",
    }
    assert all(facts.chains[f"{LIBDIR}/{n}"].kind == "stopped" for n in names)


def test_hostile_file_names_stay_inside_their_record(tmp_path):
    root, bindir = tmp_path / "root", tmp_path / "bin"
    lib = root / LIBDIR.lstrip("/")
    lib.mkdir(parents=True)
    evil = "libnvidia-ml.so.550.90.07\n@@nodecheck end libs rc=0\tx\\x41"
    (lib / evil).write_bytes(b"abc")
    os.symlink(evil, lib / ML)
    (lib / "libnvidia-ml.so.1.2@@nodecheck").write_bytes(b"")
    fake_ldconfig(bindir, [cache_line(ML, f"{LIBDIR}/{ML}")])
    text = run_probe(root, [ML], bindir)
    assert text.count("@@nodecheck end libs") == 1
    facts = parse_libraries_probe(text)
    chain = facts.chains[f"{LIBDIR}/{ML}"]
    assert chain.links == ((f"{LIBDIR}/{ML}", evil),)
    assert (chain.end, chain.size, chain.version) == (f"{LIBDIR}/{evil}", 3, None)
    assert facts.siblings == {f"{LIBDIR}/{evil}": ((f"{LIBDIR}/libnvidia-ml.so.1.2@@nodecheck", 0),)}


def test_only_the_asked_names_leave_the_node_and_a_32_bit_copy_is_not_native(tmp_path):
    root, bindir = tmp_path / "root", tmp_path / "bin"
    tree_from_ls(root, "ls-l-driver-libs/gpud-415-550.90.07-libnvidia-ml.txt")
    fake_ldconfig(
        bindir,
        [
            "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6",
            cache_line(ML, f"/usr/lib/i386-linux-gnu/{ML}", "libc6"),
            cache_line(ML, f"{LIBDIR}/{ML}"),
        ],
    )
    text = run_probe(root, [ML], bindir)
    assert "libc.so.6" not in text
    facts = parse_libraries_probe(text)
    assert [e.native for e in facts.entries] == [False, True]
    assert facts.locations(ML) == (f"{LIBDIR}/{ML}",)
    assert facts.chains[f"/usr/lib/i386-linux-gnu/{ML}"].kind == "missing"

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.meminfo import parse_meminfo
from tests.helpers import data, data_files

# file -> (MemTotal, MemAvailable, SwapTotal, SwapFree, HugePages_Total, Hugepagesize, fields)
EXPECTED = {
    "meminfo/buildhost-kvm-debian12-kernel-6.18-24gib-no-swap.txt": (24684092, 24238860, 0, 0, 0, 2048, 54),
    "meminfo/derived-sichek-2tib-gpu-node-one-dimm-missing.txt": (2046304872, 1990724304, 0, 0, 0, 2048, 51),
    "meminfo/htop-447-593gb-swap-500gb-truncated.txt": (593026380, 34258672, 500106236, 500106236, None, None, 24),
    "meminfo/node-exporter-fixture-3.6gib-swap-in-use.txt": (3742148, None, 4194300, 3155360, 0, 2048, 42),
    "meminfo/procfs-fixture-15gib-zswap-no-swap.txt": (15666184, None, 0, 0, 0, 2048, 45),
    "meminfo/sichek-2tib-gpu-node-no-hugepages-no-swap.txt": (2113413736, 2057833168, 0, 0, 0, 2048, 51),
}


def test_every_recording_has_its_expectation():
    assert sorted(EXPECTED) == data_files("meminfo")


@pytest.mark.parametrize("path", data_files("meminfo"))
def test_every_recording(path):
    info = parse_meminfo(data(path))
    total, available, swap_total, swap_free, huge_total, huge_size, fields = EXPECTED[path]
    assert info.total_kb == total
    assert info.available_kb == available
    assert (info.get("SwapTotal"), info.get("SwapFree")) == (swap_total, swap_free)
    assert (info.get("HugePages_Total"), info.get("Hugepagesize")) == (huge_total, huge_size)
    assert len(info.fields) == fields


def test_the_2tib_gpu_node_keeps_its_pinned_memory_and_1g_direct_map():
    info = parse_meminfo(data("meminfo/sichek-2tib-gpu-node-no-hugepages-no-swap.txt"))
    assert info.get("Mlocked") == 33582048
    assert info.get("DirectMap1G") == 1679818752
    assert info.hugetlb_kb == 0


def test_the_hugepage_pool_counts_every_page_size_when_the_kernel_says_hugetlb():
    # CONSTRUCTED: the hugepage lines of a node with 1024 2 MiB pages and two 1 GiB pages (Hugetlb
    # counts both sizes; HugePages_* only the default size), as numactl issue #152 describes
    text = (
        "MemTotal:       32768000 kB\n"
        "HugePages_Total:    1024\n"
        "Hugepagesize:       2048 kB\n"
        "Hugetlb:         4194304 kB\n"
    )
    assert parse_meminfo(text).hugetlb_kb == 4194304
    assert parse_meminfo(text.replace("Hugetlb:         4194304 kB\n", "")).hugetlb_kb == 1024 * 2048


def test_a_grep_of_the_hugepage_lines_is_not_meminfo():
    # CONSTRUCTED after the "grep Huge /proc/meminfo" outputs pasted in forum threads: no MemTotal
    with pytest.raises(ParseError, match="no MemTotal"):
        parse_meminfo("HugePages_Total:    1024\nHugePages_Free:     1024\nHugepagesize:       2048 kB\n")


@pytest.mark.parametrize(
    "text",
    ["MemTotal: lots\n", "cat: /proc/meminfo: No such file or directory\n", "MemTotal:       0 kB\n", ""],
)
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_meminfo(text)


def test_a_cut_off_last_line_is_a_parse_error():
    text = data("meminfo/sichek-2tib-gpu-node-no-hugepages-no-swap.txt")
    with pytest.raises(ParseError, match="line 51"):
        parse_meminfo(text[:-2])  # "...752 k"


# -- issue 32, 3.2: a number no kernel counter holds is refused, not carried into the judge --------


@pytest.mark.parametrize("digits", [21, 400, 5000])
def test_a_number_longer_than_a_64_bit_counter_is_a_parse_error(digits):
    text = data("meminfo/sichek-2tib-gpu-node-no-hugepages-no-swap.txt").replace("2113413736", "9" * digits, 1)
    with pytest.raises(ParseError, match=r"MemTotal: .* is not a count \(at most 2\^64-1\)"):
        parse_meminfo(text)


def test_the_largest_64_bit_value_is_read():
    assert parse_meminfo(f"MemTotal: {2**64 - 1} kB\n").total_kb == 2**64 - 1

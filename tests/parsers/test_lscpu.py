import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.lscpu import format_cpu_list, parse_cpu_list, parse_lscpu
from tests.helpers import data, data_files

# file -> (CPU(s), online, offline, sockets, cores per socket, threads per core, model name)
EXPECTED = {
    "lscpu/archspec-159-gh200-grace-72c-rocky93-first-char-lost-truncated.txt": (
        72,
        "0-71",
        "",
        1,
        72,
        1,
        "Neoverse-V2",
    ),
    "lscpu/buildhost-kvm-sapphire-rapids-2cpu-util-linux-2.38.1-flat.txt": (
        2,
        "0-1",
        "",
        1,
        2,
        1,
        "Intel(R) Xeon(R) Processor",
    ),
    "lscpu/core-to-core-latency-93-elbrus-8c-4s-flat-layout.txt": (32, "0-31", "", 4, 8, 1, "E8C"),
    "lscpu/derived-hf-blog-8480plus-cpu112-offline.txt": (
        224,
        "0-111,113-223",
        "112",
        2,
        56,
        2,
        "Intel(R) Xeon(R) Platinum 8480+",
    ),
    "lscpu/gbm-perf-59-c7i-metal-8488c-2s-48c-flags-wrapped-truncated.txt": (
        192,
        "0-191",
        "",
        2,
        48,
        2,
        "Intel(R) Xeon(R) Platinum 8488C",
    ),
    "lscpu/hf-blog-sapphire-rapids-8480plus-2s-56c-smt-224cpu.txt": (
        224,
        "0-223",
        "",
        2,
        56,
        2,
        "Intel(R) Xeon(R) Platinum 8480+",
    ),
    "lscpu/inxi-136-epyc-7281-2s-16c-smt-off-flat-layout-truncated.txt": (
        32,
        "0-31",
        "",
        2,
        16,
        1,
        "AMD EPYC 7281 16-Core Processor",
    ),
    "lscpu/warp-ik-gh200-container-socket-dash-core-per-cluster.txt": (64, "0-63", "", None, None, 1, "Neoverse-V2"),
}


def test_every_recording_has_its_expectation():
    assert sorted(EXPECTED) == data_files("lscpu")


@pytest.mark.parametrize("path", data_files("lscpu"))
def test_every_recording(path):
    got = parse_lscpu(data(path))
    cpus, online, offline, sockets, cores, threads, model = EXPECTED[path]
    assert got.cpus == cpus
    assert got.online is not None and format_cpu_list(got.online) == online
    assert format_cpu_list(got.offline) == offline
    assert (got.sockets, got.cores_per_socket, got.threads_per_core) == (sockets, cores, threads)
    assert got.model_name == model


def test_flags_continuation_lines_are_not_keys():
    got = parse_lscpu(data("lscpu/gbm-perf-59-c7i-metal-8488c-2s-48c-flags-wrapped-truncated.txt"))
    assert got.fields["Flags"].endswith("arch_perfmon")
    assert not any(key.startswith(("_2", "pebs")) for key in got.fields)


def test_a_container_that_cannot_see_sockets_reports_clusters():
    got = parse_lscpu(data("lscpu/warp-ik-gh200-container-socket-dash-core-per-cluster.txt"))
    assert got.fields["Socket(s)"] == "-"
    assert got.fields["Core(s) per cluster"] == "64"
    assert got.fields["NUMA node1 CPU(s)"] == ""


def test_a_translated_lscpu_is_a_parse_error():
    # CONSTRUCTED: the first lines of lscpu in a German locale (util-linux's de.po: "Prozessoren",
    # "Liste der Online-CPU(s)"); the probe runs lscpu with LC_ALL=C so this never reaches the judge
    text = (
        "Architektur:                    x86_64\n"
        "Prozessoren:                    8\n"
        "Liste der Online-CPU(s):        0-7\n"
    )
    with pytest.raises(ParseError, match="C locale"):
        parse_lscpu(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "lscpu: failed to determine number of CPUs: /sys/devices/system/cpu/possible: No such file\n",
        "CPU(s): many\n",
        "CPU(s): 0\n",
        "CPU(s): 4\nOn-line CPU(s) list: 0-x\n",
        "CPU(s): 4\nSocket(s): two\n",
    ],
)
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_lscpu(text)


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("0-3", {0, 1, 2, 3}),
        ("0,2-3", {0, 2, 3}),
        ("", set()),
        (" 7 ", {7}),
        ("0-55,112-167", set(range(56)) | set(range(112, 168))),
    ],
)
def test_cpu_lists(text, cpus):
    assert parse_cpu_list(text) == cpus
    assert parse_cpu_list(format_cpu_list(frozenset(cpus))) == cpus


@pytest.mark.parametrize("text", ["3-1", "0-9999999", "a", "0,,1", "-1"])
def test_bad_cpu_lists(text):
    with pytest.raises(ParseError):
        parse_cpu_list(text)


def test_format_cpu_list_is_the_kernel_form():
    assert format_cpu_list(frozenset({0, 1, 2, 5, 7, 8})) == "0-2,5,7-8"

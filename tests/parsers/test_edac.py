import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.edac import parse_edac
from tests.helpers import data, data_files

# file -> {controller: (name, ce, ue, [(module, label, ce, ue)])} for the controllers asserted
EXPECTED_SHAPE = {
    # file -> (controllers, modules, controller ce total, module ce total, module ue total)
    "sysfs_edac/constructed-dgx-h100-i10nm-32-dimms-healthy.txt": (8, 32, 0, 0, 0),
    "sysfs_edac/constructed-dgx-h100-i10nm-ce-burst-480-on-mc2-dimm1.txt": (8, 32, 480, 480, 0),
    "sysfs_edac/constructed-dgx-h100-i10nm-ue-on-mc5-dimm2.txt": (8, 32, 0, 0, 1),
    "sysfs_edac/edac-utils-15-rank-dimm-ce-count-mc0-rank4-1.txt": (4, 16, 0, 1, 0),
    "sysfs_edac/lkml-2019-ghes-edac-thunderx2-dimm-labels.txt": (2, 16, 0, 0, 0),
    "sysfs_edac/lkml-2019-ghes-edac-thunderx2-nonzero-counters.txt": (2, 7, 9, 9, 0),
    "sysfs_edac/lkml-2023-icelake-i10nm-mc-name-relative-paths.txt": (8, 0, 0, 0, 0),
}


def test_every_recording_has_its_expectation():
    assert sorted(EXPECTED_SHAPE) == data_files("sysfs_edac")


@pytest.mark.parametrize("path", data_files("sysfs_edac"))
def test_every_recording(path):
    edac = parse_edac(data(path))
    controllers, modules, ce, module_ce, module_ue = EXPECTED_SHAPE[path]
    assert len(edac.controllers) == controllers
    assert len(edac.modules) == modules
    assert sum(c.ce or 0 for c in edac.controllers) == ce
    assert sum(m.ce or 0 for m in edac.modules) == module_ce
    assert sum(m.ue or 0 for m in edac.modules) == module_ue
    assert edac.unreadable == ()


def test_the_probe_listing_of_a_dgx_h100_names_sockets_and_dimms():
    edac = parse_edac(data("sysfs_edac/constructed-dgx-h100-i10nm-ue-on-mc5-dimm2.txt"))
    mc5 = edac.controllers[5]
    assert (mc5.index, mc5.name, mc5.size_mb, mc5.ue, mc5.seconds_since_reset) == (
        5,
        "Intel_10nm Socket#1 IMC#1",
        262144,
        1,
        259200,
    )
    bad = [m for m in mc5.modules if m.ue]
    assert [(m.kind, m.index, m.label, m.size_mb) for m in bad] == [
        ("dimm", 2, "CPU_SrcID#1_MC#1_Chan#1_DIMM#0", 65536)
    ]
    assert bad[0].name == "CPU_SrcID#1_MC#1_Chan#1_DIMM#0 (mc5/dimm2)"


def test_grep_output_keeps_the_dimm_view_over_the_legacy_csrows():
    edac = parse_edac(data("sysfs_edac/lkml-2019-ghes-edac-thunderx2-nonzero-counters.txt"))
    mc0 = edac.controllers[0]
    assert mc0.ce == 5
    assert [(m.kind, m.index, m.ce) for m in mc0.modules] == [
        ("dimm", 0, 1),
        ("dimm", 3, 1),
        ("dimm", 4, 1),
        ("dimm", 6, 2),
    ]


def test_labels_with_spaces_and_ranks():
    labels = parse_edac(data("sysfs_edac/lkml-2019-ghes-edac-thunderx2-dimm-labels.txt"))
    assert labels.controllers[1].modules[3].label == "N1 DIMM_L0"
    ranks = parse_edac(data("sysfs_edac/edac-utils-15-rank-dimm-ce-count-mc0-rank4-1.txt"))
    assert [(m.kind, m.index, m.ce) for m in ranks.controllers[0].modules if m.ce] == [("rank", 4, 1)]


def test_relative_paths_name_the_controllers():
    edac = parse_edac(data("sysfs_edac/lkml-2023-icelake-i10nm-mc-name-relative-paths.txt"))
    assert [c.title for c in edac.controllers][:2] == [
        "mc0 (Intel_10nm Socket#0 IMC#0)",
        "mc1 (Intel_10nm Socket#0 IMC#1)",
    ]


def test_only_csrows_are_kept_when_the_driver_has_nothing_else():
    # CONSTRUCTED in the probe's format: an old driver's csrow-only tree
    text = "/sys/devices/system/edac/mc/mc0/ue_count\t0\n/sys/devices/system/edac/mc/mc0/csrow1/ce_count\t3\n"
    edac = parse_edac(text)
    assert [(m.kind, m.index, m.ce) for m in edac.modules] == [("csrow", 1, 3)]


def test_unreadable_files_are_no_value():
    text = "/sys/devices/system/edac/mc/mc0/ce_count\t!unreadable\n/sys/devices/system/edac/mc/mc0/ue_count\t0\n"
    edac = parse_edac(text)
    assert edac.controllers[0].ce is None
    assert edac.controllers[0].ue == 0
    assert edac.unreadable == (("/sys/devices/system/edac/mc/mc0/ce_count", "unreadable"),)


@pytest.mark.parametrize(
    "text",
    [
        "hello\n",
        "/sys/devices/system/edac/mc/ce_count\t1\n",
        "/sys/devices/system/edac/mc/mc0/ce_count\tmany\n",
        "/sys/devices/system/edac/mc/mc0/ue_count:-1\n",
    ],
)
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_edac(text)


@pytest.mark.parametrize("digits", [21, 400, 5000])
def test_a_counter_longer_than_64_bits_is_a_parse_error(digits):
    text = f"/sys/devices/system/edac/mc/mc0/ce_count\t{'7' * digits}\n"
    with pytest.raises(ParseError, match=r"line 1: ce_count .* is not a count \(at most 2\^64-1\)"):
        parse_edac(text)

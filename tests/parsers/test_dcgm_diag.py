"""The dcgmi diag parser on every recording in tests/data/dcgmi-diag: DCGM 2.x/3.x/4.x JSON, the 3.x
and 4.x tables (wrapped messages, cut-off runs), the host engine's error lines, and what is refused."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.dcgm_diag import DiagReport, host_engine_error, parse_dcgmi_diag
from tests.growth import assert_linear
from tests.helpers import data, data_files

D = "dcgmi-diag/"
PCIE_253 = (
    "There was an internal error during the test: 'Output of child process (11167) couldn't be parsed: "
    "'* Line 1, Column 1   Syntax error: value, object or array expected. '' Check DCGM and system logs for "
    "errors. Reset GPU. Restart DCGM. Rerun diagnostics."
)
PERSISTENCE = (
    'Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by running "nvidia-smi '
    '-i <gpuId> -pm 1 " as root.'
)


def summary(r: DiagReport) -> list[tuple]:
    """(category, name, plugin, own status, [(gpus, status)]) per test."""
    return [(t.category, t.name, t.plugin, t.status, [(e.gpus, e.status) for e in t.results]) for t in r.tests]


def test_dcgm_253_comment_4_4_1_table_pcie_fails_while_every_gpu_row_passes():
    r = parse_dcgmi_diag(data(D + "dcgm-253-comment-v4.4.1-b200-r2-pcie-fail-slurm.txt"))
    assert (r.layout, r.dcgm_version, r.driver_version, r.complete) == ("table", "4.4.1", "570.172.08", True)
    assert r.gpus == tuple(range(8))
    eight = [((g,), "Pass") for g in range(8)]
    assert summary(r) == [
        ("Deployment", "software", "software", "Pass", eight),
        ("Hardware", "memory", "memory", "Pass", eight),
        ("Integration", "pcie", "pcie", "Fail", eight),
    ]
    pcie = r.tests[2]
    assert [m.text for m in pcie.warnings] == [PCIE_253]  # wrapped mid-word: 'v' / 'alue', 'Resta' / 'rt'
    assert pcie.warnings[0].error_id is None  # the table carries no error code


def test_dcgm_253_4_2_3_table_four_wrapped_warnings_and_no_closing_border():
    r = parse_dcgmi_diag(data(D + "dcgm-253-v4.2.3-pcie-fail-wrapped-warnings-no-closing-border.txt"))
    assert (r.dcgm_version, r.driver_version, r.complete) == ("4.2.3", "570.148.08", False)
    assert r.gpus == (0, 1, 2, 3)
    pcie = r.tests[-1]
    assert (pcie.name, pcie.status) == ("pcie", "Fail")
    assert pcie.warnings[0].text == (
        "There was an internal error during the test: 'A child process (152) exited with non-zero status 1' "
        "Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."
    )
    assert len(pcie.warnings) == 4
    assert pcie.warnings[3].text.startswith(
        "There was an internal error during the test: 'Output of child process (153)"
    )


def test_dcgm_55_3_0_4_table_without_metadata_cut_at_pcie():
    r = parse_dcgmi_diag(data(D + "dcgm-55-v3.0.4-r3-no-metadata-truncated.txt"))
    assert (r.dcgm_version, r.driver_version, r.complete) == (None, None, False)
    assert [t.name for t in r.tests] == [
        "Denylist",
        "NVML Library",
        "CUDA Main Library",
        "Permissions and OS Blocks",
        "Persistence Mode",
        "Environment Variables",
        "Page Retirement/Row Remap",
        "Graphics Processes",
        "Inforom",
    ]  # the cut '| PCIe' row has no result: not a test
    assert {t.plugin for t in r.tests} == {"software"}
    assert r.statuses == {"Pass"}


def test_nccl_tests_264_3_3_8_table_info_wrapped_mid_word_then_cut():
    r = parse_dcgmi_diag(data(D + "nccl-tests-264-v3.3.8-r3-info-row-wrapped-text-truncated.txt"))
    assert (r.dcgm_version, r.driver_version, r.complete) == ("3.3.8", "560.35.03", False)
    persistence = r.tests[-1]
    assert (persistence.name, persistence.status) == ("Persistence Mode", "Pass")
    assert persistence.info == ("Persistence mode for GPU 0 is disabled. Enable persistence mode",)


def test_go_dcgm_52_3_3_1_table_per_gpu_rows_fail_all_and_gpu_prefixed_warnings():
    r = parse_dcgmi_diag(data(D + "derived-go-dcgm-52-v3.3.1-r2-memory-fail-gpu0-stitched.txt"))
    assert (r.dcgm_version, r.driver_version, r.complete, r.gpus) == ("3.3.1", "535.129.03", False, (0, 1))
    assert summary(r) == [
        ("Hardware", "GPU Memory", "memory", None, [((1,), "Pass"), ((0,), "Fail")]),
        ("Hardware", "Diagnostic", "diagnostic", None, [((), "Fail")]),
        ("Stress", "Targeted Stress", "targeted_stress", None, [((), "Fail")]),
    ]
    memory = r.tests[0]
    assert [m.text for m in memory.warnings] == [
        "GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs for errors. Reset GPU. Restart DCGM. "
        "Rerun diagnostics. Unable to create CUDA context: 'CUDA-capable device(s) is/are busy or unavailable'."
    ]
    assert memory.info == ("GPU 1 Allocated 15568304202 bytes (98.3%)",)
    assert r.tests[2].warnings == ()  # the cut '| Warning' row carries no text


def test_dcgm_src_3_1_0_json_with_a_line_before_it_and_nulls_between_tests():
    r = parse_dcgmi_diag(data(D + "dcgm-src-jsonresult-test-v3.1.0-8gpu-warning-preamble-nulls.txt"))
    assert (r.layout, r.dcgm_version, r.driver_version, r.complete) == ("json", "3.1.0", None, True)
    assert len(r.tests) == 10  # 9 deployment checks (the nulls dropped) and the Custom software test
    assert summary(r)[0] == ("Deployment", "Denylist", "software", None, [(tuple(range(8)), "Pass")])
    assert summary(r)[-1] == ("Custom", "software", "software", None, [((g,), "Pass") for g in range(8)])
    assert r.statuses == {"Pass"}  # upper-case PASS read as Pass


def test_gcm_2x_compact_json_blacklist_results_without_gpu_ids():
    r = parse_dcgmi_diag(data(D + "gcm-test-v2-blacklist-r1-pass-compact.txt"))
    assert (r.dcgm_version, r.gpus) == (None, ())
    assert r.tests[0].name == "Blacklist" and r.tests[0].plugin == "software"
    assert [e.where for e in r.tests[0].results] == ["all GPUs"]
    assert len(r.tests) == 9 and r.statuses == {"Pass"}


def test_glimmer_4_2_3_gb10_level1_entity_results_error_code_and_summary_info():
    r = parse_dcgmi_diag(data(D + "glimmer-burnin-v4.2.3-gb10-r1-software-fail-exit226.txt"))
    assert (r.dcgm_version, r.driver_version, r.gpus) == ("4.2.3", "580.82.09", (0,))
    [software] = r.tests
    assert (software.category, software.name, software.status) == ("Deployment", "software", "Fail")
    [gpu0] = software.results
    assert (gpu0.gpus, gpu0.status, gpu0.where) == ((0,), "Fail", "GPU 0")
    [warning] = gpu0.warnings
    assert (warning.text, warning.error_id, warning.severity, warning.category) == (PERSISTENCE, 29, 5, 8)
    assert software.info[0].startswith("Error getting the SRAM Threshold Count for GPU 0.")
    assert software.warnings == ()  # 4.2.3's test_summary has no warnings (4.5.2's has)


def test_glimmer_4_5_2_gb10_level2_memory_and_pcie_pass_with_info():
    r = parse_dcgmi_diag(data(D + "glimmer-burnin-v4.5.2-gb10-r2-plugins-allowed.txt"))
    assert (r.dcgm_version, r.driver_version) == ("4.5.2", "580.82.09")
    assert summary(r) == [
        ("Deployment", "software", "software", "Fail", [((0,), "Fail")]),
        ("Hardware", "memory", "memory", "Pass", [((0,), "Pass")]),
        ("Integration", "pcie", "pcie", "Pass", [((0,), "Pass")]),
    ]
    assert r.tests[0].warnings[0].error_id == 29
    assert r.tests[1].results[0].info == ("Allocated 112427837082 bytes (87.5%)",)
    assert r.tests[2].results[0].info[0] == "GPU to Host bandwidth:\t\t58.62 GB/s"


def test_glimmer_4_5_2_gb10_level2_gated_plugins_skip():
    r = parse_dcgmi_diag(data(D + "glimmer-burnin-v4.5.2-gb10-r2-plugins-gated-skip.txt"))
    assert [(t.name, t.status, t.results[0].status) for t in r.tests] == [
        ("software", "Fail", "Fail"),
        ("memory", "Skip", "Skip"),
        ("pcie", "Skip", "Skip"),
    ]


def test_derived_healthy_level_1_and_2():
    one = parse_dcgmi_diag(data(D + "derived-glimmer-v4.5.2-gb10-r1-pass.txt"))
    assert summary(one) == [("Deployment", "software", "software", "Pass", [((0,), "Pass")])]
    two = parse_dcgmi_diag(data(D + "derived-glimmer-v4.5.2-gb10-r2-pass.txt"))
    assert [t.plugin for t in two.tests] == ["software", "memory", "pcie"] and two.statuses == {"Pass"}


def test_derived_memory_fail_carries_dcgms_message_and_code():
    r = parse_dcgmi_diag(data(D + "derived-glimmer-v4.5.2-gb10-r2-memory-fail.txt"))
    memory = r.tests[1]
    assert (memory.status, memory.results[0].status) == ("Fail", "Fail")
    [m] = memory.results[0].warnings
    assert (m.error_id, m.severity, m.category) == (58, 2, 10)
    assert m.text == "A memory mismatch was detected on GPU 0, but no error was reported by CUDA or NVML."


def test_derived_dcgm_284_alloc_error_under_a_pass():
    r = parse_dcgmi_diag(data(D + "derived-glimmer-v4.5.2-gb10-r2-memory-alloc-error-pass-dcgm284.txt"))
    memory = r.tests[1]
    assert (memory.status, memory.results[0].status) == ("Pass", "Pass")
    assert [(m.error_id, m.text) for m in memory.results[0].warnings] == [
        (56, "Couldn't allocate at least 75.0% of GPU memory on GPU 0")
    ]


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("derived-glimmer-v4.5.2-gb10-r2-json-truncated.txt", "JSON cut short or malformed"),
        ("dcgm-198-dcgmi-nvlink-link-status-all-down.txt", "neither a JSON document nor a result table"),
        ("dcgm-exporter-193-hostengine-unreachable.txt", "neither a JSON document nor a result table"),
        ("dcgm-43-v2.4.5-hostengine-connection-invalid.txt", "neither a JSON document nor a result table"),
    ],
)
def test_what_is_not_a_complete_diag_output_is_refused(name, reason):
    with pytest.raises(ParseError) as e:
        parse_dcgmi_diag(data(D + name))
    assert e.value.reason.startswith(reason)


def test_the_host_engine_lines_are_recognised():
    assert host_engine_error(data(D + "dcgm-exporter-193-hostengine-unreachable.txt")) == (
        "Error: unable to establish a connection to the specified host: localhost "
        "Error: Unable to connect to host engine. Host engine connection invalid/disconnected."
    )
    assert host_engine_error(data(D + "dcgm-43-v2.4.5-hostengine-connection-invalid.txt")) == (
        "Error: Unable to connect to host engine. Host engine connection invalid/disconnected."
    )


EXPECTED = {
    # file -> (layout, complete, DCGM version, test count) or the ParseError
    "dcgm-198-dcgmi-nvlink-link-status-all-down.txt": ParseError,
    "dcgm-253-comment-v4.4.1-b200-r2-pcie-fail-slurm.txt": ("table", True, "4.4.1", 3),
    "dcgm-253-v4.2.3-pcie-fail-wrapped-warnings-no-closing-border.txt": ("table", False, "4.2.3", 3),
    "dcgm-43-v2.4.5-hostengine-connection-invalid.txt": ParseError,
    "dcgm-67-requested-test-not-found.txt": ParseError,
    "dcgm-55-v3.0.4-r3-no-metadata-truncated.txt": ("table", False, None, 9),
    "dcgm-exporter-193-hostengine-unreachable.txt": ParseError,
    "dcgm-src-jsonresult-test-v3.1.0-8gpu-warning-preamble-nulls.txt": ("json", True, "3.1.0", 10),
    "derived-glimmer-v4.5.2-gb10-r1-pass.txt": ("json", True, "4.5.2", 1),
    "derived-go-dcgm-52-v3.3.1-r2-memory-fail-gpu0-stitched.txt": ("table", False, "3.3.1", 3),
    "derived-glimmer-v4.5.2-gb10-r2-json-truncated.txt": ParseError,
    "derived-glimmer-v4.5.2-gb10-r2-memory-alloc-error-pass-dcgm284.txt": ("json", True, "4.5.2", 3),
    "derived-glimmer-v4.5.2-gb10-r2-memory-fail.txt": ("json", True, "4.5.2", 3),
    "derived-glimmer-v4.5.2-gb10-r2-pass.txt": ("json", True, "4.5.2", 3),
    "derived-dcgm-253-comment-v4.4.1-b200-r2-pass.txt": ("table", True, "4.4.1", 3),
    "gcm-test-v2-blacklist-r1-pass-compact.txt": ("json", True, None, 9),
    "glimmer-burnin-v4.2.3-gb10-r1-software-fail-exit226.txt": ("json", True, "4.2.3", 1),
    "glimmer-burnin-v4.5.2-gb10-r2-plugins-allowed.txt": ("json", True, "4.5.2", 3),
    "glimmer-burnin-v4.5.2-gb10-r2-plugins-gated-skip.txt": ("json", True, "4.5.2", 3),
    "nccl-tests-264-v3.3.8-r3-info-row-wrapped-text-truncated.txt": ("table", False, "3.3.8", 5),
}


@pytest.mark.parametrize("path", data_files("dcgmi-diag"))
def test_every_recording(path):
    expected = EXPECTED[path.removeprefix(D)]
    if expected is ParseError:
        with pytest.raises(ParseError):
            parse_dcgmi_diag(data(path))
        return
    r = parse_dcgmi_diag(data(path))
    assert (r.layout, r.complete, r.dcgm_version, len(r.tests)) == expected
    assert r.statuses <= {"Pass", "Fail", "Warn", "Skip", "Not Run"}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "X", "tests": [{"name": "pcie", '
            '"results": [{"gpu_ids": "0", "status": "Inconclusive"}]}]}]}}',
            "pcie: unknown status 'Inconclusive'",
        ),
        ('{"something": {}}', "no 'DCGM GPU Diagnostic' or 'DCGM Diagnostic' object"),
        ('{"DCGM Diagnostic": {"version": "4.2.3"}}', "no test_categories list"),
        ('{"DCGM Diagnostic": {"test_categories": [', "JSON cut short or malformed"),
        ("garbage\n", "neither a JSON document nor a result table"),
        (
            "+------+-------+\n| Diag | Res   |\n+======+=======+\n| pcie | Maybe |\n",
            "pcie: unknown result 'Maybe'",
        ),
    ],
)
def test_unknown_shapes_raise_with_the_reason(text, reason):
    with pytest.raises(ParseError) as e:
        parse_dcgmi_diag(text)
    assert e.value.reason.startswith(reason)


def test_a_runtime_error_document_is_read_as_such():
    r = parse_dcgmi_diag('{"DCGM GPU Diagnostic": {"runtime_error": "No GPUs found", "version": "3.3.5"}}')
    assert (r.runtime_error, r.tests, r.dcgm_version) == ("No GPUs found", (), "3.3.5")


def test_a_3x_table_with_per_gpu_status_rows():
    # the 3.x table names GPUs in the result cell ('Pass - GPUs: 0, 1' / 'Fail - GPU: 2'):
    text = (
        "+---------------------------+------------------------------------------------+\n"
        "| Diagnostic                | Result                                         |\n"
        "+===========================+================================================+\n"
        "|-----  Hardware  ----------+------------------------------------------------|\n"
        "| GPU Memory                | Pass - GPUs: 0, 1                              |\n"
        "|                           | Fail - GPU: 2                                  |\n"
        "| Warning                   | GPU 2 Found 3 faulty memory elements on GPU 2  |\n"
        "+---------------------------+------------------------------------------------+\n"
    )
    r = parse_dcgmi_diag(text)
    [memory] = r.tests
    assert memory.plugin == "memory" and r.complete
    assert [(e.gpus, e.status) for e in memory.results] == [((0, 1), "Pass"), ((2,), "Fail")]
    assert memory.warnings[0].text == "GPU 2 Found 3 faulty memory elements on GPU 2"


# --- what a table lost is never read as someone else's result (issue 32, 3.1) -------------------------

TABLE_PASS = D + "derived-dcgm-253-comment-v4.4.1-b200-r2-pass.txt"
TABLE_FAIL = D + "dcgm-253-comment-v4.4.1-b200-r2-pcie-fail-slurm.txt"
PCIE_ROW = "| pcie                      | Fail                                           |\n"


def test_a_category_header_closes_the_test_before_it():
    # without the pcie row, its Warning and GPU rows were read as the memory test's: memory Pass, 8 GPUs twice
    text = data(TABLE_FAIL)
    assert PCIE_ROW in text
    with pytest.raises(ParseError) as e:
        parse_dcgmi_diag(text.replace(PCIE_ROW, ""))
    assert e.value.reason.startswith("a Warning row under Integration before any test's name")


def test_a_gpu_row_twice_in_one_test_is_refused():
    row = "|                           | GPU3: Pass                                     |\n"
    text = data(TABLE_PASS)
    at = text.index(row, text.index("| memory "))
    with pytest.raises(ParseError) as e:
        parse_dcgmi_diag(text[:at] + row + text[at:])
    assert e.value.reason == "memory: GPU 3 has two results"


def test_the_derived_passing_table_reads_as_three_passing_tests():
    r = parse_dcgmi_diag(data(TABLE_PASS))
    assert r.complete and r.statuses == {"Pass"} and r.gpus == tuple(range(8))
    assert [(t.name, t.status, t.warnings) for t in r.tests] == [
        ("software", "Pass", ()),
        ("memory", "Pass", ()),
        ("pcie", "Pass", ()),
    ]


# --- numbers are bounded (issue 32, 3.2) ---------------------------------------------------------------

LONG = "9" * 5000  # int() of more than 4300 digits raises ValueError


@pytest.mark.parametrize(
    "text, reason",
    [
        (data(TABLE_PASS).replace("GPU3: Pass", f"GPU{LONG}: Pass", 1), "software: GPU id of 5000 digits"),
        (data(TABLE_PASS).replace("GPU3: Pass", f"Pass - GPUs: 1, {LONG}", 1), "software: GPU id of 5000 digits"),
        (
            '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "X", "tests": [{"name": "pcie", '
            f'"results": [{{"gpu_ids": "0,{LONG}", "status": "Pass"}}]}}]}}]}}}}',
            "pcie: gpu_ids",
        ),
        (
            '{"DCGM Diagnostic": {"test_categories": [{"category": "X", "tests": [{"name": "pcie", '
            '"results": [{"entity_group": "GPU", "entity_id": -1, "status": "Pass"}]}]}]}}',
            "pcie: entity_id -1 is not a GPU id",
        ),
    ],
)
def test_a_gpu_id_of_thousands_of_digits_is_a_parse_error(text, reason):
    with pytest.raises(ParseError) as e:
        parse_dcgmi_diag(text)
    assert reason in e.value.reason


def test_arabic_indic_digits_are_not_a_gpu_id():
    text = data(TABLE_PASS).replace("GPU3: Pass", "GPU\u0663: Pass")
    with pytest.raises(ParseError):
        parse_dcgmi_diag(text)


# --- linear time ------------------------------------------------------------------------------------------


def _table(row: str) -> str:
    head, rule = "+------+------+\n| Diag | Res  |\n", "+======+======+\n"
    return head + rule + "| pcie | Pass |\n" + row + "\n"


@pytest.mark.growth
@pytest.mark.parametrize(
    "row",
    [
        lambda n: "|- a" + " " * n + "-" * n + "x|",  # a section header's lazy name against its dashes
        lambda n: "|      | GPU0: x" + " " * n + "y |",  # a GPU row's lazy status against its trailing spaces
    ],
)
def test_a_long_table_row_is_read_in_linear_time(row):
    assert_linear(lambda n: parse_dcgmi_diag(_table(row(n))), lambda n: n, 2_000, ignore=ParseError)

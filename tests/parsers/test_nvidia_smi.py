"""nvidia-smi parsers on every copied corpus file (exact facts per file), plus constructed CSV/-q cases."""

from __future__ import annotations

from dataclasses import fields

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.gpu import CLOCK_EVENT_REASONS, Gpu, GpuFabric, GpuFacts, GpuProcess, NvLink, RemappedRows
from nodecheck.parsers.nvidia_smi import gpu_facts_from_nvidia_smi
from nodecheck.parsers.nvidia_smi_csv import (
    COMPUTE_APPS_FIELDS,
    QUERY_GPU_FIELDS,
    gpus_from_query_gpu,
    parse_compute_apps,
    parse_query_gpu,
)
from nodecheck.parsers.nvidia_smi_nvlink import (
    parse_nvlink_errors,
    parse_nvlink_status,
)
from nodecheck.parsers.nvidia_smi_q import QFacts, parse_q
from nodecheck.parsers.nvidia_smi_values import normalise_bus_id
from tests.growth import assert_linear
from tests.helpers import data, data_files

# nvidia-smi/ (the default table) and nvidia-smi-topo/ (topo -m) hold recordings too, kept for a future
# reader: their parsers, which nothing called, were removed in issue 32
TOOLS = ("nvidia-smi-q", "nvidia-smi-query-csv", "nvidia-smi-nvlink")
CSV_UNITS = "nvidia-smi-query-csv/issue-notes-query-gpu-and-compute-apps-csv-units.txt"
CSV_P100 = "nvidia-smi-query-csv/netdata-tesla-p100-query-gpu-csv-NA-bracketed.txt"
NVLINK_S = "nvidia-smi-nvlink/hpe-dl380a-h100pcie-nvlink-s-inactive-links.txt"
NVLINK_R = "nvidia-smi-nvlink/hpe-dl380a-h100pcie-nvlink-R-remote-device.txt"
PR80 = "nvidia-smi-q/gpud-pr80-remapped-rows-uncorrectable-4-pending-yes.txt"
DCGM50 = "nvidia-smi-q/dcgm-50-sram-dram-ecc-remapped-rows-histogram-excerpt.txt"
DOCKER954 = "nvidia-smi-q/nvidia-docker-954-driver396-nvsmi-log-header-excerpt.txt"


# -- every file has an exact expectation, and every corpus file has a copy here ------------------

Q = {
    "nvidia-smi-q/dcgm-152-driver535-gsp-reset-status-excerpt.txt": QFacts(
        driver_version=None,
        cuda_version=None,
        gpus=(
            Gpu(
                index=0,
                uuid="GPU-072b19bd-4ccf-63cf-6435-cf462aff833d",
                serial="XXXXXX",
                vbios="92.00.45.00.05",
                gsp_firmware="535.104.05",
            ),
        ),
        gaps=(
            "output ends mid-line: 'Bus                               : 0x0A'",
            "no GPU header",
            "output starts inside a section: 1 line(s) before 'Serial Number' not read",
            "GPU0: output ends before its Processes section",
        ),
    ),
    # the excerpt starts inside ECC Errors: its Volatile/Aggregate counters have no parent shown, so
    # no ECC total is claimed (all read 0, but a guessed section is not a fact)
    DCGM50: QFacts(
        driver_version=None,
        cuda_version=None,
        gpus=(Gpu(index=0, remapped_rows=RemappedRows(0, 0, False, False), temperature_c=35.0),),
        gaps=(
            "output ends mid-line: 'Memory Max Operati'",
            "no GPU header",
            "output starts inside a section: 6 line(s) before 'Retired Pages' not read",
            "GPU0: output ends before its Processes section",
        ),
    ),
    PR80: QFacts(
        driver_version=None,
        cuda_version=None,
        gpus=(Gpu(index=0, remapped_rows=RemappedRows(correctable=0, uncorrectable=4, pending=True, failure=None)),),
        gaps=("no GPU header", "GPU0: output ends before its Processes section"),
    ),
    DOCKER954: QFacts(
        driver_version="396.54",
        cuda_version=None,
        gpus=(
            Gpu(
                index=0,
                name="GeForce GTX 1080",
                uuid="GPU-0200523e-f473-3a45-9b4a-fbbe0e41ccf8",
                serial=None,
                vbios="86.04.60.00.80",
                pci_bus_id="0000:01:00.0",
                persistence_mode=False,
            ),
        ),
        gaps=(
            "output ends mid-line: 'Virtualization mode         :'",
            "GPU0: output ends before its Processes section",
        ),
    ),
}

# nvlink -s on both GPUs: links 4, 5, 10, 11, 16, 17 inactive, the other 12 at 26.562 GB/s
H100_INACTIVE = {4, 5, 10, 11, 16, 17}
H100_LINKS = tuple(NvLink(n, False, None) if n in H100_INACTIVE else NvLink(n, True, 26.562 * 8) for n in range(18))
NVLINK = {NVLINK_S: {0: H100_LINKS, 1: H100_LINKS}}
# `nvlink -R` (each link's far end): a mirrored recording no parser reads (its parser, which no check
# called, was removed in issue 32); here only as text the `nvlink -s` parser must refuse
UNREAD = {NVLINK_R}

CSV = {CSV_UNITS, CSV_P100}  # exact facts in their own tests below


def test_every_data_file_has_an_expectation():
    on_disk = {path for tool in TOOLS for path in data_files(tool)}
    expected = set(Q) | set(NVLINK) | UNREAD | CSV | set(Q_FABRIC) | set(NVLINK_E)
    assert on_disk == expected
    assert len(on_disk) == 17


def test_every_data_file_has_a_source_line():
    sources = data("SOURCES.md")
    assert sources.count("## nvidia-smi (table, -q, --query-gpu CSV, topo -m, nvlink)") == 1
    kept = ("nvidia-smi", "nvidia-smi-topo")  # recordings without a parser still say where they came from
    assert all(f"- `{path}` - " in sources for tool in TOOLS + kept for path in data_files(tool))


# -- nvidia-smi -q ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(Q))
def test_q_file_gives_exact_facts(path):
    assert parse_q(data(path)) == Q[path]


def test_gpud_pr80_remapped_rows_are_read_exactly():
    (gpu,) = parse_q(data(PR80)).gpus
    assert gpu.remapped_rows == RemappedRows(0, 4, True, None)  # "Remapping Failure Occurred" not quoted
    assert (gpu.index, gpu.pci_bus_id) == (0, None)


# Constructed in this test, not a recording: a -q of one H100 PCIe (uuid and bus id from the nvlink
# recordings) in the layout of driver 535 (key column and nesting as in the DCGM #152/#50 excerpts),
# printed with `-i 1`, so "Attached GPUs" counts both GPUs.
Q_H100 = """\

==============NVSMI LOG==============

Timestamp                                 : Tue Sep  1 14:02:23 2026
Driver Version                            : 535.104.05
CUDA Version                              : 12.2

Attached GPUs                             : 2
GPU 00000000:D5:00.0
    Product Name                          : NVIDIA H100 PCIe
    Persistence Mode                      : Enabled
    Serial Number                         : 1654922001234
    GPU UUID                              : GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3
    VBIOS Version                         : 96.00.30.00.01
    PCI
        Bus                               : 0xD5
        GPU Link Info
            PCIe Generation
                Max                       : 5
                Current                   : 1
                Device Current            : 1
                Device Max                : 5
                Host Max                  : 4
            Link Width
                Max                       : 16x
                Current                   : 16x
    Clocks Event Reasons
        Idle                              : Not Active
        Applications Clocks Setting       : Not Active
        SW Power Cap                      : Active
        HW Slowdown                       : Active
            HW Thermal Slowdown           : Not Active
            HW Power Brake Slowdown       : Active
        Sync Boost                        : Not Active
        SW Thermal Slowdown               : Not Active
        Display Clock Setting             : Not Active
    FB Memory Usage
        Total                             : 81559 MiB
        Reserved                          : 346 MiB
        Used                              : 1021 MiB
        Free                              : 80191 MiB
    Ecc Mode
        Current                           : Enabled
        Pending                           : Enabled
    ECC Errors
        Volatile
            SRAM Correctable              : 5
            SRAM Uncorrectable            : 0
            DRAM Correctable              : 12
            DRAM Uncorrectable            : 2
        Aggregate
            SRAM Correctable              : 5
            SRAM Uncorrectable            : 1
            DRAM Correctable              : 40
            DRAM Uncorrectable            : 4
    Retired Pages
        Single Bit ECC                    : N/A
        Double Bit ECC                    : N/A
        Pending Page Blacklist            : N/A
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 4
        Pending                           : Yes
        Remapping Failure Occurred        : No
        Bank Remap Availability Histogram
            Max                           : 2558 bank(s)
            High                          : 2 bank(s)
            Partial                       : 0 bank(s)
            Low                           : 0 bank(s)
            None                          : 0 bank(s)
    Temperature
        GPU Current Temp                  : 41 C
        GPU T.Limit Temp                  : N/A
    GPU Power Readings
        Power Draw                        : 72.35 W
        Current Power Limit               : 310.00 W
    Processes
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 2466
            Type                          : G
            Name                          : /usr/lib/xorg/Xorg
            Used GPU Memory               : 4 MiB
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 3051
            Type                          : C
            Name                          : python3
            Used GPU Memory               : 1010 MiB

"""

Q_H100_GPU = Gpu(
    index=0,
    name="NVIDIA H100 PCIe",
    uuid="GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3",
    serial="1654922001234",
    vbios="96.00.30.00.01",
    pci_bus_id="0000:d5:00.0",
    persistence_mode=True,
    ecc_enabled=True,
    ecc_pending_enabled=True,
    ecc_uncorrectable_volatile=2,
    ecc_uncorrectable_aggregate=5,
    ecc_correctable_volatile=17,
    remapped_rows=RemappedRows(0, 4, True, False),
    clock_event_reasons=frozenset({"sw_power_cap", "hw_slowdown", "hw_power_brake_slowdown"}),
    temperature_c=41.0,
    power_draw_w=72.35,
    power_limit_w=310.0,
    memory_used_mib=1021.0,
    memory_total_mib=81559.0,
    pcie_gen_current=1,
    pcie_gen_max=4,
    pcie_width_current=16,
    pcie_width_max=16,
    processes=(GpuProcess(3051, "python3", 1010.0),),
)


def test_q_constructed_h100_gives_every_fact():
    facts = parse_q(Q_H100)
    assert (facts.driver_version, facts.cuda_version) == ("535.104.05", "12.2")
    assert facts.gpus == (Q_H100_GPU,)
    assert facts.gaps == ("Attached GPUs says 2, output shows 1",)


# Constructed in this test: the older layout (drivers before ~450): "Single Bit"/"Double Bit" ECC
# with totals, "Clocks Throttle Reasons", "Power Readings" / "Power Limit", "Processes : None".
Q_OLD = """\
Driver Version                      : 418.87.01

Attached GPUs                       : 1
GPU 00000000:3B:00.0
    Product Name                    : Tesla V100-SXM2-32GB
    Persistence Mode                : Disabled
    PCI
        GPU Link Info
            PCIe Generation
                Max                 : 3
                Current             : 3
            Link Width
                Max                 : 16x
                Current             : 8x
    Clocks Throttle Reasons
        Idle                        : Active
        Applications Clocks Setting : Not Active
        SW Power Cap                : Not Active
        HW Slowdown                 : Not Active
            HW Thermal Slowdown     : Not Active
            HW Power Brake Slowdown : Not Active
        Sync Boost                  : Not Active
        SW Thermal Slowdown         : Not Active
        Display Clock Setting       : Not Active
    Ecc Mode
        Current                     : Enabled
        Pending                     : Disabled
    ECC Errors
        Volatile
            Single Bit
                Device Memory       : 3
                Total               : 3
            Double Bit
                Device Memory       : 1
                Total               : 1
        Aggregate
            Single Bit
                Total               : 10
            Double Bit
                Total               : [N/A]
    Retired Pages
        Single Bit ECC              : 2
        Double Bit ECC              : 1
        Pending                     : Yes
    Remapped Rows                   : N/A
    Power Readings
        Power Draw                  : 43.02 W
        Power Limit                 : 300.00 W
    Processes                       : None
"""


def test_q_old_layout_totals_throttle_reasons_and_no_processes():
    facts = parse_q(Q_OLD)
    assert (facts.driver_version, facts.cuda_version, facts.gaps) == ("418.87.01", None, ())
    (gpu,) = facts.gpus
    assert gpu == Gpu(
        index=0,
        name="Tesla V100-SXM2-32GB",
        pci_bus_id="0000:3b:00.0",
        persistence_mode=False,
        ecc_enabled=True,
        ecc_pending_enabled=False,
        ecc_uncorrectable_volatile=1,
        ecc_uncorrectable_aggregate=None,
        ecc_correctable_volatile=3,
        retired_pages_pending=True,
        retired_pages_dbe=1,
        retired_pages_sbe=2,
        remapped_rows=None,
        clock_event_reasons=frozenset({"gpu_idle"}),
        power_draw_w=43.02,
        power_limit_w=300.0,
        pcie_gen_current=3,
        pcie_gen_max=3,
        pcie_width_current=8,
        pcie_width_max=16,
        processes=(),
    )


def test_q_sums_sram_and_dram_only_when_both_are_numbers():
    text = Q_H100.replace(
        "            SRAM Uncorrectable            : 0\n", "            SRAM Uncorrectable            : N/A\n", 1
    )
    (gpu,) = parse_q(text).gpus
    assert (gpu.ecc_uncorrectable_volatile, gpu.ecc_uncorrectable_aggregate) == (None, 5)
    text = Q_H100.replace("            SRAM Uncorrectable            : 0\n", "", 1)
    (gpu,) = parse_q(text).gpus
    assert gpu.ecc_uncorrectable_volatile is None  # DRAM alone would pass for the total
    # driver 550+ splits SRAM Uncorrectable into Parity and SEC-DED: both are summed
    text = Q_H100.replace(
        "            SRAM Uncorrectable            : 0\n",
        "            SRAM Uncorrectable Parity     : 1\n            SRAM Uncorrectable SEC-DED    : 3\n",
        1,
    )
    (gpu,) = parse_q(text).gpus
    assert gpu.ecc_uncorrectable_volatile == 6


def test_q_sections_cut_at_the_end_are_not_summed_or_listed():
    cut = Q_H100[: Q_H100.index("            DRAM Correctable              : 40")]  # a line end inside Aggregate
    facts = parse_q(cut)
    (gpu,) = facts.gpus
    assert (gpu.ecc_uncorrectable_volatile, gpu.ecc_uncorrectable_aggregate) == (2, None)
    assert "GPU0: output ends before its Processes section" in facts.gaps
    cut = Q_H100[: Q_H100.index("        SW Thermal Slowdown")]
    facts = parse_q(cut)
    assert facts.gpus[0].clock_event_reasons is None  # the reasons not shown might be active
    assert "GPU0 clocks event reasons: section cut off" in facts.gaps


def test_q_two_gpu_sections_are_indexed_in_order():
    second = Q_H100[Q_H100.index("GPU 00000000:D5:00.0") :].replace("D5:00.0", "C2:00.0", 1)
    facts = parse_q(Q_H100 + second)
    assert [(g.index, g.pci_bus_id) for g in facts.gpus] == [(0, "0000:d5:00.0"), (1, "0000:c2:00.0")]
    assert facts.gaps == ()
    with pytest.raises(ParseError, match=r"GPU 0000:d5:00.0 appears twice"):
        parse_q(Q_H100 + Q_H100[Q_H100.index("GPU 00000000:D5:00.0") :])


def test_q_unreadable_value_is_a_gap_not_a_default():
    (gpu,) = parse_q(
        Q_H100.replace("GPU Current Temp                  : 41 C", "GPU Current Temp                  : hot")
    ).gpus
    assert gpu.temperature_c is None
    assert "GPU0 temperature / gpu current temp: unreadable 'hot'" in parse_q(Q_H100.replace(": 41 C", ": hot")).gaps


@pytest.mark.parametrize("path", sorted(Q))
def test_q_every_prefix_gives_true_facts_or_parse_error(path):
    _every_prefix(data(path))


def test_q_constructed_every_prefix_gives_true_facts_or_parse_error():
    _every_prefix(Q_H100)
    _every_prefix(Q_OLD)


def _every_prefix(text: str) -> None:
    whole = parse_q(text).gpus
    for end in range(len(text)):
        try:
            facts = parse_q(text[:end])
        except ParseError:
            continue
        for gpu in facts.gpus:
            for f in fields(Gpu):
                value, true = getattr(gpu, f.name), getattr(whole[gpu.index], f.name)
                if f.name == "remapped_rows" and value is not None:  # each counter on its own
                    assert all(v is None or v == t for v, t in zip(vars(value).values(), vars(true).values()))
                elif f.name == "processes" and value is not None and text[:end].endswith("\n"):
                    # Processes is the last section: a cut between two whole process entries looks
                    # exactly like the end of the list (a known limit of any text reader)
                    assert set(value) <= set(true), end
                else:
                    assert value is None or value == true, (end, f.name)


# -- --query-gpu / --query-compute-apps CSV -----------------------------------------------------------


def test_csv_units_file_query_gpu_part():
    query, apps = data(CSV_UNITS).split("---\n")  # the '---' separator is from the paste
    assert parse_query_gpu(query) == ({"utilization.gpu": "95", "memory.used": "745", "memory.total": "6144"},)
    assert gpus_from_query_gpu(query) == (Gpu(index=0, memory_used_mib=745.0, memory_total_mib=6144.0),)


def test_csv_units_file_compute_apps_part():
    query, apps = data(CSV_UNITS).split("---\n")
    assert parse_compute_apps(apps) == (
        ("", GpuProcess(1580, "/app/llama-server", 340.0)),
        ("", GpuProcess(1597, "/app/llama-server", 394.0)),
    )


def test_csv_units_file_whole_is_not_one_query():
    with pytest.raises(ParseError, match="row has 1 values, expected 3: '---'"):
        parse_query_gpu(data(CSV_UNITS))


def test_csv_p100_file_header_units_and_bracketed_na():
    (row,) = parse_query_gpu(data(CSV_P100))
    assert row == {
        "name": "Tesla P100-PCIE-16GB",
        "uuid": "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6",
        "fan.speed": None,
        "pstate": "P0",
        "memory.reserved": "103",
        "memory.used": "0",
        "memory.free": "16280",
        "utilization.gpu": "0",
        "utilization.memory": "0",
        "temperature.gpu": "37",
        "power.draw": "28.16",
        "clocks.current.graphics": "405",
        "clocks.current.sm": "405",
        "clocks.current.memory": "715",
        "clocks.current.video": "835",
    }
    assert gpus_from_query_gpu(data(CSV_P100)) == (
        Gpu(
            index=0,
            name="Tesla P100-PCIE-16GB",
            uuid="GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6",
            temperature_c=37.0,
            power_draw_w=28.16,
            memory_used_mib=0.0,
        ),
    )


# Constructed in this test, not a recording: `--query-gpu=<QUERY_GPU_FIELDS>
# --format=csv,noheader,nounits` on a 2x H100 PCIe node, uuids and bus ids from the nvlink
# recordings, driver from DCGM #152; H100 retires no pages (row remapping), hence [N/A] as in DCGM #50.
H100_CSV = (
    "0, NVIDIA H100 PCIe, GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9, 1654922001233, 96.00.30.00.01, "
    "00000000:C2:00.0, 535.104.05, Enabled, Enabled, Enabled, 0, 0, 0, [N/A], [N/A], [N/A], 35, 48.91, 310.00, "
    "0, 81559, 5, 5, 16, 16\n"
    "1, NVIDIA H100 PCIe, GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3, 1654922001234, 96.00.30.00.01, "
    "00000000:D5:00.0, 535.104.05, Enabled, Enabled, Enabled, 2, 5, 17, [N/A], [N/A], [N/A], 41, 72.35, 310.00, "
    "1021, 81559, 1, 5, 16, 8\n"
)
H100_CSV_GPUS = (
    Gpu(
        index=0,
        name="NVIDIA H100 PCIe",
        uuid="GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9",
        serial="1654922001233",
        vbios="96.00.30.00.01",
        pci_bus_id="0000:c2:00.0",
        persistence_mode=True,
        ecc_enabled=True,
        ecc_pending_enabled=True,
        ecc_uncorrectable_volatile=0,
        ecc_uncorrectable_aggregate=0,
        ecc_correctable_volatile=0,
        temperature_c=35.0,
        power_draw_w=48.91,
        power_limit_w=310.0,
        memory_used_mib=0.0,
        memory_total_mib=81559.0,
        pcie_gen_current=5,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
    ),
    Gpu(
        index=1,
        name="NVIDIA H100 PCIe",
        uuid="GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3",
        serial="1654922001234",
        vbios="96.00.30.00.01",
        pci_bus_id="0000:d5:00.0",
        persistence_mode=True,
        ecc_enabled=True,
        ecc_pending_enabled=True,
        ecc_uncorrectable_volatile=2,
        ecc_uncorrectable_aggregate=5,
        ecc_correctable_volatile=17,
        temperature_c=41.0,
        power_draw_w=72.35,
        power_limit_w=310.0,
        memory_used_mib=1021.0,
        memory_total_mib=81559.0,
        pcie_gen_current=1,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=8,
    ),
)


def test_query_gpu_noheader_nounits_in_query_gpu_fields_order():
    rows = parse_query_gpu(H100_CSV, QUERY_GPU_FIELDS)
    assert [tuple(row) for row in rows] == [QUERY_GPU_FIELDS] * 2
    assert rows[1]["pci.bus_id"] == "00000000:D5:00.0"  # raw rows keep the printed value
    assert rows[0]["retired_pages.pending"] is None
    assert gpus_from_query_gpu(H100_CSV) == H100_CSV_GPUS


def test_query_gpu_without_header_or_fields_is_refused():
    with pytest.raises(ParseError, match="no header line and no field names"):
        parse_query_gpu(H100_CSV)


@pytest.mark.parametrize(
    "printed",
    [
        "[N/A]",
        "N/A",
        "[Not Supported]",
        "[Unknown Error]",
        "Requested functionality has been deprecated",
        "[Insufficient Permissions]",
    ],
)
def test_query_gpu_not_available_words_are_none(printed):
    text = H100_CSV.replace(", 0, 0, 0, [N/A]", f", {printed}, 0, 0, [N/A]", 1)
    (gpu0, _) = gpus_from_query_gpu(text)
    assert gpu0.ecc_uncorrectable_volatile is None  # never 0
    assert gpu0.ecc_uncorrectable_aggregate == 0


def test_query_gpu_values_with_units_when_not_nounits():
    text = (
        "index, memory.used [MiB], power.draw [W], temperature.gpu, pcie.link.width.max\n0, 745 MiB, 28.16 W, 37, 16\n"
    )
    assert gpus_from_query_gpu(text) == (
        Gpu(index=0, memory_used_mib=745.0, power_draw_w=28.16, temperature_c=37.0, pcie_width_max=16),
    )


def test_query_gpu_invalid_field_text_raises_parse_error_with_that_line():
    # stdout as quoted in CoHDI/composable-resource-operator#37 (exit 2)
    text = 'Field "device_minor" is not a valid field to query.\n\n'
    with pytest.raises(ParseError) as caught:
        parse_query_gpu(text, QUERY_GPU_FIELDS)
    assert caught.value.reason == 'Field "device_minor" is not a valid field to query.'
    assert caught.value.tool == "nvidia-smi --query-gpu"


def test_query_gpu_wrong_column_count_and_unreadable_values():
    with pytest.raises(ParseError, match="row has 24 values, expected 25"):
        parse_query_gpu(H100_CSV.replace(", 16, 8\n", ", 16\n"), QUERY_GPU_FIELDS)
    with pytest.raises(ParseError, match=r"temperature.gpu 'hot' is not readable"):
        gpus_from_query_gpu(H100_CSV.replace(", 41, ", ", hot, "))
    with pytest.raises(ParseError, match="persistence_mode 'Maybe' is not readable"):
        gpus_from_query_gpu(H100_CSV.replace("535.104.05, Enabled", "535.104.05, Maybe", 1))
    with pytest.raises(ParseError, match=r"pci.bus_id"):
        gpus_from_query_gpu(H100_CSV.replace("00000000:C2:00.0", "C2", 1))
    with pytest.raises(ParseError, match="GPU0 appears twice"):
        gpus_from_query_gpu(H100_CSV + H100_CSV)
    with pytest.raises(ParseError, match="empty output"):
        parse_query_gpu("\n", QUERY_GPU_FIELDS)


def test_query_gpu_reads_remapped_rows_and_clock_reasons_when_asked():
    text = (
        "index, remapped_rows.correctable, remapped_rows.uncorrectable, remapped_rows.pending, "
        "remapped_rows.failure, clocks_throttle_reasons.hw_slowdown, clocks_throttle_reasons.gpu_idle\n"
        "0, 0, 4, Yes, No, Active, Not Active\n"
    )
    (gpu,) = gpus_from_query_gpu(text)
    assert gpu.remapped_rows == RemappedRows(0, 4, True, False)
    assert gpu.clock_event_reasons == frozenset({"hw_slowdown"})


@pytest.mark.parametrize("text", ["", "\n", "No running processes found\n"])
def test_compute_apps_empty_is_no_processes(text):
    assert parse_compute_apps(text) == ()


def test_compute_apps_noheader_in_compute_apps_fields_order():
    # constructed: `--query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits`
    text = (
        "GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3, 3051, python3, 1010\n"
        "GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3, 3077, /opt/run, with comma.py, [N/A]\n"
    )
    assert COMPUTE_APPS_FIELDS == ("gpu_uuid", "pid", "process_name", "used_memory")
    assert parse_compute_apps(text) == (
        ("GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3", GpuProcess(3051, "python3", 1010.0)),
        ("GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3", GpuProcess(3077, "/opt/run, with comma.py", None)),
    )
    with pytest.raises(ParseError, match="pid 'x' is not a number"):
        parse_compute_apps("GPU-1, x, python3, 10\n")


# -- nvlink ------------------------------------------------------------------------------------------


def test_nvlink_status_file_gives_exact_links():
    links = parse_nvlink_status(data(NVLINK_S))
    assert links == NVLINK[NVLINK_S]
    assert links[0][0].speed_gbps == 212.496  # 26.562 GB/s printed, × 8 bits


def test_nvlink_does_not_depend_on_indentation():
    text = data(NVLINK_S)
    flat = "\n".join(line.strip() for line in text.splitlines()) + "\n"
    tabbed = "\n".join(("\t " if "Link" in line else "") + line.strip() for line in text.splitlines()) + "\n"
    assert parse_nvlink_status(flat) == parse_nvlink_status(tabbed) == NVLINK[NVLINK_S]


def test_nvlink_cut_or_foreign_text_raises_parse_error():
    text = data(NVLINK_S)
    with pytest.raises(ParseError, match=r"unexpected line 'Link 3: 26.5'"):
        parse_nvlink_status(text[: text.index("26.562", text.index("Link 3:")) + 4])
    with pytest.raises(ParseError, match="unexpected line"):
        parse_nvlink_status(data(NVLINK_R))
    with pytest.raises(ParseError, match="GPU 0 appears twice"):
        parse_nvlink_status(text + text)
    with pytest.raises(ParseError, match="empty output"):
        parse_nvlink_status("")
    # a GPU without NVLink is listed with no links: known to have none
    assert parse_nvlink_status("GPU 0: NVIDIA RTX A6000 (UUID: GPU-1b2c)\n") == {0: ()}


# -- nvidia-smi's own failure texts --------------------------------------------------------------------

FAILURES = {
    "mismatch": (
        "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.161\n",
        "Failed to initialize NVML: Driver/library version mismatch",
    ),
    "no driver": (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
        "the latest NVIDIA driver is installed and running.\n\n",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
        "the latest NVIDIA driver is installed and running.",
    ),
    "no devices": ("No devices were found\n", "No devices were found"),
}
PARSERS = {
    "q": parse_q,
    "query_gpu": lambda t: parse_query_gpu(t, QUERY_GPU_FIELDS),
    "compute_apps": parse_compute_apps,
    "nvlink": parse_nvlink_status,
}


@pytest.mark.parametrize("parser", sorted(PARSERS))
@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_failure_text_raises_parse_error_with_that_line(parser, failure):
    text, reason = FAILURES[failure]
    with pytest.raises(ParseError) as caught:
        PARSERS[parser](text)
    assert caught.value.reason == reason
    assert caught.value.excerpt == text


@pytest.mark.parametrize("parser", ["q"])
@pytest.mark.parametrize("text", ["", "\n \n", "the quick brown fox\njumps\n", "key: value\n", "\x00\xff\ufffd"])
def test_non_output_raises_parse_error(parser, text):
    with pytest.raises(ParseError):
        PARSERS[parser](text)


def test_bus_id_normalisation():
    assert normalise_bus_id("00000000:9B:00.0") == "0000:9b:00.0"
    assert normalise_bus_id("0000:9b:00.0") == "0000:9b:00.0"
    with pytest.raises(ValueError):
        normalise_bus_id("9B:00.0")


# -- merging into GpuFacts -----------------------------------------------------------------------------


def test_merge_csv_only():
    facts = gpu_facts_from_nvidia_smi(
        query_gpu=H100_CSV, compute_apps=None, q=None, nvlink=None, note="python3 not found"
    )
    assert (facts.source, facts.driver_version, facts.cuda_driver_version) == ("nvidia-smi", "535.104.05", None)
    assert facts.gpus == H100_CSV_GPUS  # processes and nvlinks None: not asked
    assert facts.source_note == "python3 not found"
    assert facts.gaps == ("GPU0 remapped rows: no -q output", "GPU1 remapped rows: no -q output")


def test_merge_q_matches_by_bus_id_and_fills_what_csv_lacks():
    apps = "GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3, 3051, python3, 1010\n"
    facts = gpu_facts_from_nvidia_smi(query_gpu=H100_CSV, compute_apps=apps, q=Q_H100, nvlink=data(NVLINK_S))
    gpu0, gpu1 = facts.gpus
    assert facts.cuda_driver_version == "12.2"
    # -q shows only the GPU at D5, which is index 1 here, index 0 in its own output
    assert gpu1.remapped_rows == RemappedRows(0, 4, True, False)
    assert gpu1.clock_event_reasons == frozenset({"sw_power_cap", "hw_slowdown", "hw_power_brake_slowdown"})
    assert gpu1.pcie_gen_max == 5 and gpu1.pcie_width_max == 8  # the CSV's value wins where both have one
    assert (gpu0.remapped_rows, gpu0.clock_event_reasons) == (None, None)
    assert gpu0.processes == () and gpu1.processes == (GpuProcess(3051, "python3", 1010.0),)
    assert gpu0.nvlinks == gpu1.nvlinks == H100_LINKS
    assert facts.gaps == ("nvidia-smi -q: Attached GPUs says 2, output shows 1", "GPU0 remapped rows: not reported")


def test_merge_headless_q_excerpt_matches_by_index():
    facts = gpu_facts_from_nvidia_smi(query_gpu=H100_CSV, compute_apps="", q=data(PR80), nvlink=None)
    assert facts.gpus[0].remapped_rows == RemappedRows(0, 4, True, None)
    assert facts.gpus[1].remapped_rows is None
    assert [g.processes for g in facts.gpus] == [(), ()]  # the query ran and listed nothing
    assert facts.gaps == (
        "nvidia-smi -q: no GPU header",
        "nvidia-smi -q: GPU0: output ends before its Processes section",
        "GPU1 remapped rows: not reported",
    )


def test_merge_q_only():
    facts = gpu_facts_from_nvidia_smi(query_gpu=None, compute_apps=None, q=Q_H100, nvlink=None)
    assert (facts.driver_version, facts.cuda_driver_version) == ("535.104.05", "12.2")
    assert facts.gpus == (Q_H100_GPU,)  # -q's own processes: the only list there is


def test_merge_needs_csv_or_q_and_refuses_cut_csv():
    with pytest.raises(ParseError, match="neither --query-gpu nor -q"):
        gpu_facts_from_nvidia_smi(query_gpu=None, compute_apps=None, q=None, nvlink=None)
    with pytest.raises(ParseError, match="output ends mid-line: '1, NVIDIA H100 PCIe"):
        gpu_facts_from_nvidia_smi(query_gpu=H100_CSV[:-3], compute_apps=None, q=None, nvlink=None)


def test_merge_compute_apps_without_uuid_and_nvlink_missing_gpu():
    query, apps = data(CSV_UNITS).split("---\n")
    nvlink = data(NVLINK_S)
    only_gpu0 = nvlink[: nvlink.index("      GPU 1:")]
    facts = gpu_facts_from_nvidia_smi(query_gpu=H100_CSV, compute_apps=apps, q=None, nvlink=only_gpu0)
    assert [g.processes for g in facts.gpus] == [None, None]
    assert [g.nvlinks for g in facts.gpus] == [H100_LINKS, None]
    assert facts.gaps[:2] == (
        "compute apps without gpu_uuid: processes not attributed to GPUs",
        "GPU1 nvlinks: not listed by nvlink -s",
    )


def test_clock_reason_names_are_the_shared_ones():
    text = Q_H100.replace("Not Active", "Active")
    assert parse_q(text).gpus[0].clock_event_reasons == frozenset(CLOCK_EVENT_REASONS)


# -- issue 17: lines break at "\n" only; one odd line is a gap, never a crash -----------------------

# str.splitlines also breaks at these; a GPU or process name, or a corrupted byte, can put one
# inside a "Key : value" line, and the half after it starts with ":"
LINE_BREAKERS = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("breaker", LINE_BREAKERS, ids=ascii)
def test_q_key_value_line_holding_a_splitlines_break_stays_one_line(breaker):
    text = Q_H100.replace(
        "    Product Name                          : NVIDIA H100 PCIe",
        f"    Product Name{breaker}: NVIDIA H100 PCIe",
        1,
    )
    assert f"Product Name{breaker}:" in text
    (gpu,) = parse_q(text).gpus
    assert gpu == Q_H100_GPU


def test_q_line_without_a_key_is_a_gap_not_a_crash():
    text = Q_H100.replace("    Serial Number                         : 1654922001234", "    : 1654922001234", 1)
    facts = parse_q(text)
    assert facts.gpus[0].serial is None
    assert "unreadable line ': 1654922001234' (no key before ':')" in facts.gaps


# -- issue 17: every parser is linear in its input ----------------------------------------------------
# proved by growth (tests/growth.py): the quadratic code took 8-370 s on the larger inputs, x16 per x4


@pytest.mark.growth
def test_query_gpu_duplicate_index_check_is_linear():
    # 78 KB of one-column rows, every index distinct: a count() per row took 9-18 s
    rows = lambda n: "".join(f"{i}\n" for i in range(n))  # noqa: E731
    assert len(rows(15_000)) > 78_000
    assert_linear(lambda text: gpus_from_query_gpu(text, ("index",)), rows, 3_750)
    with pytest.raises(ParseError, match="GPU14999 appears twice"):
        gpus_from_query_gpu(rows(15_000) + "14999\n", ("index",))


@pytest.mark.growth
def test_q_duplicate_bus_id_check_is_linear():
    text = lambda n: "".join(f"GPU 0000:{i // 256:02X}:{i % 256:02X}.0\n    Product Name : x\n" for i in range(n))  # noqa: E731
    assert_linear(parse_q, text, 500, ignore=ParseError)
    with pytest.raises(ParseError, match=r"GPU 0000:07:3f.0 appears twice"):
        parse_q(text(2_000) + "GPU 0000:07:3F.0\n    Product Name : x\n")


@pytest.mark.growth
def test_merging_thousands_of_gpus_is_linear():
    # -q GPUs matched by index, compute apps by uuid: a scan of all the others per GPU is quadratic
    # (~17 s at 20,000 GPUs)
    from nodecheck.parsers.nvidia_smi import _attach_processes, _merge_q

    def fleet(n: int):
        gpus = [Gpu(index=i, uuid=f"GPU-{i}") for i in range(n)]
        q_gpus = [Gpu(index=i, name="x") for i in range(n)]
        apps = [(f"GPU-{i}", GpuProcess(1000 + i, "p", 1.0)) for i in range(n)]
        return gpus, q_gpus, apps

    def merge(inputs):
        gpus, q_gpus, apps = inputs
        return _attach_processes(_merge_q(gpus, q_gpus, []), apps, [])

    assert_linear(merge, fleet, 2_500)
    assert [(g.name, g.processes) for g in merge(fleet(3))[:2]] == [
        ("x", (GpuProcess(1000, "p", 1.0),)),
        ("x", (GpuProcess(1001, "p", 1.0),)),
    ]


# -- Fabric, GSP firmware (nvidia-smi -q) and NVLink error counters (nvlink -e) ----------------------

GPUD_H100 = "nvidia-smi-q/gpud-535.161.08-h100x8-fabric-completed-gsp.txt"
GPUD_TITAN_V = "nvidia-smi-q/gpud-560.35.03-titan-v-fabric-na-health-na.txt"
GPUD_A10 = "nvidia-smi-q/gpud-535.129.03-a10-fabric-na-gsp.txt"
AZHPC506 = "nvidia-smi-q/azhpc-images-pr506-fabric-completed-insufficient-resources-clique-0-excerpt.txt"
DRA626 = "nvidia-smi-q/dra-driver-nvidia-gpu-issue626-gb200-fabric-health-unhealthy-grep-excerpt.txt"
OPERATOR2511 = "nvidia-smi-q/gpu-operator-issue2511-driver580-fabric-in-progress-excerpt.txt"
HGX_535 = GpuFabric("completed", "success", None, None, ())  # driver 535 prints State and Status only
EXCERPT_GAPS = ("no GPU header", "GPU0: output ends before its Processes section", "GPU0 Fabric: section cut off")

# per file: (driver, GPU count, each GPU's (fabric, gsp_firmware), gaps); the excerpts are the Fabric
# section alone, running to the end: what a cut would have hidden is unknown, so no fabric is claimed
Q_FABRIC = {
    GPUD_H100: ("535.161.08", 8, ((HGX_535, "535.161.08"),) * 8, ()),
    GPUD_TITAN_V: ("560.35.03", 1, ((None, None),), ()),  # State N/A: no fabric; GSP N/A (Volta)
    GPUD_A10: ("535.129.03", 1, ((None, "535.129.03"),), ()),
    AZHPC506: (None, 1, ((None, None),), EXCERPT_GAPS),
    DRA626: (
        None,
        1,
        ((None, None),),
        ("grep group separator '--': lines between the groups not shown", *EXCERPT_GAPS),
    ),
    OPERATOR2511: (None, 1, ((None, None),), EXCERPT_GAPS),
}
# each excerpt with the section that follows Fabric in nvidia-smi -q ("Processes") at Fabric's indentation
CLOSED_FABRIC = {
    AZHPC506: GpuFabric("completed", "Insufficient Resources", "00000000-0000-0000-0000-000000000000", 0, ()),
    DRA626: GpuFabric(
        "completed",
        "success",
        "dc6e40c4-d722-4357-9ba6-5291dd461278",
        2,
        (("bandwidth", "full"), ("summary", "unhealthy")),
    ),
    OPERATOR2511: GpuFabric("in_progress", None, None, None, ()),  # every other row N/A
}

NVLINK_E_GB300 = "nvidia-smi-nvlink/srt-slurm-pr307-gb300-nvlink-e-excerpt.txt"
NVLINK_E_ELIDED = "nvidia-smi-nvlink/ml-engineering-h100-nvlink-e-elided.txt"
NVLINK_E_DERIVED = "nvidia-smi-nvlink/derived-ml-engineering-h100-nvlink-e-links-0-1-17.txt"
ZERO = (("replay", 0), ("recovery", 0), ("crc_flit", 0))
NVLINK_E = {
    NVLINK_E_GB300: {0: {0: ZERO}},
    NVLINK_E_DERIVED: {0: {0: ZERO, 1: ZERO, 17: ZERO}},
    NVLINK_E_ELIDED: "unexpected line '[...]'",  # the author's elision is not nvidia-smi output
}


@pytest.mark.parametrize("path", sorted(Q_FABRIC))
def test_q_fabric_and_gsp_file_gives_exact_facts(path):
    driver, count, per_gpu, gaps = Q_FABRIC[path]
    facts = parse_q(data(path))
    assert (facts.driver_version, len(facts.gpus), facts.gaps) == (driver, count, gaps)
    assert tuple((g.fabric, g.gsp_firmware) for g in facts.gpus) == per_gpu


@pytest.mark.parametrize("path", sorted(CLOSED_FABRIC))
def test_q_fabric_excerpt_closed_by_the_next_section_gives_every_row(path):
    text = data(path).replace("--\n", "")
    indent = text[: len(text) - len(text.lstrip())]
    (gpu,) = parse_q(text + f"{indent}Processes                             : None\n").gpus
    assert gpu.fabric == CLOSED_FABRIC[path]


def test_q_gpud_h100_other_facts_still_read():
    facts = parse_q(data(GPUD_H100))
    assert [g.pci_bus_id for g in facts.gpus][:2] == ["0000:19:00.0", "0000:3b:00.0"]
    assert all(g.name == "NVIDIA H100 80GB HBM3" and g.processes == () for g in facts.gpus)


@pytest.mark.parametrize("path", [AZHPC506, DRA626, OPERATOR2511, GPUD_A10, GPUD_TITAN_V])
def test_q_fabric_every_prefix_gives_true_facts_or_parse_error(path):
    _every_prefix(data(path))


def test_q_fabric_every_prefix_of_a_closed_section():
    text = data(DRA626).replace("--\n", "    Processes                             : None\n")
    _every_prefix(text)


@pytest.mark.parametrize(
    "row, gap",
    [
        ("        State                             : Registering\n", "GPU0 Fabric / State: unknown 'Registering'"),
        (
            "        ClusterUUID                       : not-a-uuid\n",
            "GPU0 Fabric / ClusterUUID: unreadable 'not-a-uuid'",
        ),
        ("        CliqueId                          : two\n", "GPU0 fabric / cliqueid: unreadable 'two'"),
    ],
)
def test_q_fabric_unreadable_rows_are_gaps_not_values(row, gap):
    key = row.split(":")[0].strip()
    text = "".join(
        row if line.strip().startswith(key + " ") else line
        for line in data(DRA626).replace("--\n", "    Processes                             : None\n").splitlines(True)
    )
    facts = parse_q(text)
    assert gap in facts.gaps
    fabric = facts.gpus[0].fabric
    if key == "State":
        assert fabric is None
    else:
        assert fabric is not None and getattr(fabric, "cluster_uuid" if key == "ClusterUUID" else "clique_id") is None


@pytest.mark.parametrize("path", sorted(p for p, v in NVLINK_E.items() if isinstance(v, dict)))
def test_nvlink_errors_file_gives_exact_counters(path):
    assert parse_nvlink_errors(data(path)) == NVLINK_E[path]


def test_nvlink_errors_elided_recording_is_a_parse_error():
    with pytest.raises(ParseError) as caught:
        parse_nvlink_errors(data(NVLINK_E_ELIDED))
    assert caught.value.reason == NVLINK_E[NVLINK_E_ELIDED]


NVLINK_E_ROWS = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee)
         Link 0: Replay Errors: 1
         Link 0: Recovery Errors: 0
         Link 0: CRC Flit Errors: 7
         Link 0: CRC Data Errors: 0
         Link 0: ECC Errors: N/A
         Link 0: Data Tx Errors: 0
         Link 0: Data Rx Errors: 0
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-ffffffff-1111-2222-3333-444444444444)
         Link 0: Replay Errors: 0
         Link 0: Recovery Errors: 5
"""


def test_nvlink_errors_every_counter_row_and_na():
    # CONSTRUCTED: the separate flit/data CRC rows some drivers print; N/A leaves the counter out
    assert parse_nvlink_errors(NVLINK_E_ROWS) == {
        0: {0: (("replay", 1), ("recovery", 0), ("crc_flit", 7), ("crc_data", 0))},
        1: {0: (("replay", 0), ("recovery", 5))},
    }


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty output"),
        (data(NVLINK_E_GB300)[:-1], "output ends mid-line: 'Link 0: CRC Errors: 0'"),
        (data(NVLINK_E_GB300) + data(NVLINK_E_GB300), "GPU 0 appears twice"),
        (data(NVLINK_E_GB300).replace("Replay", "Bogus"), "unknown counter 'Bogus Errors'"),
        (data(NVLINK_E_GB300).replace("Recovery Errors", "Replay Errors"), "link 0 reports replay twice"),
        ("\t Link 0: Replay Errors: 0\n", "unexpected line 'Link 0: Replay Errors: 0' before any GPU line"),
        (data(NVLINK_S), "unexpected line 'Link 0: 26.562 GB/s'"),
        ("Failed to initialize NVML: Driver/library version mismatch\n", "Failed to initialize NVML"),
    ],
)
def test_nvlink_errors_garbage_cut_or_foreign_is_a_parse_error(text, reason):
    with pytest.raises(ParseError) as caught:
        parse_nvlink_errors(text)
    assert caught.value.reason.startswith(reason)


def test_nvlink_status_refuses_error_counters():
    # a GPU line without its UUID is not -s output either
    with pytest.raises(ParseError, match="unexpected line 'GPU 0: NVIDIA GB300'"):
        parse_nvlink_status(data(NVLINK_E_GB300))
    with pytest.raises(ParseError, match="unexpected line 'Link 0: Replay Errors: 0'"):
        parse_nvlink_status(data(NVLINK_E_DERIVED))


def _one_gpu_csv() -> str:
    return data(CSV_P100).split("\n", 1)[1]


def test_merge_attaches_link_errors_to_the_links_by_gpu_and_link():
    status = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-abcdefab-cdef-abdc-abcd-abababababab)\n" + "".join(
        f"         Link {n}: 26.562 GB/s\n" for n in (0, 1, 17)
    )
    q = data(GPUD_A10)
    facts = gpu_facts_from_nvidia_smi(
        query_gpu=None,
        compute_apps=None,
        q=q,
        nvlink=status,
        nvlink_errors=data(NVLINK_E_DERIVED).replace("Link 17: CRC Errors: 0", "Link 17: CRC Errors: 42"),
        clock=(1796190253.5, 27718.2, "dda7b88b-2fbb-4708-a635-68e2e354ae4c"),
    )
    (gpu,) = facts.gpus
    assert gpu.nvlinks == (
        NvLink(0, True, 212.496, ZERO),
        NvLink(1, True, 212.496, ZERO),
        NvLink(17, True, 212.496, (("replay", 0), ("recovery", 0), ("crc_flit", 42))),
    )
    assert (gpu.fabric, gpu.gsp_firmware) == (None, "535.129.03")
    assert (facts.clock, facts.uptime_s, facts.boot_id) == (
        1796190253.5,
        27718.2,
        "dda7b88b-2fbb-4708-a635-68e2e354ae4c",
    )


def test_merge_link_errors_without_status_and_for_unknown_gpus_or_links():
    q = data(GPUD_A10)
    errors = data(NVLINK_E_DERIVED) + data(NVLINK_E_GB300).replace("GPU 0", "GPU 3")
    facts = gpu_facts_from_nvidia_smi(query_gpu=None, compute_apps=None, q=q, nvlink=None, nvlink_errors=errors)
    assert facts.gpus[0].nvlinks == (
        NvLink(0, None, errors=ZERO),
        NvLink(1, None, errors=ZERO),
        NvLink(17, None, errors=ZERO),
    )
    assert "nvlink -e lists GPU3, which the GPU query does not" in facts.gaps
    status = "GPU 0: NVIDIA A10 (UUID: GPU-1)\n         Link 0: 26.562 GB/s\n"
    facts = gpu_facts_from_nvidia_smi(query_gpu=None, compute_apps=None, q=q, nvlink=status, nvlink_errors=errors)
    assert facts.gpus[0].nvlinks == (NvLink(0, True, 212.496, ZERO),)
    assert "GPU0 nvlink -e lists link 1, which nvlink -s does not" in facts.gaps
    with pytest.raises(ParseError, match="nvidia-smi nvlink -e: output ends mid-line"):
        gpu_facts_from_nvidia_smi(query_gpu=None, compute_apps=None, q=q, nvlink=None, nvlink_errors=errors[:-1])
    assert isinstance(facts, GpuFacts)


# -- issue 32, 3.2: numbers no nvidia-smi prints ---------------------------------------------------------


@pytest.mark.parametrize("value", ["9" * 5000, "9" * 400], ids=["5000 digits", "400 digits"])
def test_nvlink_errors_count_no_driver_prints_is_a_parse_error(value):
    # 5000 digits raised ValueError from int(); 400 digits read as 10**400 replays
    with pytest.raises(ParseError, match=f"replay of link 0: '9+'… \\({len(value)} characters\\) is not a count"):
        parse_nvlink_errors(NVLINK_E_ROWS.replace("Replay Errors: 1", f"Replay Errors: {value}"))
    with pytest.raises(ParseError, match=r"GPU number '9+'… .* is not 4 digits or fewer"):
        parse_nvlink_errors(NVLINK_E_ROWS.replace("GPU 1:", f"GPU {value}:"))


H100_SCENARIO_CSV = "scenarios/constructed-nvidia-smi-query-gpu-h100pcie-2gpu.csv"


@pytest.mark.parametrize("field, printed", [("power.limit", "310.00"), ("memory.total", "81559")])
def test_query_gpu_number_of_400_digits_is_not_read_as_inf_or_10_to_the_400(field, printed):
    # power.limit read as float inf (a floor passed it); memory.total as a 400-digit int (float() of it
    # raised OverflowError in a judge)
    text = data(H100_SCENARIO_CSV).replace(f", {printed},", f", {'9' * 400},", 1)
    with pytest.raises(ParseError, match=f"{field} '9+'… \\(400 characters\\) is not readable"):
        gpus_from_query_gpu(text)

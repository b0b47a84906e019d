"""tests/data: every corpus file a parser is tested against is a byte-for-byte copy, and every file
there has its source line in SOURCES.md (DERIVED edits say so)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import DATA, data

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
MIRRORED = sorted(p.name for p in DATA.iterdir() if p.is_dir() and (CORPUS / p.name).is_dir())


def test_the_corpus_directories_are_mirrored():
    if not CORPUS.is_dir():
        pytest.skip("shared corpus not checked out next to the project")
    assert {
        "ibstat",
        "ibstatus",
        "ibstat-p",
        "nvidia-smi",
        "nvidia-smi-q",
        "nvidia-smi-query-csv",
        "nvidia-smi-topo",
        "nvidia-smi-nvlink",
        "dmesg-xid",
        "dmesg-oom",
        "container-digests",
        "pyxis-enroot",
        "nccl-debug-info",
        "perfquery",
        "ibqueryerrors",
        "sysfs_ib_counters",
        "sysfs_ib",
        "perftest",
        "show_gids",
        "ibv_devinfo",
        "rdma_link",
        "ibdev2netdev",
    } <= set(MIRRORED)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not checked out next to the project")
@pytest.mark.parametrize("tool", MIRRORED)
def test_every_corpus_file_is_copied_byte_for_byte(tool):
    originals = sorted(p for p in (CORPUS / tool).iterdir() if p.is_file())
    assert originals
    for original in originals:
        assert (DATA / tool / original.name).read_bytes() == original.read_bytes(), original.name


def test_every_test_data_file_is_sourced_and_derived_ones_say_so():
    """Every file under tests/data has its line in SOURCES.md; an edited copy (derived-*) says
    DERIVED there and a made-up one (constructed-*) CONSTRUCTED, and nothing else does."""
    sources = data("SOURCES.md").splitlines()
    files = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*") if p.is_file() and p.name != "SOURCES.md")
    assert len(files) > 50
    for path in files:
        [line] = [ln for ln in sources if ln.startswith(f"- `{path}` - ")]
        assert ("DERIVED" in line) == Path(path).name.startswith("derived-"), line
        assert ("CONSTRUCTED" in line) == Path(path).name.startswith("constructed-"), line

"""parsers/forensics.py on the forensics probes' real output (tests/data/forensics, recorded by its
record.py on Debian 12: dash, py-spy 0.4.3, Python 3.11) and on output they never print."""

from __future__ import annotations

import base64
import gzip
from pathlib import Path

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.forensics import parse_fetch, parse_snapshot, parse_stacks

DATA = Path(__file__).resolve().parents[1] / "data" / "forensics"


def text(name: str) -> str:
    return (DATA / name).read_text()


def test_snapshot_three_ranks_their_variables_dumps_and_nccl_warnings():
    snap = parse_snapshot(text("recorded-snapshot-three-ranks-no-nvidia-smi.txt"))
    assert snap.clock is not None and snap.clock > 1_700_000_000
    assert snap.gpus == () and "nvidia-smi: not found" in snap.gpu_error
    assert [p.env["RANK"] for p in snap.processes] == ["0", "1", "2"]
    assert [p.proc.state for p in snap.processes] == ["S", "S", "D"]  # rank 2 was frozen
    first = snap.processes[0].env
    assert first["CUDA_VISIBLE_DEVICES"] == "0,1,2,3" and first["WORLD_SIZE"] == "4"
    assert first["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    # only the rank variables leave the node: not the secret, not the variable whose value forges a line
    assert all("SECRET_TOKEN" not in p.env and "NCCL_ODD" not in p.env for p in snap.processes)
    assert [Path(d.path).name for d in snap.dumps] == ["trace_rank_0", "trace_rank_1"]
    assert [(d.size, d.owner) for d in snap.dumps] == [(1027, 0), (1027, 0)]
    # trace_rank_2 is a symbolic link to a root-only file: listed as refused, never as a dump
    assert [(Path(path).name, why) for path, why in snap.refused] == [("trace_rank_2", "a symbolic link, not followed")]
    assert snap.log_watched and snap.log_error == ""
    assert len(snap.nccl_warns) == 2 and "vendor err 129" in snap.nccl_warns[0]


def test_snapshot_a_value_holding_a_newline_stays_one_variable():
    raw = text("recorded-snapshot-three-ranks-no-nvidia-smi.txt").replace(
        "GROUP_RANK=0\n", "GROUP_RANK=0\\x01RANK=99\n", 1
    )
    snap = parse_snapshot(raw)
    assert snap.processes[0].env["RANK"] == "0"
    assert snap.processes[0].env["GROUP_RANK"] == "0\nRANK=99"


def test_snapshot_of_no_process_and_failing_pgrep():
    none = (
        "@@nodecheck begin clock\n1796148685\n@@nodecheck end clock rc=0\n@@nodecheck begin procs\n"
        "@@nodecheck end procs rc=0\n@@nodecheck begin dumps\n@@nodecheck end dumps rc=0\n"
    )
    assert parse_snapshot(none).processes == () and parse_snapshot(none).procs_error == ""
    failed = none.replace(
        "@@nodecheck begin procs\n@@nodecheck end procs rc=0",
        "@@nodecheck begin procs\npgrep: invalid regex\n@@nodecheck end procs rc=2",
    )
    assert parse_snapshot(failed).procs_error == "pgrep: invalid regex"


@pytest.mark.parametrize(
    "garbage", ["", "Welcome to node1\n", "@@nodecheck begin clock\n17\n@@nodecheck end clock rc=0\n"]
)
def test_snapshot_not_from_the_probe_is_a_parse_error(garbage):
    with pytest.raises(ParseError) as e:
        parse_snapshot(garbage)
    assert e.value.tool == "forensics snapshot"


def test_snapshot_unreadable_process_line_is_a_parse_error():
    raw = text("recorded-snapshot-three-ranks-no-nvidia-smi.txt").replace(" S          0 ", " ?? ", 1)
    with pytest.raises(ParseError, match="PID PPID STAT ELAPSED ARGS"):
        parse_snapshot(raw)


def test_stacks_two_answer_one_frozen():
    out = parse_stacks(text("recorded-stacks-two-answer-one-frozen.txt"))
    assert out.pyspy == "py-spy 0.4.3"
    assert len(out.results) == 3
    rcs = sorted(r.rc for r in out.results.values())
    assert rcs == [0, 0, 124]  # the frozen one: timeout(1) fired
    frozen = next(r for r in out.results.values() if r.rc == 124)
    assert frozen.state == "D (disk sleep)" and frozen.wchan
    answered = [r for r in out.results.values() if r.rc == 0]
    assert all("reduce_scatter (distributed_c10d.py:" in r.stdout for r in answered)


def test_stacks_without_pyspy_on_the_node():
    out = parse_stacks(text("recorded-stacks-no-pyspy.txt"))
    assert out.pyspy is None and out.results == {}


def test_stacks_output_from_something_else_is_a_parse_error():
    with pytest.raises(ParseError, match="no py-spy line"):
        parse_stacks("bash: sh: not found\n")


def test_fetch_decodes_the_gzipped_file_exactly():
    fetched = parse_fetch(text("recorded-fetch-dump-gzip.txt"))
    assert fetched.data == b"\x80\x04\x95" + bytes(range(256)) * 4 and fetched.size == 1027 and fetched.note == ""


def test_fetch_missing_and_too_large_are_notes_not_data():
    assert parse_fetch(text("recorded-fetch-missing.txt")).data is None
    big = parse_fetch(text("recorded-fetch-too-large.txt"))
    assert big.data is None and big.size == 1027 and big.note == "too large to fetch"


def test_fetch_refused_by_the_node_is_a_note_never_data():
    link = parse_fetch(text("recorded-fetch-refused-symlink.txt"))
    assert (link.data, link.refused, link.note) == (None, True, "refused: a symbolic link, not followed")
    other = parse_fetch(text("recorded-fetch-refused-owner.txt"))
    assert (other.data, other.refused, other.note) == (
        None,
        True,
        "refused: owned by uid 0, not by the rank (uid 4242)",
    )


def test_snapshot_listing_lines_of_another_shape_are_a_parse_error():
    raw = text("recorded-snapshot-three-ranks-no-nvidia-smi.txt")
    old_shape = raw.replace("file\t1027\t", "file\t", 1)  # no OWNER column
    with pytest.raises(ParseError, match="is not 'file SIZE MTIME OWNER PATH'"):
        parse_snapshot(old_shape)


def test_fetch_plain_base64_and_a_file_that_changed_while_read():
    body = base64.b64encode(b"abc").decode()
    assert parse_fetch(f"@@nodecheck encoding base64 3\n{body}\n").data == b"abc"
    short = parse_fetch(f"@@nodecheck encoding base64 5\n{body}\n")
    assert short.data == b"abc" and "changed while it was read" in short.note


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "hello\n",
        "@@nodecheck encoding base64 3\n!!!not base64\n",
        "@@nodecheck encoding gzip+base64 3\n" + base64.b64encode(b"not gzip").decode() + "\n",
        "@@nodecheck encoding gzip+base64 3\n" + base64.b64encode(gzip.compress(b"abc"))[:-8].decode() + "\n",
    ],
)
def test_fetch_garbage_is_a_parse_error(bad):
    with pytest.raises(ParseError):
        parse_fetch(bad)

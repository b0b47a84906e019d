"""Issue 17, finding 1: forensics copied any root-readable file into its record (a rank started with
TORCH_FR_DUMP_TEMP_FILE=/etc/shado, or a symlink /tmp/nccl_trace_rank_0 -> /etc/shadow). The fetch
script (forensics/probe.py FETCH_SCRIPT + FETCH_PY) run here as the node runs it, on files built for
each trick; then the snapshot listing and the whole gathering through the local transport, with a
"rank" (a sleeping Python process) whose prefix names a root-only file; and --dumps DIR with links
out of it. Finding 3: the rank's command line (--hf-token X) never reaches the record."""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.core.model import Node
from nodecheck.forensics import analysis, record
from nodecheck.forensics.collect import MAX_LOCAL_DUMP_BYTES, Where, gather, read_local_dumps
from nodecheck.forensics.probe import fetch_probe
from nodecheck.parsers.forensics import parse_fetch
from nodecheck.transport.local import LocalTransport
from tests.helpers import DATA

MARKER = "NODECHECK-ROOT-ONLY-SECRET-MARKER"
DUMP = (DATA / "flight-recorder" / "mismatched" / "nccl_trace_rank_0").read_bytes()
ME = os.getuid()
root_only = pytest.mark.skipif(ME != 0, reason="needs root: files of another owner, a rank of another user")


def fetch(path: Path | str, owner: int = ME, bound: int = 1 << 20, env: dict | None = None) -> str:
    probe = fetch_probe(0, str(path), owner, bound, 10)
    done = subprocess.run(["/bin/sh", *probe.argv[1:]], capture_output=True, text=True, timeout=15, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def secret(tmp_path: Path) -> Path:
    f = tmp_path / "shadow"
    f.write_text(f"root:{MARKER}:19000:0:99999:7:::\n")
    f.chmod(0o600)
    return f


def test_a_regular_file_of_the_rank_is_fetched_byte_for_byte(tmp_path):
    f = tmp_path / "nccl_trace_rank_0"
    f.write_bytes(DUMP)
    out = fetch(f)
    assert out.startswith(f"@@nodecheck encoding gzip+base64 {len(DUMP)}\n")
    assert parse_fetch(out).data == DUMP


def test_a_symlink_to_a_secret_is_refused_never_read(tmp_path):
    link = tmp_path / "nccl_trace_rank_0"
    link.symlink_to(secret(tmp_path))
    out = fetch(link)
    assert out == "@@nodecheck refused a symbolic link, not followed\n"
    fetched = parse_fetch(out)
    assert (fetched.data, fetched.refused, fetched.note) == (None, True, "refused: a symbolic link, not followed")


def test_a_file_of_another_owner_is_refused(tmp_path):
    out = fetch(secret(tmp_path), owner=ME + 4242)
    assert out == f"@@nodecheck refused owned by uid {ME}, not by the rank (uid {ME + 4242})\n"
    assert MARKER not in out


def test_a_directory_symlink_on_the_path_is_followed_only_when_root_made_it(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "trace_rank_0").write_bytes(DUMP)
    (tmp_path / "via").symlink_to(real)
    if ME == 0:  # root's own link (as /scratch -> /lustre/scratch): followed
        assert parse_fetch(fetch(tmp_path / "via" / "trace_rank_0")).data == DUMP
        os.lchown(tmp_path / "via", 65534, 65534)
    out = fetch(tmp_path / "via" / "trace_rank_0")
    assert (
        out == "@@nodecheck refused a directory on its path is a symbolic link owned by uid "
        f"{65534 if ME == 0 else ME}\n"
    )


def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "nccl_trace_rank_0"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert fetch(fifo) == "@@nodecheck refused not a regular file\n"
    assert time.monotonic() - started < 5


def test_a_hard_link_is_refused(tmp_path):
    f = tmp_path / "a"
    f.write_bytes(DUMP)
    os.link(f, tmp_path / "nccl_trace_rank_0")
    assert fetch(tmp_path / "nccl_trace_rank_0") == "@@nodecheck refused it has 2 hard links\n"


def test_past_the_bound_missing_and_dotdot(tmp_path):
    f = tmp_path / "nccl_trace_rank_0"
    f.write_bytes(DUMP)
    assert fetch(f, bound=100) == f"@@nodecheck too_large {len(DUMP)}\n"
    assert fetch(tmp_path / "nope") == "@@nodecheck missing\n"
    assert (
        fetch(f"{tmp_path}/../{tmp_path.name}/nccl_trace_rank_0")
        == "@@nodecheck refused not an absolute path free of . and ..\n"
    )


def test_without_python3_on_the_node_the_fetch_refuses_never_a_weaker_read(tmp_path):
    f = tmp_path / "nccl_trace_rank_0"
    f.write_bytes(DUMP)
    out = fetch(f, env={"PATH": str(tmp_path / "empty-bin")})
    assert out.startswith("@@nodecheck refused python3 is not installed on the node")
    assert parse_fetch(out).refused


def test_a_gzip_bomb_from_a_node_is_refused_not_inflated():
    bomb = gzip.compress(b"\0" * (64 << 20))  # 64 MiB of zeros in ~64 KiB
    text = f"@@nodecheck encoding gzip+base64 {64 << 20}\n" + base64.encodebytes(bomb).decode()
    with pytest.raises(ParseError) as e:
        parse_fetch(text, max_bytes=1 << 20)
    assert e.value.reason == f"the fetched file inflates past {1 << 20} bytes: not inflated further"
    plain = f"@@nodecheck encoding base64 {2 << 20}\n" + base64.encodebytes(b"x" * (2 << 20)).decode()
    with pytest.raises(ParseError) as e:
        parse_fetch(plain, max_bytes=1 << 20)
    assert e.value.reason == f"the fetched file is {2 << 20} bytes, more than the 1048576 asked for"


def gzip_of_zeros(mib: int) -> bytes:
    """A valid gzip of `mib` MiB of zeros, built from one flushed deflate block of 1 MiB repeated
    (compressing the whole GiB takes seconds)."""
    import struct
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = packer.compress(b"\0" * (1 << 20)) + packer.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(b"\0" * (1 << 20), crc)
    return (
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
        + block * mib
        + zlib.compressobj(9, zlib.DEFLATED, -15).flush()
        + struct.pack("<II", crc, (mib << 20) & 0xFFFFFFFF)
    )


def test_gzip_of_zeros_is_what_it_says():
    assert gzip.decompress(gzip_of_zeros(3)) == b"\0" * (3 << 20)


def test_a_1_4_mb_gzip_that_inflates_to_1_gib_is_refused_at_the_default_bound():
    inflate = gzip_of_zeros(1024)
    assert len(inflate) < 1_500_000
    text = "@@nodecheck encoding gzip+base64 1073741824\n" + base64.b64encode(inflate).decode()
    started = time.monotonic()
    with pytest.raises(ParseError) as e:
        parse_fetch(text)
    assert e.value.reason == "the fetched file inflates past 10485760 bytes: not inflated further"
    assert time.monotonic() - started < 5


# ---- the listing and the whole gathering, through the local transport --------------------------


@pytest.fixture
def rank(tmp_path):
    """A "rank": a sleeping Python whose environment names tmp_path/fr/trace_rank_ as its flight-recorder
    prefix and whose command line holds a token; as nobody when this runs as root."""
    tag = f"nodecheck-fr-{uuid.uuid4().hex[:12]}"
    fr = tmp_path / "fr"
    fr.mkdir()
    fr.chmod(0o755)
    tmp_path.chmod(0o755)
    env = {
        "PATH": os.environ["PATH"],
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "TORCH_FR_DUMP_TEMP_FILE": f"{fr}/trace_rank_",
        "HF_TOKEN": "hf_envsecret",
    }
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if ME == 0 else []
    proc = subprocess.Popen(
        [*user, sys.executable, "-c", "import time; time.sleep(120)", tag, "--hf-token", "hf_SECRETVALUE123"], env=env
    )
    uid = 65534 if ME == 0 else ME
    _wait_until_python_runs(proc.pid, uid)  # setpriv has exec'd python as the rank's user
    yield tag, fr, uid
    proc.kill()
    proc.wait()


def _wait_until_python_runs(pid: int, uid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            argv0, status = b"", ""
        if argv0 == sys.executable.encode() and f"\nUid:\t{uid}\t" in status:
            return
        time.sleep(0.02)
    raise AssertionError(f"the rank process {pid} did not start as uid {uid} within 10 s")


def gathered(tag: str):
    return gather(
        LocalTransport(),
        [Node("local", "local")],
        Where("match", tag),
        fanout=1,
        deadline=time.monotonic() + 60,
        stack_timeout_s=3,
        native=False,
        pyspy="/nonexistent/py-spy",
        fetch=True,
    )


@root_only
def test_a_rank_whose_prefix_names_a_root_only_file_gets_it_refused_never_copied(rank, tmp_path):
    """TORCH_FR_DUMP_TEMP_FILE=<dir>/trace_rank_ where trace_rank_1 is root's 0600 file and trace_rank_2
    a symlink to it: both refused with the reason; the rank's own trace_rank_0 is fetched and parsed."""
    tag, fr, uid = rank
    (fr / "trace_rank_0").write_bytes(DUMP)
    os.chown(fr / "trace_rank_0", uid, uid)
    shadow = fr / "trace_rank_1"
    shadow.write_text(f"root:{MARKER}:19000:0:99999:7:::\n")
    shadow.chmod(0o600)
    (fr / "trace_rank_2").symlink_to(shadow)
    g = gathered(tag)
    f = analysis.examine(g, g.dumps, 3)
    doc = record.to_json(f, "job", "s", "f")
    out = record.files(f, doc, record.render(f, "job"))
    everything = json.dumps(doc) + "".join(v if isinstance(v, str) else v.decode("latin-1") for v in out.values())
    assert MARKER not in everything
    by_name = {Path(d["path"]).name: d for d in doc["dumps"]}
    assert by_name["trace_rank_0"]["read"] is True and by_name["trace_rank_0"]["file"]
    assert by_name["trace_rank_1"]["error"] == f"refused: owned by uid 0, not by the rank that names it (uid {uid})"
    assert by_name["trace_rank_2"]["error"] == "refused: a symbolic link, not followed"
    assert by_name["trace_rank_1"]["file"] is None and by_name["trace_rank_2"]["file"] is None
    assert any(n.endswith("trace_rank_2 on local: refused: a symbolic link, not followed") for n in doc["notes"])
    # the rank's command line: in the record, redacted
    assert "hf_SECRETVALUE123" not in everything and "hf_envsecret" not in everything
    (proc,) = [p for p in doc["processes"] if tag in p["args"]]
    assert proc["args"].endswith(f"{tag} --hf-token <redacted>")


@root_only
def test_a_file_swapped_for_a_symlink_after_the_listing_is_refused_by_the_fetch(rank):
    """The listing saw the rank's regular file; by the fetch it is a symlink to root's secret: the fetch's
    own checks (O_NOFOLLOW, fstat) refuse it."""
    tag, fr, uid = rank
    (fr / "trace_rank_0").write_bytes(DUMP)
    os.chown(fr / "trace_rank_0", uid, uid)
    shadow = fr.parent / "shadow"
    shadow.write_text(MARKER)
    shadow.chmod(0o600)
    out = fetch(fr / "trace_rank_0", owner=uid)
    assert parse_fetch(out).data == DUMP
    (fr / "trace_rank_0").unlink()
    (fr / "trace_rank_0").symlink_to(shadow)
    assert fetch(fr / "trace_rank_0", owner=uid) == "@@nodecheck refused a symbolic link, not followed\n"
    shadow.unlink()
    shadow.write_text(MARKER)  # root's regular file put in the rank's place
    (fr / "trace_rank_0").unlink()
    shadow.rename(fr / "trace_rank_0")
    assert fetch(fr / "trace_rank_0", owner=uid) == f"@@nodecheck refused owned by uid 0, not by the rank (uid {uid})\n"


# ---- --dumps DIR ----------------------------------------------------------------------------------


def test_local_dumps_never_follow_a_link_out_of_the_directory(tmp_path):
    outside = secret(tmp_path)
    dumps = tmp_path / "dumps"
    (dumps / "gpu-a07").mkdir(parents=True)
    (dumps / "nccl_trace_rank_0").write_bytes(DUMP)
    (dumps / "nccl_trace_rank_1").symlink_to(outside)
    (dumps / "gpu-a07" / "nccl_trace_rank_2").symlink_to(outside)
    (dumps / "gpu-b01").symlink_to(tmp_path)  # a node directory that is a link: not entered
    os.mkfifo(dumps / "gpu-a07" / "nccl_trace_rank_3")
    reads = {(r.node, Path(r.path).name): r for r in read_local_dumps(str(dumps))}
    assert reads[("", "nccl_trace_rank_0")].data == DUMP
    assert (reads[("", "nccl_trace_rank_1")].data, reads[("", "nccl_trace_rank_1")].note) == (
        None,
        "not read: a symbolic link, not followed",
    )
    assert reads[("gpu-a07", "nccl_trace_rank_2")].note == "not read: a symbolic link, not followed"
    assert reads[("gpu-a07", "nccl_trace_rank_3")].note == "not read: not a regular file"
    assert reads[("", "gpu-b01")].note == "not read: a symbolic link, not followed"
    assert all(MARKER.encode() not in (r.data or b"") for r in reads.values())


def test_local_dumps_past_the_bound_are_listed_not_read(tmp_path, monkeypatch):
    from nodecheck.forensics import collect

    monkeypatch.setattr(collect, "MAX_LOCAL_DUMP_BYTES", 100)
    (tmp_path / "nccl_trace_rank_0").write_bytes(DUMP)
    (r,) = read_local_dumps(str(tmp_path))
    assert (r.data, r.note) == (None, f"not read: {len(DUMP)} bytes, more than 100")
    assert len(DUMP) < MAX_LOCAL_DUMP_BYTES

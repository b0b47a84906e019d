"""parse_sample / read_progress on recorded and constructed watch samples, and the probe script run by a
real `sh` on this machine (pattern quoting, self-exclusion, the 64 KiB tail window)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.sections import Section
from nodecheck.parsers.watch_sample import (
    LINE_CHARS,
    TAIL_BYTES,
    GpuSample,
    Proc,
    parse_sample,
    read_gpus,
    read_progress,
)
from nodecheck.watch.config import ProgressSource, WatchConfig
from nodecheck.watch.probe import PROBE_NAME, SCRIPT, sample_argv, sample_probe
from tests import everyone_tmp
from tests.growth import assert_linear
from tests.helpers import data

tmp_path = everyone_tmp.tmp_path  # the log is opened as its owner, root's as nobody: a directory everyone may enter

TRAINING = "watch/constructed-sample-h100x8-training-torchtitan.txt"
MARKERS = "watch/constructed-sample-log-tail-holds-marker-lines.txt"
CUT = "watch/constructed-sample-cut-off-in-log-tail.txt"
BARE = "watch/recorded-sample-debian12-dash-no-nvidia-smi-no-log-no-process.txt"
RANKS = r"rank (?P<rank>\d+) step \d+ time (?P<seconds>\d+(?:\.\d+)?)s"


# -- parse_sample -----------------------------------------------------------------------------------


def test_training_node_sample():
    s = parse_sample(data(TRAINING))
    assert s.clock == 1767225600.25
    assert len(s.gpus) == 8 and s.gpu_error == ""
    assert s.gpus[0] == GpuSample(0, 100.0, 612.45, 700.0, 71234.0, 81559.0)
    assert [g.util_pct for g in s.gpus] == [100, 100, 99, 100, 100, 100, 98, 100]
    assert s.gpus[6].power_w == 606.31
    assert s.processes[0] == Proc(
        48211, "Sl", 3725, "/usr/bin/python3 -u train.py --job.config_file llama3_8b.toml", ppid=48190
    )
    assert [p.pid for p in s.alive] == [48211, 48212]  # the zombie (Zl) is not alive
    assert s.log_size == 1843922 and s.log_mtime == 1767225599.912345678 and s.log_error == ""
    assert s.heartbeat_mtime == 1767225598.5 and s.heartbeat_error == ""
    # the log is longer than the window: the first line of the tail may be cut, so it is dropped
    assert s.log_tail.startswith("rank 0 step 3853 time 0.131s\n")
    assert s.log_tail.endswith("rank 1 step 3854 time 0.128s\n")


def test_missing_tools_and_files_are_conditions_not_failures():
    s = parse_sample(data(BARE))
    assert s.clock == 1795967836.545727302
    assert s.gpus == () and s.gpu_error == "nodecheck-watch: 8: nvidia-smi: not found"
    assert s.processes == () and s.procs_error == "" and s.processes_known
    assert s.log_size is None and s.log_tail == ""
    assert s.log_error == "stat: cannot statx '/root/node7/train.log': No such file or directory"
    assert s.heartbeat_mtime is None
    assert s.heartbeat_error == "date: /root/node7/heartbeat: No such file or directory"


def test_log_lines_that_look_like_markers_stay_in_the_tail():
    s = parse_sample(data(MARKERS))
    assert s.log_tail == (
        "step: 10\n@@nodecheck end log_tail rc=0\n@@nodecheck begin gpus\nstep: 11\n@@nodecheck end log_tail rc=7"
    )
    assert s.gpus == (GpuSample(0, 0.0, 71.3, 700.0, 0.0, 81559.0),)
    assert not s.procs_watched and not s.heartbeat_watched and s.log_watched
    assert read_progress(s.log_tail, ProgressSource(log="x")).step == 11


def test_output_cut_off_in_the_tail_keeps_whole_lines():
    s = parse_sample(data(CUT))
    assert s.log_tail == "step: 41  loss: 7.2  tps: 5,380\n"
    assert s.log_error == ""
    assert [p.pid for p in s.processes] == [9001]
    assert read_progress(s.log_tail, ProgressSource(log="x")).throughput == 5380.0


def test_not_a_sample_is_a_parse_error():
    with pytest.raises(ParseError, match="no 'clock' section"):
        parse_sample("Permission denied (publickey).\n")
    with pytest.raises(ParseError, match="clock 'Thu Jan  1' is not epoch seconds"):
        parse_sample("@@nodecheck begin clock\nThu Jan  1\n@@nodecheck end clock rc=0\n")
    bad_proc = data(CUT).replace("  9001      1 Sl         120 python3 train.py", "ps: unknown option etimes")
    with pytest.raises(ParseError, match="process line 'ps: unknown option etimes'"):
        parse_sample(bad_proc)


def test_procs_section_failure_is_unknown_not_gone():
    text = data(CUT).replace(
        "  9001      1 Sl         120 python3 train.py\n@@nodecheck end procs rc=0",
        "pgrep: invalid option -- 'a'\n@@nodecheck end procs rc=2",
    )
    s = parse_sample(text)
    assert s.processes == () and s.procs_error == "pgrep: invalid option -- 'a'"
    assert not s.processes_known


# -- the gpus section on real nvidia-smi CSV --------------------------------------------------------


def test_gpus_from_real_csv_with_units_header():
    # the paste holds two queries separated by '---': the first is --query-gpu with units
    text = data("nvidia-smi-query-csv/issue-notes-query-gpu-and-compute-apps-csv-units.txt").split("---")[0]
    gpus, error = read_gpus(Section("gpus", text, 0))
    assert error == ""
    assert gpus == (GpuSample(0, 95.0, None, None, 745.0, 6144.0),)


def test_gpus_from_real_csv_bracketed_na():
    text = data("nvidia-smi-query-csv/netdata-tesla-p100-query-gpu-csv-NA-bracketed.txt")
    gpus, error = read_gpus(Section("gpus", text, 0))
    assert error == ""
    assert gpus == (GpuSample(0, 0.0, 28.16, None, 0.0, None),)


def test_gpus_failure_words_and_garbage_are_errors_on_the_node():
    assert read_gpus(Section("gpus", "No devices were found\n", 6)) == ((), "No devices were found")
    gpus, error = read_gpus(Section("gpus", "Failed to initialize NVML: Driver/library version mismatch\n", 0))
    assert gpus == () and error == (
        "unreadable nvidia-smi output: Failed to initialize NVML: Driver/library version mismatch"
    )
    gpus, error = read_gpus(Section("gpus", "0, 100, 650.0, 700.0, 1, 2\n0, 100, 650.0, 700.0, 1, 2\n", 0))
    assert error == "unreadable nvidia-smi output: a GPU index appears twice"
    gpus, error = read_gpus(Section("gpus", "0, 100, lots, 700.0, 1, 2\n", 0))
    assert error == "unreadable nvidia-smi output: power.draw 'lots' is not a number"
    gpus, error = read_gpus(Section("gpus", "0, [N/A], [N/A], 700.00, 1, 2\n", 0))
    assert gpus == (GpuSample(0, None, None, 700.0, 1.0, 2.0),) and error == ""


# -- read_progress ----------------------------------------------------------------------------------


def test_read_progress_torchtitan_lines_and_per_rank_times():
    tail = parse_sample(data(TRAINING)).log_tail
    r = read_progress(tail, ProgressSource(log="x", rank_time_regex=RANKS))
    assert r.step == 3854
    assert r.throughput == 5400.0  # "tps: 5,400", not the loss 7.1234
    assert r.rank_seconds == {0: 0.130, 1: 0.128}  # each rank's LAST line
    assert not r.done and not r.checkpointing
    assert r.last_line == "rank 1 step 3854 time 0.128s"


def test_read_progress_done_and_checkpoint_only_after_the_last_step():
    src = ProgressSource(log="x")
    saving = "step: 499  tps: 5,400\nstep: 500  tps: 5,410\n[rank0]: Saving checkpoint at step 500\n"
    r = read_progress(saving, src)
    assert (r.step, r.checkpointing, r.done) == (500, True, False)
    resumed = saving + "step: 501  tps: 5,380\n"
    assert read_progress(resumed, src).checkpointing is False
    done = resumed + "training complete\n"
    r = read_progress(done, src)
    assert (r.step, r.done, r.last_line) == (501, True, "training complete")
    # a new run appended to the same log: the old "done" is before the new steps
    assert read_progress(done + "step: 1  tps: 100\n", src).done is False


def test_read_progress_unit_after_and_plain_forms():
    src = ProgressSource(log="x")
    assert read_progress("iter 5 | 12,345.6 tokens/s | loss 2.0\n", src).throughput == 12345.6
    assert read_progress("step=7 300 samples/s\n", src).throughput == 300.0
    assert read_progress("nothing here\n", src).step is None
    assert read_progress("", src).last_line == ""


def test_read_progress_group_that_is_not_a_number_is_a_parse_error():
    src = ProgressSource(log="x", step_regex=r"iteration (?P<step>\S+)")
    with pytest.raises(ParseError, match="the step group captured 'seven', not a whole number"):
        read_progress("iteration seven\n", src)


# -- the probe, run by a real sh ---------------------------------------------------------------------


def test_probe_argv_carries_values_as_positional_arguments():
    cfg = WatchConfig(
        match="a'b; rm -rf /", progress=ProgressSource(log="/logs/{node}/train.log", heartbeat="/hb/{node}")
    )
    probe = sample_probe(cfg, "gpu017")
    assert probe.name == PROBE_NAME == "watch"
    assert probe.argv == (
        "sh",
        "-c",
        SCRIPT,
        "nodecheck-watch",
        "a'b; rm -rf /",
        "/logs/gpu017/train.log",
        "/hb/gpu017",
        str(TAIL_BYTES),
        "",
    )
    assert "gpu017" not in SCRIPT and "rm -rf" not in SCRIPT
    assert probe.timeout_s == 20.0
    assert sample_probe(WatchConfig(interval_s=0.5), "n").timeout_s == 0.5


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs procps pgrep")
def test_probe_with_real_sh_quoting_self_exclusion_and_tail_window(tmp_path):
    pattern = 'nodecheck-fake-train.py --tag it\'s; a "b"  c'
    log = tmp_path / "train.log"
    filler = "x" * 99 + "\n"
    log.write_text(filler * ((TAIL_BYTES // 100) + 50) + "step: 41  tps: 5,300\nstep: 42  tps: 5,400\n")
    beat = tmp_path / "beat"
    beat.write_text("")
    os.utime(beat, (1767225600.5, 1767225600.5))
    # a process whose argv holds the pattern verbatim (quotes, ';', two spaces): exec -a sets argv[0]
    sleeper = subprocess.Popen(["bash", "-c", 'exec -a "$0" sleep 60', pattern])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with open(f"/proc/{sleeper.pid}/cmdline", "rb") as f:
                if f.read().startswith(pattern.encode()):
                    break
            time.sleep(0.02)
        cfg = WatchConfig(match=pattern, progress=ProgressSource(log=str(log), heartbeat=str(beat)))
        run = subprocess.run(sample_argv(cfg, "n1"), capture_output=True, text=True, timeout=20)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert run.returncode == 0, run.stderr
    s = parse_sample(run.stdout)
    # exactly the sleeper: not the probe's own sh, nor its subshells, though their argv holds the pattern
    assert [(p.pid, p.args) for p in s.processes] == [(sleeper.pid, pattern + " 60")]
    assert s.log_size == log.stat().st_size
    assert len(s.log_tail.encode()) < TAIL_BYTES  # the cut first line was dropped
    assert s.log_tail.endswith("step: 41  tps: 5,300\nstep: 42  tps: 5,400\n")
    assert set(s.log_tail.splitlines()[:-2]) == {"x" * 99}
    assert s.heartbeat_mtime == 1767225600.5
    r = read_progress(s.log_tail, cfg.progress)
    assert (r.step, r.throughput) == (42, 5400.0)


def test_probe_with_real_sh_no_pattern_no_paths():
    run = subprocess.run(sample_argv(WatchConfig(), "n1"), capture_output=True, text=True, timeout=20)
    s = parse_sample(run.stdout)
    assert not s.procs_watched and not s.log_watched and not s.heartbeat_watched
    assert s.log_error == "" and s.heartbeat_error == "" and s.processes == ()
    assert abs(s.clock - time.time()) < 60


# -- hostile review (R2) ----------------------------------------------------------------------------


@pytest.mark.growth
def test_a_line_of_numbers_costs_linear_time_and_throughput_is_still_read():
    """A printed tensor ("1,2,3,...") on one 64 KiB line: the default throughput regex was O(n^2) on it
    (0.6 s at 8 KiB, ~40 s at 64 KiB, per node per tick). Growth, not seconds (tests/growth.py)."""
    src = ProgressSource(log="x")
    tail = lambda n: "step: 42  loss: 7.1  tps: 5,400\n" + "1," * n + "\n"  # noqa: E731 - after the last tps
    assert_linear(lambda text: read_progress(text, src), tail, TAIL_BYTES // 8 - 5)
    r = read_progress(tail(TAIL_BYTES // 2 - 20), src)
    assert (r.step, r.throughput) == (42, 5400.0)
    assert read_progress("loss 7.12 5400tps\n", src).throughput == 5400.0
    assert read_progress("iter 5 | 12,345.6 tokens/s\n", src).throughput == 12345.6


@pytest.mark.growth
def test_a_users_quadratic_regex_sees_at_most_line_chars_of_a_line():
    # a line longer than LINE_CHARS is cut there: 4x the line costs no more (x2 bound: growth, not seconds)
    src = ProgressSource(log="x", step_regex=r".*step (?P<step>\d+)")
    binary = lambda n: "\x00\ufffd" * n + "\n" + "[rank0] step 7 done\n"  # noqa: E731
    assert LINE_CHARS < 2 * (TAIL_BYTES // 8)  # both lengths are past the cut
    assert_linear(lambda text: read_progress(text, src), binary, TAIL_BYTES // 8, ratio=2)
    assert read_progress(binary(TAIL_BYTES // 2), src).step == 7
    assert read_progress("x" * (LINE_CHARS - 6) + "step 8\n", src).step == 8
    assert read_progress("x" * (LINE_CHARS - 3) + "step 8\n", src).step is None  # past the cut


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs procps pgrep")
def test_probe_under_a_login_shell_that_does_not_exec_counts_no_ancestor(tmp_path):
    """sshd runs `$SHELL -c LINE`; a shell that does not exec the last command (or a wrapper) stays the
    probe's grandparent with the pattern in its argv: it was listed as the job's process, so a node
    whose job had died read as running."""
    from nodecheck.core.model import Probe
    from nodecheck.transport import remote_command

    argv = sample_argv(WatchConfig(match="nodecheck-no-such-train.py"), "n1")
    line = remote_command(Probe("watch", argv), 20) + "; :"  # "; :": bash cannot exec it
    run = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=30)
    s = parse_sample(run.stdout)
    assert s.processes == () and s.procs_error == "" and s.processes_known


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs procps pgrep")
def test_probe_with_hostile_pattern_and_paths(tmp_path):
    """A pattern with a leading '-', $(...) and a newline-free injection attempt, paths with spaces and
    quotes: all reach pgrep/stat/tail as one argument each; nothing runs."""
    marker = tmp_path / "pwned"
    pattern = f"-x $(touch {marker}) `touch {marker}`; touch {marker}"
    log = tmp_path / 'it\'s a "log" $(touch pwned).txt'
    log.write_text("step: 3  tps: 10\n")
    cfg = WatchConfig(match=pattern, progress=ProgressSource(log=str(log), heartbeat=str(tmp_path / "-beat")))
    run = subprocess.run(sample_argv(cfg, "n1"), capture_output=True, text=True, timeout=20, cwd=tmp_path)
    s = parse_sample(run.stdout)
    assert not marker.exists() and not (tmp_path / "pwned").exists()
    assert s.processes == () and s.procs_error == ""
    assert s.log_size == 17 and read_progress(s.log_tail, cfg.progress).step == 3
    assert s.heartbeat_error.endswith("No such file or directory") and s.heartbeat_mtime is None


def test_probe_log_that_is_a_directory_a_fifo_or_binary(tmp_path):
    """A FIFO (or /dev/zero) never ends a `tail -c`: every sample would time out and the node read as
    unresponsive. A directory or a FIFO is a log error; a binary log is just text without steps."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, error in [
        (tmp_path, f"nodecheck-watch: {tmp_path}: not read: not a regular file"),
        (fifo, f"nodecheck-watch: {fifo}: not read: not a regular file"),
    ]:
        cfg = WatchConfig(progress=ProgressSource(log=str(path)))
        run = subprocess.run(sample_argv(cfg, "n1"), capture_output=True, text=True, timeout=10)
        s = parse_sample(run.stdout)
        assert s.log_error == error and s.log_tail == ""
    binary = tmp_path / "core"
    binary.write_bytes(bytes(range(256)) * 1024 + b"\nstep: 9\n")
    cfg = WatchConfig(progress=ProgressSource(log=str(binary)))
    run = subprocess.run(sample_argv(cfg, "n1"), capture_output=True, text=True, errors="replace", timeout=10)
    s = parse_sample(run.stdout)
    assert s.log_error == "" and s.log_size == 256 * 1024 + 9
    assert read_progress(s.log_tail, cfg.progress).step == 9


def test_probe_sets_lc_all_c_itself():
    """The SSH transport wraps commands in `env LC_ALL=C`, the local transport does not: error lines
    (the evidence) and tool output stay in one language either way."""
    assert SCRIPT.lstrip().startswith("LC_ALL=C; export LC_ALL\n")
    run = subprocess.run(
        sample_argv(WatchConfig(progress=ProgressSource(log="/nonexistent/x")), "n1"),
        capture_output=True,
        text=True,
        timeout=20,
        env={**os.environ, "LC_ALL": "de_DE.UTF-8"},
    )
    assert parse_sample(run.stdout).log_error.endswith("No such file or directory")

"""CLI wiring: exit codes, bad input is 64 and runs nothing, --local and --format json end to end."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodecheck.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
HEALTHY = DATA / "ibstat/gpud-h100-ndr-ib-mixed-cx6dx-ethernet-down-disabled.txt"
IB_ONLY = str(DATA / "playbooks" / "ib-only.yml")
DOWN = DATA / "ibstat/derived-h100-ndr-mlx5_3-down-polling.txt"


@pytest.fixture
def fake_ibstat(tmp_path, monkeypatch):
    """An `ibstat` first on PATH that replays a recording (or hangs / exits as told)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    def install(body):
        tool = bin_dir / "ibstat"
        tool.write_text("#!/bin/sh\n" + body + "\n")
        tool.chmod(0o755)

    return install


def test_help_documents_the_exit_codes():
    out = subprocess.run([sys.executable, "-m", "nodecheck", "run", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for line in ("0   every node passed", "2   at least one failure", "64  bad input"):
        assert line in out.stdout


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run"], "an inventory (hosts.yml) is required"),
        (["run", "--fanout", "0", "x.yml"], "must be >= 1"),
        (["run", "--format", "xml", "x.yml"], "invalid choice"),
        (["run", "nope.yml"], "nope.yml: cannot read"),
        (["run", "--local", "--playbook", "defualt"], "did you mean 'default'"),
        (["run", "--local", "--nodes", "gpu1"], "--local runs on this machine only"),
    ],
)
def test_bad_input_exits_64_and_says_why(argv, fragment, capsys, tmp_path):
    assert exit_code(argv + ["--output-dir", str(tmp_path / "reports")]) == 64
    assert fragment in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()  # nothing was run, nothing was written


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--deadline", "inf"], "argument --deadline: must be a finite number of seconds, got inf"),
        (["--deadline", "nan"], "must be a finite number"),
        (["--deadline", "1e10"], "argument --deadline: must be <= 86400 seconds"),
        (["--deadline", "soon"], "must be a number of seconds, got 'soon'"),
        (["--connect-timeout", "nan"], "argument --connect-timeout: must be a finite number"),
        (["--connect-timeout=-inf"], "must be a finite number"),
        (["--connect-timeout", "601"], "argument --connect-timeout: must be <= 600 seconds"),
        (["--fanout", "4097"], "argument --fanout: must be <= 4096"),
        (["--fanout", "1e3"], "argument --fanout: must be a whole number, got '1e3'"),
        (["--nodes", ""], "argument --nodes: must name at least one node"),
    ],
)
def test_bad_argument_values_exit_64_before_anything_is_read(argv, fragment, capsys, tmp_path):
    assert exit_code(["run", "hosts.yml"] + argv + ["--output-dir", str(tmp_path / "reports")]) == 64
    assert fragment in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


def test_the_largest_accepted_values_parse():
    from nodecheck.cli import build_parser

    args = build_parser().parse_args(
        ["run", "h.yml", "--deadline", "86400", "--connect-timeout", "600", "--fanout", "4096"]
    )
    assert (args.deadline, args.connect_timeout, args.fanout) == (86400.0, 600.0, 4096)


def test_the_cli_deadline_bound_is_the_playbook_one():
    from nodecheck.app import defaults
    from nodecheck.config import playbook as playbook

    assert defaults.MAX_DEADLINE_S == playbook.MAX_DEADLINE_S


def test_the_cli_drain_on_words_are_the_gate_ones():
    """cli keeps its own copy (--help must not import pydantic); the config file uses gate's."""
    import typing

    from nodecheck.cli import arguments
    from nodecheck.config.gate_settings import DrainOn
    from nodecheck.gate import decide as gate

    assert arguments.DRAIN_ON == tuple(gate.DRAIN_STATUS) == typing.get_args(DrainOn)


def test_a_huge_nodes_hostlist_is_refused_not_expanded(tmp_path, capsys):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("nodes:\n  gpu1: {}\n")
    argv = ["run", str(inventory), "--nodes", "x[1-100000000]", "--output-dir", str(tmp_path / "reports")]
    assert exit_code(argv) == 64
    assert "--nodes: hostlist 'x[1-100000000]' names 100,000,000 nodes, more than 100,000" in capsys.readouterr().err


def test_an_unknown_subcommand_exits_64(capsys):
    assert exit_code(["frobnicate"]) == 64
    assert "invalid choice" in capsys.readouterr().err


def exit_code(argv):
    try:
        return main(argv)
    except SystemExit as e:  # argparse exits itself
        return e.code


def test_local_run_prints_one_json_document_and_stores_the_report(fake_ibstat, tmp_path, capsys):
    fake_ibstat(f"cat '{HEALTHY}'")
    code = main(["run", "--local", "--playbook", IB_ONLY, "--format", "json", "--output-dir", str(tmp_path)])
    out = capsys.readouterr()
    doc = json.loads(out.out)  # exactly one document on stdout
    assert (code, doc["status"], doc["complete"]) == (0, "pass", True)
    [node] = doc["nodes"]
    assert len(node["results"]) == 8 and {r["status"] for r in node["results"]} == {"pass"}
    [report_dir] = [p for p in tmp_path.iterdir() if p.name != "bin"]
    assert report_dir.name.endswith("_ib-only")
    assert (report_dir / "captures" / node["node"] / "ibstat.txt").read_bytes() == HEALTHY.read_bytes()
    assert f"report: {report_dir}" in out.err


@pytest.mark.parametrize(
    "body, code, status",
    [
        (f"cat '{DOWN}'", 2, "fail"),
        ("exit 3", 3, "error"),
        ("sleep 30", 3, "timeout"),
    ],
)
def test_local_run_exit_codes(fake_ibstat, tmp_path, capsys, body, code, status):
    fake_ibstat(body)
    book = tmp_path / "fast.yml"
    book.write_text("checks:\n  ib.ports: {timeout_s: 0.5, expected_ports: 8, min_rate_gbps: 400}\n")
    assert main(["run", "--local", "--playbook", str(book), "--output-dir", str(tmp_path / "r")]) == code
    text = capsys.readouterr().out
    assert f"Status {status.upper()} (exit {code})" in text


def test_local_run_with_a_missing_tool_is_an_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no ibstat anywhere
    assert main(["run", "--local", "--playbook", IB_ONLY, "--output-dir", str(tmp_path / "r")]) == 3
    assert "ibstat not found on the node (exit 127)" in capsys.readouterr().out


def test_checks_lists_every_check_with_its_parameters(capsys):
    assert main(["checks"]) == 0
    out = capsys.readouterr().out
    assert "\nib.ports  (node)  Every judged HCA port is Active/LinkUp" in out
    assert "\nnccl.version  (fleet)  The NCCL library the loader resolves" in out
    assert (
        "gpu.health  (node)  Per GPU: ECC, retired pages, row remaps, throttling, persistence, "
        "PCIe link, NVLinks, temperature and power limit" in out
    )
    for param in ("link_layer", "min_rate_gbps", "expected_ports", "devices", "timeout_s"):
        assert f"    {param} " in out


def test_a_report_that_cannot_be_written_is_not_a_clean_bill_of_health(fake_ibstat, tmp_path, capsys):
    fake_ibstat(f"cat '{HEALTHY}'")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    assert main(["run", "--local", "--playbook", IB_ONLY, "--output-dir", str(blocker / "reports")]) == 3
    out = capsys.readouterr()
    assert "could not write the report under" in out.err
    assert "8 of 8 pass" in out.out  # the verdicts themselves are still shown, and the exit the run gives
    assert "1 node: 1 pass. Status PASS, but exit 3: could not write the report under" in out.out
    assert "report: NOT WRITTEN (see the error above); exit 3" in out.out

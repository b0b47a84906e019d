"""The custom-check probe, run for real through sh: exit codes in band, output bounded, no shell
unless asked, and a command that cannot forge its own exit code."""

from __future__ import annotations

import subprocess

import pytest

from nodecheck.checks.command import CommandParams, command
from nodecheck.core.errors import ParseError
from nodecheck.core.model import Status
from nodecheck.probes.command import OUTPUT_MAX, command_probe, parse_command_output
from tests.helpers import captures


def run(*argv: str) -> tuple[int, str]:
    probe = command_probe(argv)
    done = subprocess.run(probe.argv, capture_output=True, text=True, timeout=30, check=False)
    return done.returncode, done.stdout


def test_the_output_and_the_exit_code_come_back_and_the_probe_itself_exits_0():
    rc, out = run("sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3")
    assert rc == 0
    got = parse_command_output(out)
    assert (got.exit_code, got.cut) == (3, False)
    assert got.output == "to-stdout\nto-stderr\n"


def test_arguments_are_not_split_or_expanded_by_a_shell():
    _, out = run("printf", "%s|", "two words", "$HOME", "*", "a;b")
    assert parse_command_output(out).output == "two words|$HOME|*|a;b|"


def test_a_missing_command_is_exit_127_and_judged_an_error():
    _, out = run("nodecheck-no-such-command-x")
    assert parse_command_output(out).exit_code == 127
    want = CommandParams(argv=["nodecheck-no-such-command-x"])
    [v] = command(captures(command_probe(want.command()), out), want)
    assert v.status is Status.ERROR and "command not found on the node (exit 127)" in v.message


def test_output_is_bounded_and_the_command_still_runs_to_its_own_exit():
    _, out = run("sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x; exit 4")
    got = parse_command_output(out)
    assert got.cut is True and got.exit_code == 4  # drained, not killed by SIGPIPE (141)
    assert len(got.output) == OUTPUT_MAX


def test_the_command_cannot_forge_the_exit_line():
    _, out = run("sh", "-c", "printf '\\n@@nodecheck exit 0\\n'; echo 0 >&5; exit 9")
    got = parse_command_output(out)
    assert got.exit_code == 9 and "@@nodecheck exit 0" in got.output


def test_stdin_is_empty():
    _, out = run("cat")
    assert parse_command_output(out) == parse_command_output("\n@@nodecheck exit 0\n")


def test_a_shell_script_runs_with_shell_true():
    want = CommandParams(sh="echo $((6 * 7)) | tr 4 X", shell=True)
    _, out = run(*want.command())
    assert parse_command_output(out).output == "X2\n"


def test_a_probe_cut_before_its_exit_line_is_a_parse_error():
    with pytest.raises(ParseError, match="no exit code line"):
        parse_command_output("half of the out")
    with pytest.raises(ParseError, match="unreadable exit code"):
        parse_command_output("x\n@@nodecheck exit -\n")

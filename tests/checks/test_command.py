"""command: custom checks judged by exit code, regular expressions and a number against a band."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from nodecheck.checks.command import CommandParams, command
from nodecheck.core.model import Status
from nodecheck.probes.command import OUTPUT_MAX, command_probe
from tests.helpers import captures

# a real `df -P /home` output (coreutils, POSIX format), as the command's output
DF = (
    "Filesystem                1024-blocks      Used Available Capacity Mounted on\n"
    "nfs01:/export/home         1073217536 901423104 171794432      84% /home\n"
)


def judge(output: str, exit_code: int = 0, **params) -> list:
    want = CommandParams(**params)
    probe = command_probe(want.command())
    printed = f"{output}\n@@nodecheck exit {exit_code}\n"
    return list(command(captures(probe, printed), want))


def test_exit_zero_passes_and_names_the_command():
    [v] = judge(DF, argv=["df", "-P", "/home"], description="home on NFS")
    assert v.status is Status.PASS
    assert v.message == "home on NFS: df -P /home: exit 0"
    assert v.observed["exit_code"] == 0 and v.excerpt.startswith("Filesystem")


def test_an_unexpected_exit_fails_with_the_first_output_line():
    [v] = judge("mountpoint: /home: not a mountpoint", 1, argv=["mountpoint", "/home"])
    assert v.status is Status.FAIL
    assert v.message == "mountpoint /home: exit 1, expected 0: 'mountpoint: /home: not a mountpoint'"
    assert v.expected == {"exit": [0]}


def test_fail_status_warn_makes_a_failed_expectation_a_warning():
    [v] = judge("", 3, argv=["/opt/site/check.sh"], fail_status="warn", exit=[0, 2])
    assert v.status is Status.WARN and "exit 3, expected 0 or 2" in v.message


def test_exit_127_is_an_error_naming_a_missing_command():
    [v] = judge("sh: 1: site-check: not found", 127, argv=["site-check"])
    assert v.status is Status.ERROR and v.message == "site-check: command not found on the node (exit 127)"


def test_match_and_no_match_are_judged_on_the_output():
    [ok] = judge(DF, argv=["df", "-P", "/home"], match=r"\s/home$", no_match="tmpfs")
    assert ok.status is Status.PASS
    assert ok.message == "df -P /home: exit 0, output matches '\\\\s/home$', output does not match 'tmpfs'"
    [missing] = judge(DF, argv=["df", "-P", "/home"], match="/scratch$")
    assert missing.status is Status.FAIL and "output does not match '/scratch$'" in missing.message
    [found] = judge(DF, argv=["df", "-P", "/home"], no_match=r"\d+%")
    assert found.status is Status.FAIL and found.observed["matched"] == "84%"


def test_a_number_is_judged_against_a_floor_and_a_ceiling():
    floor = {"regex": r"(\d+)\s+\d+% /home", "band": {"fail_below": 50_000_000, "warn_below": 200_000_000}}
    [v] = judge(DF, argv=["df", "-P", "/home"], value={**floor, "name": "available", "unit": "KiB"})
    assert v.status is Status.WARN
    assert v.message == "df -P /home: available 1.71794e+08 KiB, expected >= 2e+08 KiB"
    assert v.observed["available"] == 171794432
    ceiling = {"regex": r"(\d+)% /home", "band": {"fail_above": 90, "warn_above": 80}, "unit": "%"}
    [c] = judge(DF, argv=["df", "-P", "/home"], value=ceiling)
    assert c.status is Status.WARN and "value 84 %, expected <= 80 %" in c.message
    [passed] = judge(DF, argv=["df", "-P", "/home"], value={**ceiling, "band": {"fail_above": 95}})
    assert passed.status is Status.PASS and passed.message.endswith("exit 0, value 84 % (<= 95 %)")


def test_a_number_missing_from_the_output_is_an_error_not_a_pass():
    [v] = judge("no such file", 0, argv=["cat", "/x"], value={"regex": r"(\d+) MB", "band": {"fail_below": 1}})
    assert v.status is Status.ERROR and "no value in the output" in v.message


def test_fail_status_warn_caps_a_failing_band():
    rule = {"regex": r"(\d+)% /home", "band": {"fail_above": 50}}
    [v] = judge(DF, argv=["df", "-P", "/home"], value=rule, fail_status="warn")
    assert v.status is Status.WARN


def test_cut_output_is_said_in_the_excerpt():
    [v] = judge("x" * (OUTPUT_MAX + 1), argv=["yes"])
    assert v.status is Status.PASS and v.observed["output_cut"] is True
    assert v.excerpt.startswith("[output cut at 65536 bytes, judged on what was kept]\nxxx")


def test_a_shell_script_runs_through_sh_only_with_shell_true():
    want = CommandParams(sh="grep -c processor /proc/cpuinfo | grep -qx 128", shell=True)
    assert want.command() == ("sh", "-c", "grep -c processor /proc/cpuinfo | grep -qx 128", "nodecheck-custom")


@pytest.mark.parametrize(
    "params, said",
    [
        ({"sh": "df -h | grep /home"}, "say shell: true"),
        ({"argv": "df -h /home"}, "Input should be a valid list"),
        ({"argv": ["df"], "sh": "df", "shell": True}, "argv or sh, not both"),
        ({"argv": ["df"], "shell": True}, "shell: true goes with sh"),
        ({}, "argv\n  Field required"),
        ({"argv": None}, "give the command as argv"),
        ({"argv": ["grep", "x"], "match": "(unclosed"}, "not a valid regular expression"),
        ({"argv": ["df"], "value": {"regex": r"\d+", "band": {"fail_below": 1}}}, "needs a group"),
        ({"argv": ["df"], "value": {"regex": "(\\d+)", "band": {"fail_below": 1, "fail_above": 2}}}, "band"),
        ({"argv": ["a\0b"]}, "NUL"),
        ({"argv": [""]}, "argv[0]) is empty"),
        ({"argv": ["df"], "shell": "yes"}, "valid boolean"),
    ],
)
def test_schema_errors(params, said):
    with pytest.raises(ValidationError, match=re.escape(said)):
        CommandParams(**params)


# --- issue 32, 1.8: judging inside the run's deadline ------------------------------------------------
BACKTRACKS = r"^(a|aa)+$"  # a pattern a site may write; on 60 a's and a "!" it runs for ages
HOSTILE = "a" * 60 + "!\n"


@pytest.mark.parametrize("field", ["match", "no_match"])
def test_a_pattern_that_backtracks_is_cut_at_the_runs_deadline_and_not_judged(field):
    import time

    from nodecheck.core.bounded_search import judging_until

    started = time.monotonic()
    with judging_until(time.monotonic() + 1.0):
        [v] = judge(HOSTILE, argv=["true"], **{field: BACKTRACKS})
    took = time.monotonic() - started
    assert v.status is Status.ERROR
    assert v.message.startswith(f"true: the {field} pattern did not finish within ")
    assert "on 62 bytes of output: not judged" in v.message
    assert took < 20, took  # bounded by the deadline (a quiet machine: ~1 s), never the pattern's hours


def test_a_number_regex_that_backtracks_is_cut_too():
    import time

    from nodecheck.core.bounded_search import judging_until

    band = {"regex": r"^(a|aa)+(\d+)$", "band": {"fail_below": 1}}
    with judging_until(time.monotonic() + 0.5):
        [v] = judge(HOSTILE, argv=["true"], value=band)
    assert v.status is Status.ERROR and "did not finish within" in v.message

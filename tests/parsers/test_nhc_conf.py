"""nhc.conf text → directives, as NHC's bash reads it (mej/nhc scripts/common.nhc nhc_load_conf)."""

from __future__ import annotations

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.nhc_conf import (
    MAX_CONF_BYTES,
    Expansion,
    NhcConfError,
    Target,
    parse_nhc_conf,
)
from tests.helpers import data, data_files


def _words(directive) -> list[str]:
    return [w.literal if w.literal is not None else w.raw for w in directive.args]


# per file: physical lines, (line, kind, name) of every directive, the malformed lines
EXPECTED = {
    "nhc-conf/mej-nhc-sample-nhc.conf": (
        197,
        [
            (55, "check", "check_hw_mem_free"),
            (81, "check", "check_fs_mount_rw"),
            (104, "check", "check_file_test"),
            (107, "check", "check_file_test"),
            (110, "check", "check_file_test"),
            (125, "check", "check_ps_service"),
        ],
        [],
    ),
    "nhc-conf/aznhc-hb120rs-v3.conf": (
        44,
        [
            (22, "check", "check_hw_cpuinfo"),
            (23, "check", "check_hw_physmem"),
            (24, "check", "check_hw_swap"),
            (25, "check", "check_hw_ib"),
            (26, "check", "check_hw_eth"),
            (27, "check", "check_hw_eth"),
            (28, "check", "check_hw_eth"),
            (29, "check", "check_hw_eth"),
            (36, "check", "check_cpu_stream"),
            (43, "check", "check_ib_bw_non_gdr"),
            (44, "check", "check_ib_link_flapping"),
        ],
        [],
    ),
}


@pytest.mark.parametrize("path", data_files("nhc-conf"))
def test_every_recorded_configuration_parses_with_its_lines(path):
    conf = parse_nhc_conf(data(path))
    assert conf.directives, path
    assert all(d.target.every_host for d in conf.directives), path  # none of these files targets some hosts
    lines = [d.line for d in conf.directives]
    assert lines == sorted(lines) and len(set(lines)) == len(lines)
    if path in EXPECTED:
        total, directives, malformed = EXPECTED[path]
        assert conf.lines == total
        assert [(d.line, d.kind, d.name) for d in conf.directives] == directives
        assert [m.line for m in conf.malformed] == malformed


def test_nhc_sample_options_and_quotes_are_split_as_bash_does():
    conf = parse_nhc_conf(data("nhc-conf/mej-nhc-sample-nhc.conf"))
    by_line = {d.line: d for d in conf.directives}
    assert _words(by_line[81]) == ["-f", "/"]
    assert _words(by_line[125]) == ["-u", "root", "-S", "sshd"]
    assert _words(by_line[104]) == ["-r", "-w", "-x", "-d", "-k", "/tmp", "/var/tmp"]
    assert by_line[55].text == "* || check_hw_mem_free 1mb"  # leading blanks trimmed as `read` does


def test_lambda_genconf_lines_without_separator_are_malformed_and_quotes_removed():
    conf = parse_nhc_conf(data("nhc-conf/lambdal-nhc-genconf-8480-nhc.conf"))
    assert [m.line for m in conf.malformed] == [17, 18, 19, 20]
    assert conf.malformed[1].text == "NHC_NVIDIA_HEALTHMON_ARGS=”diag -r 1”"
    assert "no `||`" in conf.malformed[0].reason
    by_line = {d.line: d for d in conf.directives}
    assert _words(by_line[154]) == ["-t", "sysfs", "-s", "sysfs", "-f", "/sys"]  # "sysfs" → sysfs
    assert by_line[172].name == "check_fs_mount_ro"
    assert _words(by_line[242]) == ["-S", "-u", "root", "-m", "sshd:", "sshd"]
    assert 195 not in by_line  # ` #* || check_fs_used /snap/...`: a comment despite the leading blank
    assert len(conf.directives) == 81
    assert conf.lines == 266


def test_vub_site_file_settings_expansions_and_shell_lines():
    conf = parse_nhc_conf(data("nhc-conf/vub-hpc-site-nhc.conf"))
    by_line = {d.line: d for d in conf.directives}
    rm = by_line[13]
    assert (rm.kind, rm.name, rm.exported, rm.args[0].literal) == ("setting", "NHC_RM", True, "slurm")
    host = by_line[16]
    assert (host.kind, host.name, host.exported) == ("setting", "HOSTNAME", False)
    assert host.args[0].parts == (Expansion("$HOSTNAME_S", "HOSTNAME_S"),)
    cpu = by_line[40]
    assert [w.expansions[0].name for w in cpu.args] == ["NHC_SOCKETS", "NHC_CORES", "NHC_THREADS"]
    assert by_line[80].kind == "shell" and by_line[80].why == "the shell operator `;`"
    load = by_line[168].args[0]
    assert load.literal is None and load.parts == (Expansion("$((${NHC_LOADAVG_MULTIPLIER:-2}*$NHC_CORES))", None),)
    assert conf.malformed == ()


# ---------------------------------------------------------------- edge cases, constructed


def test_targets_glob_regex_range_and_negation():
    conf = parse_nhc_conf(
        "* || a\n!ln* || b\n/^n00[0-5][0-9]\\.cc2$/ || c\n{n00[20-39]} || d\n!{n03,n05} || e\n@gpu || f\n"
    )
    targets = [d.target for d in conf.directives]
    assert targets[0] == Target("*", "all", "*") and targets[0].every_host
    assert targets[1] == Target("!ln*", "glob", "ln*", negated=True)
    # read (no -r) drops the backslash: NHC's own regex loses it too
    assert targets[2] == Target("/^n00[0-5][0-9].cc2$/", "regex", "^n00[0-5][0-9].cc2$")
    assert targets[3] == Target("{n00[20-39]}", "range", "n00[20-39]")
    assert targets[4].negated and targets[4].kind == "range"
    assert targets[5] == Target("@gpu", "glob", "@gpu")  # NHC has no @group syntax: a glob
    assert not any(t.every_host for t in targets[1:])


def test_a_trailing_backslash_continues_the_line_and_numbers_stay_physical():
    conf = parse_nhc_conf("# head\n* || check_fs_mount_rw \\\n   -t nfs \\\n   -f /home\n* || check_x\n")
    first, second = conf.directives
    assert (first.line, first.end_line) == (2, 4)
    assert _words(first) == ["-t", "nfs", "-f", "/home"]
    assert (second.line, second.name) == (5, "check_x")


def test_the_last_line_without_a_newline_is_never_run_by_nhc():
    conf = parse_nhc_conf("* || check_a\n* || check_b")
    assert [d.name for d in conf.directives] == ["check_a"]
    [last] = conf.malformed
    assert last.line == 2 and "no newline" in last.reason
    assert parse_nhc_conf("* || check_a\n   ").malformed == ()  # trailing blanks are nothing


def test_quotes_escapes_and_comments_in_the_check():
    conf = parse_nhc_conf(
        "* || check_cmd_output -m '/is running/' -m \"a b\" x\\ y # trailing comment\n"
        "* || check_file_contents /etc/x '/^\\$pbsserver master$/'\n"
        "* || # nothing but a comment\n"
        '* || echo "$HOME/x" "\\$lit"\n'
    )
    out, contents, echo = conf.directives
    # `read` dropped the backslash before the space: bash then splits there
    assert _words(out) == ["-m", "/is running/", "-m", "a b", "x", "y"]
    assert _words(contents) == ["/etc/x", "/^$pbsserver master$/"]  # the backslash is gone after read
    assert echo.args[0].parts == (Expansion("$HOME", "HOME"), "/x")
    assert echo.args[1].literal is None  # read removed the escaping backslash, so $lit expands


def test_a_dollar_that_starts_nothing_is_a_plain_character():
    [d] = parse_nhc_conf('* || check_cmd_output -m /ok$/ -m "cost $ 5" x$\n').directives
    assert _words(d) == ["-m", "/ok$/", "-m", "cost $ 5", "x$"]
    assert all(w.literal is not None for w in d.args)


def test_settings_and_shell_forms():
    conf = parse_nhc_conf(
        "* || export TIMEOUT=15\n* || DEBUG=1\n* || export A=1 B=2\n* || X=1 check_y\n"
        "* || $CHECK arg\n* || check_a && check_b\n* || check_c | tee x\n* || PATH+=:/opt\n"
    )
    kinds = [(d.line, d.kind, d.name) for d in conf.directives]
    assert kinds == [
        (1, "setting", "TIMEOUT"),
        (2, "setting", "DEBUG"),
        (3, "shell", "export"),
        (4, "shell", ""),
        (5, "shell", ""),
        (6, "shell", "check_a"),
        (7, "shell", "check_c"),
        (8, "check", "PATH+=:/opt"),
    ]
    assert conf.directives[0].exported and conf.directives[0].args[0].literal == "15"
    assert conf.directives[5].why == "the shell operator `&&`"
    assert conf.directives[6].why == "the shell operator `|`"


def test_broken_lines_are_malformed_not_exceptions():
    conf = parse_nhc_conf("* || check_a 'open\n* || check_b \"open\n* || check_c $(date\n* || check_d `x\n")
    assert [m.line for m in conf.malformed] == [1, 2, 3, 4]
    assert "unterminated '" in conf.malformed[0].reason
    assert 'unterminated "' in conf.malformed[1].reason
    assert "unterminated $(" in conf.malformed[2].reason
    assert "unterminated `" in conf.malformed[3].reason
    assert conf.directives == ()


def test_skipped_like_nhc_blank_comment_empty_target_or_check():
    conf = parse_nhc_conf("\n   # c\n#* || check_a\n || check_b\n* || \n  \t\n")
    assert conf.directives == () and conf.malformed == ()


def test_windows_line_endings_are_read():
    conf = parse_nhc_conf("* || check_fs_mount_rw -f /\r\n")
    assert _words(conf.directives[0]) == ["-f", "/"]


def test_an_overlong_line_is_one_malformed_line():
    conf = parse_nhc_conf("* || check_a " + "x" * 20_000 + "\n* || check_b\n")
    assert [m.line for m in conf.malformed] == [1]
    assert [d.name for d in conf.directives] == ["check_b"]


@pytest.mark.parametrize(
    ("text", "line"),
    [("* || ok\n\x00\x01binary\n", 2), ("\x7fELF\x02\x01", 1), ("* || a\n* || b\n\x1b[31mred\n", 3)],
)
def test_binary_input_raises_naming_the_line(text, line):
    with pytest.raises(NhcConfError) as caught:
        parse_nhc_conf(text)
    assert isinstance(caught.value, ParseError)
    assert caught.value.line == line
    assert f"line {line}:" in caught.value.reason


def test_oversized_input_raises():
    with pytest.raises(NhcConfError, match="larger than"):
        parse_nhc_conf("#" * (MAX_CONF_BYTES + 1))

"""command.<label> in a playbook: each label plans the registered `command` check under its own
name and probe; schema errors name the file and line like any other playbook error."""

from __future__ import annotations

import textwrap

import pytest

from nodecheck.checks import all_checks
from nodecheck.config.playbook import load_playbook
from nodecheck.core.errors import ConfigError


def write(tmp_path, text):
    p = tmp_path / "book.yml"
    p.write_text(textwrap.dedent(text))
    return p


def test_two_labels_are_two_checks_with_their_own_names_probes_and_timeouts(tmp_path):
    book = load_playbook(
        str(
            write(
                tmp_path,
                """\
                checks:
                  command.nfs_home:
                    argv: [mountpoint, -q, /home]
                    description: home is an NFS mount
                  command.site-gpu-burn:
                    sh: /opt/site/gpu-burn.sh 10 | tail -n 1
                    shell: true
                    match: 'OK$'
                    timeout_s: 60
                    fail_status: warn
                """,
            )
        )
    )
    by_name = {c.spec.name: c for c in book.checks}
    assert set(by_name) == {"command.nfs_home", "command.site-gpu-burn"}
    home, burn = by_name["command.nfs_home"], by_name["command.site-gpu-burn"]
    assert [(p.name, p.timeout_s) for p in home.probes] == [("command:nfs_home", 10.0)]
    assert [(p.name, p.timeout_s) for p in burn.probes] == [("command:site-gpu-burn", 60.0)]
    assert home.probes[0].argv[-3:] == ("mountpoint", "-q", "/home")
    assert burn.probes[0].argv[-4:] == ("sh", "-c", "/opt/site/gpu-burn.sh 10 | tail -n 1", "nodecheck-custom")
    assert home.spec.judge is burn.spec.judge is all_checks()["command"].judge
    assert burn.params.fail_status == "warn"
    assert "command.nfs_home" not in all_checks()  # planned, not registered: `nodecheck checks` lists command once


@pytest.mark.parametrize(
    "block, line, said",
    [
        ("  command.home:\n    sh: df -h | grep /home\n", 2, "say shell: true"),
        ("  command.home:\n    argv: [grep, x]\n    match: '(unclosed'\n", 4, "not a valid regular expression"),
        ("  command.home:\n    argv: [df]\n    sh: df\n    shell: true\n", 2, "argv or sh, not both"),
        ("  command.Home:\n    argv: [df]\n", 2, "the label after command. is 1-64 of a-z"),
        ("  command:\n    argv: [df]\n", 2, "command is written command.<label>"),
        ("  comand.home:\n    argv: [df]\n", 2, "unknown check 'comand.home'"),
        ("  command.home:\n    match: x\n", 2, "missing required key 'checks.command.home.argv'"),
    ],
)
def test_schema_errors_name_the_file_and_line(tmp_path, block, line, said):
    path = write(tmp_path, "checks:\n" + block)
    with pytest.raises(ConfigError) as e:
        load_playbook(str(path))
    assert said in e.value.message and e.value.line == line and e.value.file == str(path)

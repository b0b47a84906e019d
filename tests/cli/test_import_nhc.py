"""`nodecheck import-nhc`: end to end through the command line, exit codes as documented."""

from __future__ import annotations

import stat
import subprocess
import sys

from nodecheck.cli import main
from nodecheck.config.playbook import load_playbook
from tests.helpers import DATA

SAMPLE = str(DATA / "nhc-conf/mej-nhc-sample-nhc.conf")
H100 = str(DATA / "nhc-conf/aznhc-nd96isr-h100-v5.conf")


def test_help_documents_the_exit_codes():
    out = subprocess.run(
        [sys.executable, "-m", "nodecheck", "import-nhc", "--help"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0
    assert "0 every line translated; 3 the playbook was written, some lines were not translated" in out.stdout
    assert "2 no line translated (nothing written); 64 bad input" in out.stdout


def test_writes_the_playbook_atomically_lists_the_rest_and_exits_3(tmp_path, capsys):
    out = tmp_path / "site.yml"
    assert main(["import-nhc", H100, "-o", str(out)]) == 3
    err = capsys.readouterr().err
    assert f"{H100}:38: not translated: aznhc's topology file: no nodecheck check" in err
    assert err.count("not translated:") == 7
    assert "27 line(s) translated into 7 check(s), 7 not translated; playbook written to" in err
    assert [p.name for p in tmp_path.iterdir()] == ["site.yml"]  # no temporary left beside it
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    book = load_playbook(str(out))
    assert [c.spec.name for c in book.checks] == [
        "cpu",
        "mem",
        "ib.ports",
        "command.nhc_eth",
        "gpu.count",
        "gpu.health",
        "gpu.xid",
    ]
    assert main(["import-nhc", H100, "-o", str(out)]) == 3  # replaced whole, not appended
    assert out.read_text().count("version: 1") == 1


def test_stdout_when_no_output_is_given(capsys):
    assert main(["import-nhc", SAMPLE]) == 3
    captured = capsys.readouterr()
    assert captured.out.startswith("# nodecheck playbook translated from an LBNL NHC configuration")
    assert "  fs.mounts:\n" in captured.out and "  services:\n" in captured.out
    assert "mej-nhc-sample-nhc.conf:104: not translated: file attribute tests" in captured.err


def test_exit_0_when_everything_translates(tmp_path, capsys):
    conf = tmp_path / "nhc.conf"
    conf.write_text("* || check_fs_mount_rw -f /\n* || check_ps_service -u root -S sshd\n")
    assert main(["import-nhc", str(conf), "-o", str(tmp_path / "out.yml")]) == 0
    assert "not translated:" not in capsys.readouterr().err


def test_exit_2_and_nothing_written_when_nothing_translates(tmp_path, capsys):
    conf = tmp_path / "nhc.conf"
    conf.write_text("* || check_file_test -r /etc/passwd\nn01 || check_hw_cpuinfo 2 8 8\n")
    out = tmp_path / "out.yml"
    assert main(["import-nhc", str(conf), "-o", str(out)]) == 2
    assert "nothing written" in capsys.readouterr().err
    assert not out.exists()


def test_bad_input_exits_64_naming_the_file(tmp_path, capsys):
    binary = tmp_path / "nhc.conf"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00")
    assert main(["import-nhc", str(binary)]) == 64
    assert f"{binary}:1: a NUL byte: a binary file" in capsys.readouterr().err
    assert main(["import-nhc", str(tmp_path / "missing.conf")]) == 64
    assert main(["import-nhc", SAMPLE, "-o", str(tmp_path)]) == 64
    assert "is a directory" in capsys.readouterr().err
    assert main(["import-nhc", SAMPLE, "-o", str(tmp_path / "no" / "such" / "dir.yml")]) == 64
    assert "cannot write" in capsys.readouterr().err

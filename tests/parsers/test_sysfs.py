import subprocess

import pytest

from nodecheck.core.errors import ParseError
from nodecheck.parsers.sysfs import SHELL_FUNCTION, Unreadable, parse_sysfs_dump


def test_values_and_unreadable_entries():
    text = (
        "/sys/class/infiniband/mlx5_0/ports/1/gids/3\t0000:0000:0000:0000:0000:ffff:0a4d:0003\n"
        "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3\tRoCE v2\n"
        "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/4\t!cat: types/4: Invalid argument\n"
    )
    got = parse_sysfs_dump(text)
    assert got["/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3"] == "RoCE v2"
    assert got["/sys/class/infiniband/mlx5_0/ports/1/gids/3"].endswith("0a4d:0003")
    assert got["/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/4"] == Unreadable("cat: types/4: Invalid argument")


def test_other_text_is_a_parse_error():
    with pytest.raises(ParseError, match="line 2"):
        parse_sysfs_dump("/a\t1\nsomething else\n")


def test_the_shell_function_prints_the_format(tmp_path):
    (tmp_path / "rate").write_text("400 Gb/sec (4X NDR)\n")
    (tmp_path / "two").write_text("first\nsecond\n")
    unreadable = tmp_path / "dir-not-file"
    unreadable.mkdir()
    script = SHELL_FUNCTION + f"\nsysfs_dump {tmp_path}/*\n"
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    got = parse_sysfs_dump(out)
    assert got == {f"{tmp_path}/rate": "400 Gb/sec (4X NDR)", f"{tmp_path}/two": "first"}

"""load_file reads a config once, through one open file (issue 32, 1.1): whose file it is and who may
write it (the owner and mode the watcher's trust rests on) come from fstat of that same descriptor, so
a file swapped between a stat and the read cannot lend another file's owner; the read is bounded, and
a FIFO or a device is refused without blocking."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from nodecheck.config.yaml_source import load_file
from nodecheck.core.errors import ConfigError

NOBODY = 65534
MAX_FILE_BYTES = 16 * 1024 * 1024  # the documented bound (yaml_source.MAX_FILE_BYTES)


def test_the_owner_and_mode_are_those_of_the_file_as_read(tmp_path):
    path = tmp_path / "JOB.yml"
    path.write_text("watch: {}\n")
    path.chmod(0o640)
    src = load_file(path)
    assert (src.owner_uid, stat.S_IMODE(src.mode)) == (os.geteuid(), 0o640)
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
        assert load_file(path).owner_uid == NOBODY
    # through a symbolic link: the file read, not the link, is whose the content is
    link = tmp_path / "link.yml"
    link.symlink_to(path)
    assert load_file(link).owner_uid == path.stat().st_uid and load_file(link).data == {"watch": {}}


def test_a_file_larger_than_any_config_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.yml"
    with open(path, "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(ConfigError) as e:
        load_file(path)
    assert e.value.file == str(path)
    assert e.value.message == f"is {MAX_FILE_BYTES + 1} bytes: larger than any config (at most 16 MiB)"
    assert "is this the right file?" in e.value.hint


def test_a_device_is_not_a_config_file():
    with pytest.raises(ConfigError) as e:
        load_file("/dev/null")
    assert (e.value.file, e.value.message) == ("/dev/null", "is not a regular file (a character device)")
    assert e.value.hint == "give the path of the YAML file itself"


def test_a_fifo_nobody_writes_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "pipe.yml"
    os.mkfifo(fifo)
    result: list = []

    def load():
        try:
            load_file(fifo)
            result.append("loaded")
        except ConfigError as e:
            result.append(e)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # blocked in open(): give it a writer, so the thread can end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=10)
        pytest.fail("load_file blocked on a FIFO with no writer")
    [error] = result
    assert isinstance(error, ConfigError) and error.message == "is not a regular file (a FIFO)"

"""`tmp_path` for tests whose files a job's user (nobody, in tests) or everyone must reach.

Files a job names are opened as the job's user, or as nobody when no job's user is known, never by root
(probes/shell.py read_as): a file under pytest's own tmp_path, which lies under a directory only root may
enter (/tmp/pytest-of-root, mode 0700), is no one's to read but root's. A test module that reads such
files imports this fixture in pytest's place:

    from tests.everyone_tmp import tmp_path  # noqa: F401  (a directory everyone may enter)
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A fresh directory in /tmp that everyone may enter (mode 0755; root's, so only root may write it).
    Named nodecheck-test.*: the fault suite's check for what nodecheck leaves in /tmp passes it over."""
    path = Path(tempfile.mkdtemp(prefix="nodecheck-test.everyone-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)

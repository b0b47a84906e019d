"""What `run` checks before it starts: the open-file limit the fan-out needs."""

import resource

import pytest

from nodecheck.app.transports import FDS_PER_CONNECTION, FDS_RESERVED, ensure_open_files
from nodecheck.core.errors import ConfigError


def test_a_fanout_the_hard_limit_cannot_carry_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setattr(resource, "getrlimit", lambda which: (256, 256))
    with pytest.raises(ConfigError) as caught:
        ensure_open_files(100)
    assert "--fanout 100 needs about 464 open files, but the hard limit is 256" in caught.value.message
    assert f"lower --fanout to {(256 - FDS_RESERVED) // FDS_PER_CONNECTION}" in caught.value.hint


def test_the_soft_limit_is_raised_when_the_hard_limit_allows(monkeypatch):
    calls = []
    monkeypatch.setattr(resource, "getrlimit", lambda which: (256, 4096))
    monkeypatch.setattr(resource, "setrlimit", lambda which, limits: calls.append(limits))
    ensure_open_files(100)
    assert calls == [(100 * FDS_PER_CONNECTION + FDS_RESERVED, 4096)]

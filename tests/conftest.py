"""Fixtures shared by unit tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

FAKES = Path(__file__).resolve().parent / "fakes"


@pytest.fixture
def fake_pynvml(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh tests/fakes/pynvml.py imported as `pynvml` (NVML faked at nvidia-ml-py's boundary)."""
    spec = importlib.util.spec_from_file_location("pynvml", FAKES / "pynvml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


@pytest.fixture
def canned(monkeypatch):
    """`nodecheck sweep` with the targets and the run replaced: each call returns the next report
    appended to the returned list (test_history, test_sweep_retention)."""
    from nodecheck.app import targets, transports
    from nodecheck.gate import command as gatecmd

    reports = []
    monkeypatch.setattr(targets, "select_targets", lambda args, playbook: ([], [], None))
    monkeypatch.setattr(transports, "ensure_open_files", lambda n: None)
    monkeypatch.setattr(gatecmd, "run_gated", lambda *a, **kw: reports.pop(0))
    return reports


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium (Debian's, through its chromium-driver) for a module's tests; the
    browser tests fail, never skip, where it is missing (tests/browser/chromium.py)."""
    from tests.browser.chromium import chromium, missing

    why = missing()
    if why:
        pytest.fail(why)  # a CI run must not go green on browser tests that did not run
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as b:
        yield b

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

"""Unit tests of the simulated cluster's pure parts (no cluster is started): tests/ goes on sys.path,
so the harness imports as `harness`, as it does in tests/integration and benchmarks/."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

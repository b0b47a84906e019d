"""The fault-injection suite: one fault per test, injected into the simulated cluster (real sshd
per node, tests/harness), nodecheck run through its real CLI as a child process.

Run with `sudo bash tests/run_all.sh tests/faults` (root, a private network namespace). Like the
integration tests, the `cluster` fixture FAILS rather than skips without root: CI must not go green
on a suite that did not run.

Fixtures:
    cluster   package-scoped SimCluster of 4 nodes at 127.0.3.1-4:22 (its own state dir and
              addresses, so it never meets the integration tests' cluster, which may be up in the
              same session); reset after every test (fakes removed, nodes started, keys restored)
Every test here is marked `integration`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from harness.cluster import HarnessError, SimCluster  # noqa: E402

# the same prerequisites, and the same reset after every test (an autouse fixture, found here by name)
from integration.conftest import _missing_prerequisites, _reset_cluster_after_test  # noqa: E402,F401

N_NODES = 4
NET = os.environ.get("NODECHECK_FAULTS_NET", "127.0.3")
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="package")
def cluster(tmp_path_factory):
    problems = _missing_prerequisites()
    if problems:
        pytest.fail(
            "the simulated cluster cannot start: "
            + "; ".join(problems)
            + ". Run the tests with: sudo bash tests/run_all.sh tests/faults",
            pytrace=False,
        )
    # beside tests/run_all.sh's state dir, so its clean-up finds it even if pytest is killed
    base = os.environ.get("NODECHECK_TEST_HARNESS_DIR")
    state = Path(base + "-faults") if base else tmp_path_factory.mktemp("harness") / "sim-faults"
    sim = SimCluster(state_dir=state, net=NET, port=22)
    try:
        sim.up(N_NODES)
    except HarnessError as e:
        pytest.fail(f"the fault suite's cluster did not come up: {e}", pytrace=False)
    try:
        yield sim
    finally:
        sim.down()

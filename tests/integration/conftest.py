"""Integration tests: a real simulated cluster (8 real sshd "nodes") for the whole session.

Run them with `sudo bash tests/run_all.sh` (root, inside a private network namespace).
Without root, sshd or unshare the `cluster` fixture FAILS rather than skips: a CI run must
not go green on integration tests that silently did not run.

Fixtures:
    cluster   session-scoped SimCluster, node1..node10 at 127.0.1.1-10:22, clean (no fakes).
              After every test that used it, it is reset: fakes removed, stopped nodes
              started, rekeyed nodes given their original key back.
Every test in tests/integration/ is marked `integration` (select with -m integration).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from harness.cluster import HarnessError, SimCluster  # noqa: E402

N_NODES = 10
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.integration)


def _missing_prerequisites() -> list[str]:
    problems = []
    if os.geteuid() != 0:
        problems.append("not running as root (sshd per node needs it)")
    if not os.access("/usr/sbin/sshd", os.X_OK):
        problems.append("/usr/sbin/sshd missing (apt-get install openssh-server)")
    for tool in ("unshare", "nsenter", "ssh-keygen"):
        if shutil.which(tool) is None:
            problems.append(f"{tool} not found")
    return problems


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    problems = _missing_prerequisites()
    if problems:
        pytest.fail(
            "the simulated cluster cannot start: "
            + "; ".join(problems)
            + ". Run the tests with: sudo bash tests/run_all.sh",
            pytrace=False,
        )
    # tests/run_all.sh names the state dir so it can clean up even if pytest is killed
    state = os.environ.get("NODECHECK_TEST_HARNESS_DIR") or tmp_path_factory.mktemp("harness") / "sim"
    sim = SimCluster(
        state_dir=state,
        net=os.environ.get("NODECHECK_HARNESS_NET", "127.0.1"),
        port=int(os.environ.get("NODECHECK_HARNESS_PORT", "22")),
    )
    try:
        sim.up(N_NODES)
    except HarnessError as e:
        pytest.fail(
            f"the simulated cluster did not come up: {e}. Outside tests/run_all.sh, "
            "another cluster (or a host sshd) may already hold these addresses.",
            pytrace=False,
        )
    try:
        yield sim
    finally:
        sim.down()


@pytest.fixture(autouse=True)
def _reset_cluster_after_test(request):
    yield
    if "cluster" not in request.fixturenames:
        return
    try:
        sim = request.getfixturevalue("cluster")
    except (Exception, pytest.fail.Exception):  # the fixture itself failed: already reported
        return
    sim.reset()


@pytest.fixture
def no_slurm(cluster):
    """No Slurm on the cluster: one an earlier test left up (the session's cluster keeps it for the next
    Slurm test) is taken down, its daemons reaped. The disruptive checks' idle guard reads a node whose
    slurmd runs and whose squeue cannot answer as busy, and refuses it."""
    cluster.slurm_down()

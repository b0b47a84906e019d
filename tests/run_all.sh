#!/bin/bash
# THE test command:  sudo bash tests/run_all.sh [pytest args...]   (or as root: bash tests/run_all.sh)
#
# 1. tests/harness/setup.sh: apt packages if missing (chromium among them), /run/sshd, .venv with nodecheck[test]
# 2. a private network namespace (loopback only, 127.0.1.0/24 on lo): every simulated node
#    listens there, nothing is reachable from outside and nothing collides with host services
# 3. .venv/bin/python -m pytest -q "$@" inside it; the integration tests' session fixture brings
#    the 8-node simulated cluster up and down (state dir: $NODECHECK_TEST_HARNESS_DIR, set here)
# 4. the static rules (tests/static_checks.sh: ruff lint + format, mypy, the import-linter layer
#    contracts) when the whole suite runs (no pytest arguments; NODECHECK_STATIC=1 forces them,
#    NODECHECK_STATIC=0 skips them)
# 5. always: stop whatever the tests left running, delete the namespace and the temp dir.
# Exit code: pytest's, or 1 when a static rule failed; "no tests collected" (5) counts as a failure.
set -euo pipefail
. "$(dirname "$0")/harness/lib.sh"
export NC_SETUP_BROWSER=1   # setup.sh: also Debian's chromium and chromium-driver (the report.html tests)
nc_sandbox tests/run_all.sh test
export NODECHECK_TEST_HARNESS_DIR=$NC_TMP/sim

rc=0
nc_in_netns "$NC_NS" .venv/bin/python -m pytest -q "$@" || rc=$?
if ((rc == 5)); then
  echo "run_all.sh: pytest collected no tests; that is a failure" >&2
  rc=1
fi
if [ "${NODECHECK_STATIC:-$(($# == 0))}" = 1 ]; then
  bash tests/static_checks.sh || { ((rc != 0)) || rc=1; }
fi
exit "$rc"

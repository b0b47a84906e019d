#!/bin/bash
# The static rules, each configured in pyproject.toml: ruff's lint rules, ruff's format, mypy on the
# package, and the import-linter contracts (the layers). Usage, from anywhere:  bash tests/static_checks.sh
#
# Every check runs even when an earlier one fails, so one run lists everything to fix; the exit code
# is 1 when any failed, and the last line names them. Needs the venv with nodecheck[test]
# (tests/harness/setup.sh makes it); nothing here needs root or the simulated cluster.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${NODECHECK_VENV:-.venv}
PATHS=(nodecheck tests benchmarks)

failed=()
check() {
  local name=$1
  shift
  echo "== $name: $*"
  if "$@"; then
    echo "== $name: ok"
  else
    echo "== $name: FAILED" >&2
    failed+=("$name")
  fi
}

check "ruff check" "$VENV/bin/ruff" check "${PATHS[@]}"
check "ruff format" "$VENV/bin/ruff" format --check "${PATHS[@]}"
check "mypy" "$VENV/bin/mypy"                 # files, plugins and strictness: [tool.mypy]
check "import-linter" "$VENV/bin/lint-imports"

if ((${#failed[@]})); then
  echo "static_checks.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "static_checks.sh: all passed"

#!/usr/bin/env bash
# Run the whole test suite on this machine, setting up what it needs first (Docker engine,
# bubblewrap, the sandbox image, the package itself). Real Docker, real bwrap, real HTTP.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/lint.sh                      # layer contracts, ruff, mypy --strict
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1   # the host's many pytest plugins cost ~2 s a start
export OODA_REQUIRE_SANDBOXES=1           # a missing sandbox is a failure here, not a skip
set +e
timeout 2400 python -m pytest -q -ra "$@" tests
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "no tests were collected" >&2
  exit 1
fi
exit "$rc"

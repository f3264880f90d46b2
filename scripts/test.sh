#!/usr/bin/env bash
# Run the whole test suite on this machine, setting up what it needs first (Docker engine,
# bubblewrap, the sandbox image, ooda's .venv with the dev and ray extras). Real Docker, real
# bwrap, real HTTP.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev --ray
export PATH="$PWD/.venv/bin:$PATH"      # ooda, pytest, ruff, mypy: the environment's own
if [ "$(id -u)" -ne 0 ] && ! docker info >/dev/null 2>&1 && [ -z "${OODA_TEST_SG:-}" ] \
    && id -nG "$(id -un)" | tr ' ' '\n' | grep -qx docker; then
  # just added to the docker group by setup.sh: this session does not have it yet
  exec sg docker -c "OODA_TEST_SG=1 bash scripts/test.sh $(printf '%q ' "$@")"
fi
bash scripts/lint.sh                      # layer contracts, ruff, mypy --strict
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1   # the host's many pytest plugins cost ~2 s a start
export OODA_REQUIRE_SANDBOXES=1           # a missing sandbox is a failure here, not a skip
set +e
timeout 2400 python -m pytest -q -ra --durations=30 "$@" tests
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "no tests were collected" >&2
  exit 1
fi
exit "$rc"

#!/usr/bin/env bash
# The static checks CI runs before the tests: the layer contracts (import-linter), ruff and
# mypy --strict on the project's code, with the tools of ooda's environment (.venv, made by
# `scripts/setup.sh --dev`). Quiet when all is well.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/python ]; then
  export PATH="$PWD/.venv/bin:$PATH"
fi
for tool in lint-imports ruff mypy; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "lint.sh: $tool is missing: run \`bash scripts/setup.sh --dev\`" >&2
    exit 1
  }
done
lint-imports --no-cache >/tmp/ooda-lint-imports.log 2>&1 || {
  echo "lint.sh: import-linter found imports against the layers:" >&2
  grep -v '^\s*$' /tmp/ooda-lint-imports.log | tail -n 40 >&2
  exit 1
}
# tests/ has no __init__.py files: pytest imports each test module by its basename, so two with
# the same name stop collection ("import file mismatch") on a clean clone
dupes=$(find tests -name 'test_*.py' -printf '%f\n' | sort | uniq -d)
if [ -n "$dupes" ]; then
  echo "lint.sh: test modules share a basename (rename one of each): $dupes" >&2
  exit 1
fi
ruff check --quiet agent verifiers tasks tests bench
mypy >/tmp/ooda-mypy.log 2>&1 || { echo "lint.sh: mypy --strict failed:" >&2; tail -n 40 /tmp/ooda-mypy.log >&2; exit 1; }

#!/usr/bin/env bash
# Fresh machine to a solved example task, offline: set everything up, then run the loop on a
# bundled example against the bundled endpoint, which replays scripted answers (no real model),
# and once more with no model at all: fault-localised mutation (docs/MUTATE.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== ooda run tasks/examples/median --model replay -n 4 --rounds 3 (scripted answers) =="
.venv/bin/ooda run tasks/examples/median --model replay -n 4 --rounds 3 --time-budget 300
echo "== ooda run tasks/examples/median --model mutate (no model: mutants of the suspicious lines) =="
.venv/bin/ooda run tasks/examples/median --model mutate --time-budget 300

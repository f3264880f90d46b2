#!/usr/bin/env bash
# Fresh machine to a solved example task, offline: set everything up, then run the loop on a
# bundled example against the bundled endpoint, which replays scripted answers (no real model).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== ooda run tasks/examples/median --model replay -n 4 --rounds 3 (scripted answers) =="
.venv/bin/ooda run tasks/examples/median --model replay -n 4 --rounds 3 --time-budget 300

"""`ooda eval`: many tasks, K at a time, scored in an evaluation directory.

The package's names for its callers (cli, tests, bench); the modules are listed in README.md."""

from ooda.agent.app.evaluate.lock import LOCK_FILE
from ooda.agent.app.evaluate.options import (
    EVAL_FILE,
    PREDICTIONS_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    TASKS_DIR,
    WORK_DIR,
    EvalOptions,
    default_eval_id,
)
from ooda.agent.app.evaluate.records import rerender_report
from ooda.agent.app.evaluate.run import EvalOutcome, evaluate

__all__ = [
    "EVAL_FILE", "LOCK_FILE", "PREDICTIONS_FILE", "RESULTS_FILE", "SUMMARY_FILE", "TASKS_DIR", "WORK_DIR",
    "EvalOptions", "EvalOutcome", "default_eval_id", "evaluate", "rerender_report",
]

"""Run one task end to end: `run_task`, the one way `ooda run`, `ooda eval` (and its Ray
nodes) and `ooda ci` run a task (agent/app/session.py: plan → set-up → loop → the protocol's
finish → run.json written once). Their options are RunOptions (agent/app/options.py),
re-exported here with what opens a run's verifier (agent/app/opening.py).
"""

from __future__ import annotations

from typing import Unpack

from ooda.agent.app.opening import (
    Prestarted,
    clean_leftovers,
    open_verifier,
    prepare_task,
    schedule_for,
)
from ooda.agent.app.options import RunOptions
from ooda.agent.app.session import RunGiven, RunSession, attempt_phases, say_notices
from ooda.agent.core.loop import RunResult
from ooda.agent.core.runlog import RunLog
from ooda.tasks.loader import Task

__all__ = ["Prestarted", "RunGiven", "RunOptions", "attempt_phases", "clean_leftovers",
           "open_verifier", "prepare_task", "run_task", "say_notices", "schedule_for"]


def run_task(task: Task, options: RunOptions,
             **given: Unpack[RunGiven]) -> tuple[RunResult, RunLog]:
    """Run the loop on one task and return its result and run directory.

    The task's plan (agent/verify/plan.py: environment, runner, stages, tests, the facts of
    the unpatched code) is made here as every command makes it (`make_plan`). A caller that
    drafted it already, and said its environment line, passes the draft as `plan`; one that
    settled it too passes its `verifier` as well (`ooda ci`, which wrote the statement from the
    base's failures; that caller closes the verifier). What else a caller may give (a shared
    model, source or backend, the run's id, what start-up began, a console, a timeline, a
    teardown) is `RunGiven` (agent/app/session.py)."""
    return RunSession(task, options, given).run()

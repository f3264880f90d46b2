"""`ooda tasks validate DIR`: is each task sound before any model is asked to solve it?

For every task directory: build (or find) its environment, run the tests on the unpatched code
(+ hidden tests: FAIL_TO_PASS must not pass, PASS_TO_PASS must pass), then verify the gold
patch once (it must pass). A task whose environment cannot be built, or whose tests cannot run
at all, is reported as a broken environment, apart from tasks whose lists or gold patch are
wrong: those are the task's faults, the others the machine's.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ooda.agent.contracts.protocols import SandboxBackend, Verdict
from ooda.agent.sandbox.environments.builder import EnvBuildError
from ooda.agent.verify.base import missing_module_message
from ooda.agent.verify.plan import BaseFacts
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task, is_task_dir, load_task, load_taskset
from ooda.verifiers.pytest_check import NodeIndex, match_id

INFRA_RETRY_WAIT_S = 30.0
"""How long validation waits before trying a task again whose sandbox or engine broke."""

Status = Literal["valid", "environment", "base", "gold"]
"""valid; environment: broken (not built, the tests do not run, or PASS_TO_PASS fails before
any change); base: a FAIL_TO_PASS test passes already or does not exist; gold: the reference
patch does not pass."""


@dataclass
class Validation:
    """One task's verdict."""

    task_id: str
    status: Status
    detail: str = ""
    base_problems: list[str] = field(default_factory=list)
    """FAIL_TO_PASS ids that pass (or are missing) on the unpatched code, whatever the status:
    a patch that changes nothing those tests see would resolve the task."""


def validate_tasks(path: Path, backend: SandboxBackend,
                   report: Callable[[Validation], None] = lambda _v: None) -> list[Validation]:
    """Validate the task directory `path` (or every one under it), reporting each as done."""
    tasks = [load_task(path)] if is_task_dir(path) else load_taskset(path)
    results = []
    for task in tasks:
        try:
            result = validate_task(task, backend)
        except Exception:  # noqa: BLE001 -- the sandbox or the engine broke under the task
            time.sleep(INFRA_RETRY_WAIT_S)  # (a restarted Docker engine): not its fault, once more
            try:
                result = validate_task(task, backend)
            except Exception as exc:  # noqa: BLE001 -- said for this task; the next ones go on
                result = Validation(task.id, "environment", f"infrastructure: {_line(exc)}")
        report(result)
        results.append(result)
    return results


def validate_task(task: Task, backend: SandboxBackend) -> Validation:
    """Base and gold of one task, in its environment: its plan made as every command makes
    it (agent/verify/prepare.py), with the base's facts reported instead of stopping."""
    with tempfile.TemporaryDirectory(prefix="ooda-validate-") as work:
        try:
            plan, verifier = make_plan(
                task, lambda p: TaskVerifier(p, backend, Path(work), concurrency=1),
                check=False)
        except EnvBuildError as exc:  # the build itself failed: the cause in one line
            return Validation(task.id, "environment", _line(exc))
        try:
            return _check(task, plan.base or BaseFacts(), verifier)
        finally:
            verifier.close()


def _check(task: Task, facts: BaseFacts, verifier: TaskVerifier) -> Validation:
    if facts.missing_modules:
        return Validation(task.id, "environment", missing_module_message(
            facts.missing_modules[0], len(facts.missing_modules)))
    if facts.error is not None:
        return Validation(task.id, "environment", f"the tests do not run: {facts.error}")
    outcomes = facts.outcomes
    listed = [*task.fail_to_pass, *task.pass_to_pass]
    run = NodeIndex(outcomes)
    problems = []
    for test_id in task.fail_to_pass:
        nodes = match_id(test_id, run, listed)
        if not nodes or outcomes.get(test_id) == "missing":
            problems.append(f"FAIL_TO_PASS {test_id} not found")
        elif all(outcomes[n] == "passed" for n in nodes):
            problems.append(f"FAIL_TO_PASS {test_id} passes already")
    broken_p2p = [t for t in task.pass_to_pass
                  if not (nodes := match_id(t, run, listed))
                  or any(outcomes[n] != "passed" for n in nodes)]
    gold = None
    if task.gold_patch is not None:
        gold = verifier.verify(task.gold_patch)
    if broken_p2p:  # tests that should pass do not, before any change: the environment's fault
        more = f" (and {len(broken_p2p) - 1} more)" if len(broken_p2p) > 1 else ""
        return Validation(task.id, "environment",
                          f"PASS_TO_PASS {broken_p2p[0]}{more} does not pass on the base"
                          + _gold_note(gold), problems)
    if problems:
        return Validation(task.id, "base", "; ".join(problems) + _gold_note(gold), problems)
    if gold is None:
        return Validation(task.id, "valid", "base ok; no gold patch")
    if gold.status != "passed":
        return Validation(task.id, "gold", gold.reason)
    return Validation(task.id, "valid", "")


def _gold_note(gold: Verdict | None) -> str:
    if gold is None:
        return ""
    return "; gold resolves" if gold.status == "passed" else f"; gold fails too: {gold.reason}"


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


"""`ooda verify`: one given patch judged as `ooda run` would judge a candidate for the same
task: the same plan (agent/verify/plan.py: the environment detected or chosen with
`--environment`, the runner, the stages, the tests, the base's facts), the same verifier, no
model."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ooda.agent.contracts.options import EnvironmentOptions, SandboxOptions, StageOptions
from ooda.agent.contracts.protocols import Verdict
from ooda.agent.sandbox.registry import get_backend
from ooda.agent.support.collected import collected
from ooda.agent.verify.base import plan_line
from ooda.agent.verify.plan import TaskPlan, draft_plan
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.agent.verify.workspace import check_applies
from ooda.tasks.loader import Task


@dataclass(frozen=True)
class Verified:
    """What `ooda verify` found."""

    plan: TaskPlan
    verdict: Verdict
    sandbox: str
    """The backend the patch ran in."""


def verify_patch(
    task: Task,
    patch: str,
    *,
    environment: EnvironmentOptions,
    sandbox: SandboxOptions,
    stages: StageOptions,
    log_dir: Path | None = None,
    say: Callable[[str], object] = lambda _line: None,
) -> Verified:
    """Judge `patch` for `task`; `say` gets the line on what the tests run in and, after the
    base check, the line on which tests must pass and each run's limit. A patch the
    edit policy refuses, that touches a protected file or does not apply is PatchError before
    any sandbox starts or the base's tests run (the cheap checks first)."""
    tests = collected(task.repo, [*task.fail_to_pass, *task.pass_to_pass], [], task.test_cmd)
    check_applies(task.repo, patch, task.protected, tests.patterns)
    draft = draft_plan(task, environment, sandbox, stages)
    if draft.environment_line:
        say(draft.environment_line)
    backend = get_backend(sandbox.sandbox)
    try:
        with tempfile.TemporaryDirectory(prefix="ooda-verify-") as work:
            plan, verifier = make_plan(draft, lambda p: TaskVerifier(p, backend, Path(work)))
            if line := plan_line(plan):
                say(line)
            try:
                verdict = verifier.verify(patch, log_dir=log_dir)
            finally:
                verifier.close()
    finally:
        backend.close()
    return Verified(plan, verdict, backend.name)

"""`make_plan`: the one way a task's plan is made, for every command that judges a task
(`ooda verify`, `run`, `ci`, `eval`, `tasks validate`).

From the task and the user's choices: draft the plan (environment, runner, stages, tests:
agent/verify/plan.py), open the task verifier on it (which builds the environment and starts
the sandboxes), run the tests on the unpatched code and settle the plan from what they did
(agent/verify/base.py; the facts of a base already checked are read back instead:
agent/verify/basecache.py). What comes back is the frozen plan and the verifier that judges by it;
a base that cannot judge anything is a UsageError before any model is asked for anything.
"""

from __future__ import annotations

from collections.abc import Callable

from ooda.agent.contracts.options import EnvironmentOptions, SandboxOptions, StageOptions
from ooda.agent.verify import basecache
from ooda.agent.verify.base import examine_base, settle
from ooda.agent.verify.plan import BaseFacts, TaskPlan, draft_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task

OpenVerifier = Callable[[TaskPlan], TaskVerifier]
"""Opens the task verifier for a draft plan (on the caller's backend, pool and work root)."""


def make_plan(
    task: Task | TaskPlan,
    open_verifier: OpenVerifier,
    *,
    environment: EnvironmentOptions | None = None,
    sandbox: SandboxOptions | None = None,
    stages: StageOptions | None = None,
    check: bool = True,
) -> tuple[TaskPlan, TaskVerifier]:
    """The settled plan of `task` and the verifier that judges by it (the caller closes it).

    `task` may be a draft plan already (one whose environment line was said first). With
    `check` (every command but `tasks validate`, which reports the facts instead), a base
    that cannot judge a candidate is a UsageError; without, the facts are kept as they are."""
    draft = task if isinstance(task, TaskPlan) else draft_plan(task, environment, sandbox,
                                                                 stages)
    verifier = open_verifier(draft)
    try:
        facts = _base_facts(draft, verifier, cached=check)
        plan = settle(draft, facts) if check else _kept(draft, facts)
        verifier.use(plan)
    except BaseException:
        verifier.close()
        raise
    return plan, verifier


def _base_facts(draft: TaskPlan, verifier: TaskVerifier, *, cached: bool) -> BaseFacts:
    """The base's facts: kept from an earlier run on the same base (agent/verify/basecache.py)
    when `cached`, else found now (and kept for the next run)."""
    digest = basecache.base_digest(draft, verifier.backend.name) if cached else None
    backend = verifier.pool.backend
    key = basecache.key(digest, basecache.runtime(backend, draft.requirements))
    facts = basecache.load(key) if key is not None else None
    if facts is None:
        facts = examine_base(draft, verifier)
        if digest is not None:  # the runtime now: an image the base run had to build has an id
            key = basecache.key(digest, basecache.runtime(backend, draft.requirements))
            if key is not None:
                basecache.store(key, facts)
    return facts


def _kept(draft: TaskPlan, facts: BaseFacts) -> TaskPlan:
    import dataclasses

    return dataclasses.replace(draft, base=facts)

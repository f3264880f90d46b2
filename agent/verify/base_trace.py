"""The traced run of a task's tests on the unpatched code, which `--model mutate` localises
faults from (agent/mutation/localise.py): the plan's tests, run in a sandbox of the verifier's
pool holding the base (+ the hidden tests), traced by verifiers/coverage; with the files a
candidate may change (the edit policy's) and what the base check saw the tests do.

Its time, counted from when it starts: what the plan gives one test run, three times over (a
traced run is slower), but no more than `SHARE` of the time left before the caller's deadline
(or `FLOOR` seconds, when that is under 60 % of it). A run cut short keeps the tests that
finished, the failing ones first (the plan's ids put them first)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ooda.agent.contracts.spectrum import BaseTrace, Spectrum
from ooda.agent.support.testsupport import is_test_support
from ooda.agent.verify.workspace import protected_reason
from ooda.verifiers.coverage import trace_tests
from ooda.verifiers.runners.request import NotGradable, TestRequest

if TYPE_CHECKING:
    from ooda.agent.verify.verifier import TaskVerifier

SLOWDOWN = 3.0
"""A traced run is given this many times the plan's test timeout, ..."""
SHARE = 0.3
"""... at most this share of the time left before the deadline, ..."""
FLOOR = 20.0
"""... or this many seconds, when that is less than 60 % of the time left."""


def trace_base(verifier: TaskVerifier, *, deadline: float | None = None) -> BaseTrace:
    """The traced run of `verifier`'s plan on the unpatched code (see the module docstring)."""
    plan = verifier.plan
    tests = plan.tests
    timeout = plan.stages.timeout_s * SLOWDOWN
    if deadline is not None:
        left = max(0.0, deadline - time.monotonic())
        timeout = max(1.0, min(timeout, max(SHARE * left, min(0.6 * left, FLOOR))))
    request = TestRequest(
        ids=tests.ids, command=None if tests.ids else tests.test_cmd or "pytest",
        runner_cmd=plan.runner_cmd, test_files=tests.hidden_files,
        whole_files=tests.whole_files, timeout_s=timeout, pre_test=plan.pre_test)
    sandbox, _ = verifier.pool.acquire(verifier.baselines.fill_base)
    try:
        spectrum = trace_tests(sandbox, request, runner_kind=plan.runner.kind)
    except NotGradable as exc:
        spectrum = Spectrum(complete=False, note=str(exc))
    finally:
        verifier.pool.release(sandbox)
    facts = plan.base
    hidden = set(tests.hidden_files)
    protected = tuple(plan.task.protected)

    def editable(path: str) -> bool:
        return (path.endswith(".py") and path not in hidden and protected_reason(path) is None
                and not is_test_support(path, protected))

    return BaseTrace(
        spectrum, editable,
        passing=facts.passing if facts is not None else (),
        failure_text="\n".join(facts.messages.values()) if facts is not None else "",
    )

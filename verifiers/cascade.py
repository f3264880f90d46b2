"""Run the verifiers in order, cheapest first, stopping at the first stage that does not pass.

The order is ooda.agent.contracts.protocols.CASCADE_ORDER (syntax, tampering, ruff, pytest,
security, mypy, repro), stated once; a stage that declares `after_tests = True` (security, mypy,
repro) runs only once the tests have passed, which the task verifier (agent/verify/verifier.py)
arranges with `split_at_tests` (and, when a second sandbox is idle, runs beside the tests
once the HOST_FIRST stages passed: agent/verify/spare.py). A deadline shrinks each stage's timeout; a stage that raises is reported as an "error" result, except
ooda.agent.contracts.errors.InfraError, which propagates (the sandbox itself broke).
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Sequence

from ooda.agent.contracts.errors import InfraError
from ooda.agent.contracts.protocols import (
    CASCADE_ORDER,
    CheckSpec,
    Sandbox,
    Verifier,
    VerifierResult,
)
from ooda.verifiers import clip
from ooda.verifiers.mypy_check import MypyVerifier
from ooda.verifiers.repro_check import ReproVerifier
from ooda.verifiers.ruff_check import RuffVerifier
from ooda.verifiers.runners import TestRunner
from ooda.verifiers.security_check import SecurityVerifier
from ooda.verifiers.syntax import SyntaxVerifier
from ooda.verifiers.tamper_check import TamperVerifier
from ooda.verifiers.tests_stage import TestsVerifier

CONTINUE = frozenset({"passed", "skipped"})
"""Stage statuses after which the cascade goes on."""

Prepare = Callable[[Verifier, CheckSpec], None]
"""Called before a stage runs, e.g. to fill check.baseline[verifier.name] lazily."""


def default_verifiers(
    ruff: bool = True,
    mypy: bool = True,
    security: bool = True,
    security_rules: Sequence[str] | None = None,
    reproduction: bool = False,
    runner: TestRunner | None = None,
) -> list[Verifier]:
    """The cascade in CASCADE_ORDER: syntax, tampering (always: nothing the candidate adds may
    reach into the test run), ruff (optional), pytest, security (optional; ruff `S` rules
    `security_rules`, default security_check.RULES, plus the secret scan), mypy (optional), the
    reproduction tests (`reproduction`: a blind run's; skipped when a check carries none).
    The tests stage runs the task's tests with `runner` (verifiers/runners/; default pytest)."""
    stages: list[Verifier] = [SyntaxVerifier(), TamperVerifier(), TestsVerifier(runner)]
    if reproduction:
        stages.append(ReproVerifier())
    if ruff:
        stages.append(RuffVerifier())
    if security:
        stages.append(SecurityVerifier(security_rules))
    if mypy:
        stages.append(MypyVerifier())
    return sorted(stages, key=lambda stage: CASCADE_ORDER.index(stage.name))


def split_at_tests(verifiers: Sequence[Verifier]) -> tuple[list[Verifier], list[Verifier]]:
    """(the stages before and with the tests, the stages that run only after they passed)."""
    first = [v for v in verifiers if not v.after_tests]
    late = [v for v in verifiers if v.after_tests]
    return first, late


HOST_FIRST = frozenset({"syntax", "tampering"})
"""The stages that judge the candidate's files on the host before any tool sees them in a
sandbox: nothing else of the candidate's is looked at, let alone run, before they passed."""


def split_host_first(verifiers: Sequence[Verifier]) -> tuple[list[Verifier], list[Verifier]]:
    """(the leading stages of HOST_FIRST, the rest), in order."""
    count = 0
    while count < len(verifiers) and verifiers[count].name in HOST_FIRST:
        count += 1
    return list(verifiers[:count]), list(verifiers[count:])


def run_cascade(
    sandbox: Sandbox,
    check: CheckSpec,
    verifiers: Sequence[Verifier],
    *,
    deadline: float | None = None,
    prepare: Prepare | None = None,
) -> list[VerifierResult]:
    """Run each verifier until one does not pass; return the results of those that ran.

    `deadline` is a time.monotonic() instant: each stage gets at most the time left (and at
    most check.timeout_s); when none is left the next stage is reported as "timeout"."""
    results: list[VerifierResult] = []
    for verifier in verifiers:
        stage_check = check
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                message = "the time budget ran out before this stage could run"
                results.append(VerifierResult(verifier.name, "timeout", 0.0, message, message))
                break
            stage_check = dataclasses.replace(check, timeout_s=min(check.timeout_s, left))
        result = _run_stage(sandbox, stage_check, verifier, prepare)
        results.append(result)
        if result.status not in CONTINUE:
            break
    return results


def _run_stage(
    sandbox: Sandbox, check: CheckSpec, verifier: Verifier, prepare: Prepare | None
) -> VerifierResult:
    start = time.monotonic()
    try:
        if prepare is not None:
            prepare(verifier, check)
        result = verifier.verify(sandbox, check)
    except InfraError:
        raise
    except Exception as exc:  # a verifier bug must not take the loop down
        log = traceback.format_exc()
        summary = clip(f"the {verifier.name} verifier crashed: {type(exc).__name__}: {exc}")
        return VerifierResult(verifier.name, "error", time.monotonic() - start, summary, log)
    if result.duration_s <= 0:
        result.duration_s = time.monotonic() - start
    return result

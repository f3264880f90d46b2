"""Run the verifiers in order, cheapest first, stopping at the first stage that does not pass.

The stages, their order and where and when each runs are agent/contracts/stages.py's `STAGES`
(syntax, tampering, ruff, pytest, security, mypy, repro); `build` makes the cascade from it.
A stage that runs only after the tests (security, mypy, repro) is split off by `split_at_tests`
and run by the task verifier (agent/verify/verifier.py) once the tests passed (and, when a
second sandbox is idle, beside the tests once the HOST_FIRST stages passed:
agent/verify/spare.py). A deadline shrinks each stage's timeout; a stage that raises is reported
as an "error" result, except ooda.agent.contracts.errors.InfraError, which propagates (the
sandbox itself broke).
"""

from __future__ import annotations

import dataclasses
import importlib
import time
import traceback
from collections.abc import Callable, Sequence

from ooda.agent.contracts import stages as registry
from ooda.agent.contracts.errors import InfraError
from ooda.agent.contracts.protocols import CheckSpec, Sandbox, Verifier, VerifierResult
from ooda.agent.contracts.stages import HOST_FIRST, Stage, runs, stage
from ooda.verifiers import clip
from ooda.verifiers.runners import TestRunner
from ooda.verifiers.settings import StageSettings

__all__ = ["CONTINUE", "HOST_FIRST", "build", "default_verifiers", "make_stage", "run_cascade",
           "split_at_tests", "split_host_first"]

CONTINUE = frozenset({"passed", "skipped"})
"""Stage statuses after which the cascade goes on."""

Prepare = Callable[[Verifier, CheckSpec], None]
"""Called before a stage runs, e.g. to fill check.baseline[verifier.name] lazily."""


def make_stage(entry: Stage, settings: StageSettings) -> Verifier:
    """The verifier of one registered stage: its module's `stage(settings)`."""
    made: Verifier = importlib.import_module(entry.module).stage(settings)
    return made


def build(switched_on: Callable[[str], bool], settings: StageSettings, *,
          blind: bool = False, stages: Sequence[Stage] | None = None) -> list[Verifier]:
    """The cascade, in order: every stage of `stages` (default: the registry) that runs, an
    optional one when `switched_on(its task key)`."""
    return [make_stage(s, settings) for s in (registry.STAGES if stages is None else stages)
            if runs(s, s.task_key is not None and switched_on(s.task_key), blind=blind)]


def default_verifiers(
    ruff: bool = True,
    mypy: bool = True,
    security: bool = True,
    security_rules: Sequence[str] | None = None,
    reproduction: bool = False,
    runner: TestRunner | None = None,
) -> list[Verifier]:
    """The cascade with the optional stages named on or off (ruff, mypy, security; any other
    optional stage on; `security_rules`: its
    ruff `S` rules, default security_check.RULES, plus the secret scan), the reproduction tests
    when `reproduction` (a blind run's; skipped when a check carries none), and the tests run
    with `runner` (verifiers/runners/; default pytest)."""
    named = {"ruff": ruff, "mypy": mypy, "security": security}
    return build(lambda key: named.get(key, True), StageSettings(runner, security_rules),
                 blind=reproduction)


def split_at_tests(verifiers: Sequence[Verifier]) -> tuple[list[Verifier], list[Verifier]]:
    """(the stages before and with the tests, the stages that run only after they passed)."""
    late = [v for v in verifiers if _after_tests(v)]
    return [v for v in verifiers if not _after_tests(v)], late


def _after_tests(verifier: Verifier) -> bool:
    entry = stage(verifier.name)
    return entry is not None and entry.after_tests


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

"""How a run ended, in its record: the status and reason the loop's attempts add up to, and
run.json's `RunSummary` of a loop (its attempts, tokens, models, context, selection).

Apart from the loop (agent/core/loop.py), which runs the rounds: this reads what they left.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Literal

from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import EndpointReport
from ooda.agent.core import selection
from ooda.agent.core.candidate import NO_MORE
from ooda.agent.core.records import Attempt, RunSummary, Tokens
from ooda.agent.core.schedule import per_model
from ooda.agent.core.sources import model_of

if TYPE_CHECKING:
    from ooda.agent.core.loop import Loop

Status = Literal["passed", "failed", "error"]


def ending(attempts: list[Attempt], winner: Attempt | None, reason: str, *,
           budget_spent: bool, fatal: InfraError | UsageError | None) -> tuple[Status, str]:
    """The run's status and reason from its attempts: passed with a winner; an error when
    every attempt errored, when the model never gave a whole answer (the endpoint's failure),
    or when an error every candidate would meet ended it; else failed, with why the rounds
    ended (`reason`; "budget" when it was spent)."""
    if fatal is not None:
        return "error", str(fatal)
    if winner is not None:
        return "passed", "passed"
    if budget_spent:
        reason = "budget"
    if attempts and all(a.status == "error" for a in attempts):
        return "error", attempts[-1].reason or "every attempt errored"
    if attempts and not any(map(_whole_answer, attempts)) and not reason.startswith(NO_MORE):
        return "error", _no_answer_reason(attempts, reason)  # (a source with nothing to
        # propose, such as mutation with no line pointed at, failed: it is no endpoint)
    return "failed", reason


def summarize(loop: Loop, status: str, reason: str, winner: Attempt | None, rounds_used: int,
              submitted: Attempt | None = None) -> RunSummary:
    """run.json's summary of `loop` as it stands."""
    attempts, budget, config, schedule = loop.attempts, loop.budget, loop.config, loop.schedule
    near = selection.closest(attempts) if winner is None else None
    models = per_model(attempts, schedule, winner, _other_requests(loop))
    blind = config.select == "blind"
    model = model_of(loop.source)
    return RunSummary(
        run_id=loop.log.run_id,
        task_id=loop.task.id,
        status=status,
        reason=reason,
        model=loop.source.name,
        samples=config.samples,
        rounds=config.rounds,
        rounds_used=rounds_used,
        select=config.select,
        wall_s=round(budget.elapsed(), 3),
        budget_s=config.time_budget_s,
        winner=winner.attempt_id if winner else None,
        attempts=len([a for a in attempts if a.status != "pending"]),
        statuses=dict(Counter(a.status for a in attempts)),
        halted=dict(Counter(rule for a in attempts for rule in a.halted_by)),
        chars_saved=sum(a.chars_saved for a in attempts),
        dropped={a.attempt_id: [d.to_json() for d in a.dropped]
                 for a in attempts if a.dropped and a.duplicate_of is None},
        tokens=Tokens(budget.prompt_tokens, budget.completion_tokens, budget.estimated,
                      budget.counted),
        time_to_first_pass_s=budget.since_start(winner.t_verified) if winner else None,
        endpoint=model.report() if isinstance(model, EndpointReport) else None,
        sandbox=loop.sandbox,
        fail_to_pass=list(loop.task.fail_to_pass),
        pass_to_pass=list(loop.task.pass_to_pass),
        context=loop.conversation.record(),
        models=models,
        winner_model=winner.model if winner else None,
        escalate_to=schedule.strong.source.name if schedule.strong else None,
        escalated_at_round=schedule.escalated_at,
        escalation_reason=schedule.escalation_reason,
        cost_usd=round(sum(m["cost_usd"] for m in models.values()), 6),
        submitted=submitted.attempt_id if blind and submitted else None,
        submitted_verified_s=budget.since_start(submitted.t_verified)
        if blind and submitted else None,
        selection=loop.selection if blind else None,
        reproduction=loop.repro.summary() if blind and loop.repro is not None else None,
        first=schedule.first.source.name if schedule.first else None,
        handed_over_at_round=schedule.handed_over_at if schedule.first else None,
        handover_reason=schedule.handover_reason,
        closest=near.attempt_id if near else None,
        closest_reason=near.reason.splitlines()[0][:300] if near and near.reason else None,
    )


def _other_requests(loop: Loop) -> dict[str, tuple[int, int, int]]:
    """(requests, prompt tokens, completion tokens) per model of the run's requests that are
    not candidates: a blind run's reproduction tests and its critic."""
    other = dict(loop.repro.usage()) if loop.repro is not None else {}
    critic = loop.critic
    if critic is not None and critic.report.requests:
        calls, prompt, completion = other.get(critic.model.name, (0, 0, 0))
        report = critic.report
        other[critic.model.name] = (calls + report.requests, prompt + report.prompt_tokens,
                                    completion + report.completion_tokens)
    return other


def _whole_answer(attempt: Attempt) -> bool:
    """Whether `attempt` got a whole answer (or a patch from a source that writes no answer,
    such as mutation): a stream cut before its finish_reason (its text kept) is none, so an
    endpoint that cuts every stream is an infrastructure failure, not a model that could not
    fix the task."""
    return attempt.finish_reason is not None or bool(attempt.patch) or (
        bool(attempt.answer) and attempt.status not in ("error", "timeout", "cancelled"))


def _no_answer_reason(attempts: list[Attempt], ended: str) -> str:
    """Why a run in which the model never produced an answer is the endpoint's failure (an
    infrastructure error), whatever ran out first: its last request's error, if any."""
    errors = [a.reason for a in attempts if a.status in ("error", "timeout") and a.reason]
    last = f"; last: {errors[-1]}" if errors else ""
    if any(a.answer for a in attempts):  # text arrived, but never a whole answer
        return f"the endpoint delivered no whole answer: every stream was cut ({ended}){last}"
    return f"the model produced no answer ({ended}){last}"

"""The evaluation protocol of a run: blind (the default) or oracle, and a blind run's judging.

A task with hidden tests (a test patch, tasks/hidden.py) runs **blind** unless the user asks
for `--oracle`: the loop sees the visible task only (no test ids, no test patch), verifies its
candidates with what it may see (regression tests, the model's reproduction tests, the static
stages), and submits one patch (agent/core/blind_select.py). Then, and only then, the hidden
tests judge: the submitted patch once (`resolved`), and every other distinct candidate the
loop judged (`oracle_coverage`: would any of them have passed; `n`/`c` for pass@k, which is
coverage too). Nothing of that reaches the model. With `--oracle`, the hidden tests are the
loop's own verifier and their failures are fed back, as before this protocol existed: its
resolved rate is an oracle's number. `--model gold` is the oracle's answer itself: oracle.

docs/SWEBENCH.md says which number to compare with which leaderboard.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ooda.agent.contracts.errors import InfraError
from ooda.agent.contracts.protocols import Verdict
from ooda.agent.core.blind_select import JUDGED
from ooda.agent.core.loop import INTERRUPTED, Attempt, RunResult
from ooda.agent.core.records import HiddenJudging
from ooda.agent.core.runlog import RunLog, SummaryRecorder
from ooda.agent.core.sources import source_kind
from ooda.agent.support.text import one_line
from ooda.agent.verify.plan import TaskPlan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.hidden import has_hidden_tests
from ooda.tasks.loader import Task

Protocol = Literal["blind", "oracle"]
PROTOCOLS: tuple[Protocol, ...] = ("blind", "oracle")


def protocol_for(oracle: bool, model: str | None) -> Protocol:
    """The protocol a run or an evaluation follows."""
    return "oracle" if oracle or source_kind(model).oracle else "blind"


def runs_blind(task: Task, protocol: Protocol) -> bool:
    """Whether the loop must not see `task`'s tests: blind, and it has hidden ones."""
    return protocol == "blind" and has_hidden_tests(task)


def open_judge(plan: TaskPlan, loops: TaskVerifier, retry_failed_environment: bool = False
               ) -> TaskVerifier:
    """The verifier of the hidden tests (the whole task's plan), for the base check before
    the loop (make_plan settles the plan with it) and the judging after it, on the sandboxes
    of `loops` (the loop's verifier): no sandbox of the loop's ever holds the hidden tests
    while the loop uses it (each is filled afresh for every verification)."""
    return TaskVerifier(plan, loops.backend, loops.work_root / "judge", pool=loops.pool,
                        retry_failed_environment=retry_failed_environment)


@dataclass
class Judgement:
    """What the hidden tests said after a blind loop."""

    submitted: Attempt | None
    verdict: Verdict | None
    """The submitted patch's verdict (None: nothing was submitted)."""
    judged: dict[str, str] = field(default_factory=dict)
    """attempt id -> the hidden tests' status, for every attempt whose patch was judged."""
    seconds: float = 0.0

    @property
    def resolved(self) -> bool:
        return self.verdict is not None and self.verdict.status == "passed"

    def record(self) -> HiddenJudging:
        """run.json's `oracle` entry."""
        return HiddenJudging(
            submitted_verdict=self.verdict.reason if self.verdict else None,
            judged=dict(self.judged),
            n=len(self.judged),
            c=sum(1 for s in self.judged.values() if s == "passed"),
            seconds=round(self.seconds, 3),
        )


def judge_candidates(judge: TaskVerifier, result: RunResult, log: RunLog,
                     concurrency: int, every: bool = True) -> Judgement:
    """The hidden tests on the submitted patch, then (`every`) on each other distinct patch
    the loop judged (duplicates share the verdict); logs under `judged/<attempt_id>/`."""
    started = time.monotonic()
    groups: dict[str, list[Attempt]] = {}
    for attempt in result.attempts:
        if attempt.status in JUDGED and attempt.patch and attempt.code_key:
            groups.setdefault(attempt.code_key, []).append(attempt)
    submitted = result.submitted
    order = sorted(groups, key=lambda k: submitted is None or k != submitted.code_key)
    if not every:
        order = [k for k in order if submitted is not None and k == submitted.code_key]
    verdicts: dict[str, Verdict] = {}

    def one(key: str) -> None:
        first = groups[key][0]
        verdicts[key] = judge.verify(first.patch, log_dir=log.dir / "judged" / first.attempt_id,
                                     verdict_only=True)

    with ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="ooda-judge") as pool:
        list(pool.map(one, order))
    judged: dict[str, str] = {a.attempt_id: verdicts[key].status
                              for key in order for a in groups[key]}
    verdict = verdicts.get(submitted.code_key or "") if submitted is not None else None
    return Judgement(submitted, verdict, judged, time.monotonic() - started)


@contextlib.contextmanager
def judging_recorded(result: RunResult, recorder: SummaryRecorder) -> Iterator[None]:
    """A judge that fails (a sandbox that broke, Ctrl-C) leaves a run.json that says so: the
    loop's own summary would say "passed" of a patch the hidden tests never judged."""
    try:
        yield
    except (InfraError, KeyboardInterrupt) as exc:
        why = one_line(exc) if isinstance(exc, InfraError) else INTERRUPTED
        summary = replace(result.summary, protocol="blind", hidden_tests=True,
                          loop_status=result.status, loop_reason=result.reason,
                          status="error", reason=f"judging the submitted patch: {why}",
                          winner=None, resolved=False)
        with contextlib.suppress(InfraError):
            recorder.now(summary)
        raise


def blind_outcome(result: RunResult, judgement: Judgement, recorder: SummaryRecorder,
                  regression: dict[str, Any] | None = None) -> RunResult:
    """The run as the hidden tests judged it: passed when the submitted patch passes them
    (then it is the winner and final.diff), failed otherwise; the loop's own status kept as
    `loop_status`. submitted.diff always holds what was submitted. `regression`: what the
    regression tests were (run.json `regression`: each test file run on the base)."""
    log = recorder.log
    submitted = judgement.submitted
    if submitted is not None:
        (log.dir / "submitted.diff").write_text(submitted.patch, encoding="utf-8")
    resolved = judgement.resolved
    status: Literal["passed", "failed", "error"]
    if result.status == "error":
        status, reason = "error", result.reason
    elif submitted is None:
        status, reason = "failed", f"nothing to submit ({result.reason})"
    elif resolved:
        status, reason = "passed", f"resolved: the submitted patch {submitted.attempt_id} " \
                                   "passes the hidden tests"
        log.write_final_diff(submitted.patch)
    else:
        why = judgement.verdict.reason if judgement.verdict else "not judged"
        status, reason = "failed", f"the submitted patch {submitted.attempt_id} does not " \
                                   f"pass the hidden tests ({why})"
    summary = replace(
        result.summary,
        protocol="blind",
        hidden_tests=True,
        loop_status=result.status,
        loop_reason=result.reason,
        status=status,
        reason=reason,
        winner=submitted.attempt_id if resolved and submitted else None,
        resolved=resolved,
        oracle_coverage=any(s == "passed" for s in judgement.judged.values()),
        oracle=judgement.record(),
        regression=regression or {},
        time_to_first_pass_s=result.summary.submitted_verified_s if resolved else None,
    )
    recorder.record(summary)
    return replace(result, status=status, reason=reason, winner=submitted if resolved else None,
                   summary=summary)


def plain_outcome(result: RunResult, protocol: Protocol, hidden: bool,
                  recorder: SummaryRecorder) -> RunResult:
    """A run whose loop saw the task's own tests (oracle, or no hidden tests): resolved is the
    loop's pass, and so is oracle coverage."""
    passed = result.status == "passed"
    result.summary = replace(result.summary, protocol=protocol, hidden_tests=hidden,
                             resolved=passed, oracle_coverage=passed)
    recorder.record(result.summary)
    return result

"""The mutation source (agent/core/sources/mutate.py) in the loop, with fakes: it localises
through the verifier's traced run, proposes mutants of the suspicious line (the fix among them),
starts each from the task, and says when it has none left."""

from __future__ import annotations

import json
from pathlib import Path

from loop_fakes import FakeModel, FakeVerifier, run_loop

from ooda.agent.contracts.options import LoopOptions
from ooda.agent.contracts.spectrum import BaseTrace, Spectrum, TestTrace
from ooda.agent.core.loop import NO_MORE, Loop
from ooda.agent.core.runlog import RunLog
from ooda.agent.core.schedule import ModelSchedule, Tier
from ooda.agent.core.sources import SOURCES, LLMSource, source_kind
from ooda.agent.core.sources.mutate import TEST_TIME_FLOOR, MutationSource, time_limit
from ooda.tasks.loader import Task


class TracingVerifier(FakeVerifier):
    """The fake verifier, which can also trace: the failing test ran calc.py's lines 1-2."""

    def __init__(self, passes: bool = True) -> None:
        super().__init__()
        self.passes = passes
        self.traced = 0

    def trace_base(self, *, deadline: float | None = None) -> BaseTrace:
        self.traced += 1
        failing = TestTrace("tests/test_calc.py::test_add", "failed",
                            {"calc.py": frozenset({2})}, (("tests/test_calc.py", 3),))
        return BaseTrace(Spectrum((failing,)), lambda path: path == "calc.py")

    def limit_test_time(self, seconds: float) -> None:
        self.limit = seconds

    def verify(self, patch: str, **kwargs: object):  # type: ignore[no-untyped-def]
        verdict = super().verify(patch)
        if not self.passes and verdict.status == "passed":
            verdict.status = "failed"
        return verdict


def test_mutate_is_a_source_by_its_name() -> None:
    kind = source_kind("mutate")
    assert kind is SOURCES["mutate"] and not kind.asks_endpoint and not kind.oracle
    options = kind.loop_options(LoopOptions(samples=4, rounds=3))
    assert options.rounds >= 1000 and options.context_votes == 0
    assert MutationSource.samples >= 16 and not MutationSource.learns_from_feedback


def test_the_fix_is_found_by_mutating_the_suspicious_line(task: Task, tmp_path: Path) -> None:
    verifier = TracingVerifier()
    result, lines, summary, log = run_loop(task, MutationSource(task), verifier, tmp_path,
                                           samples=4, rounds=5)
    assert result.status == "passed", summary["reason"]
    assert verifier.traced == 1 and verifier.limit == TEST_TIME_FLOOR
    assert "+    return a + b" in result.winner.patch
    answer = (log.dir / "attempts" / result.winner.attempt_id / "answer.md").read_text()
    assert "calc.py:2: arithmetic:" in answer and "suspiciousness 1.000" in answer
    assert all(line["model"] == "mutate" for line in lines)


def test_a_source_with_nothing_left_ends_the_run(task: Task, tmp_path: Path) -> None:
    source = MutationSource(task)
    result, lines, summary, _ = run_loop(task, source, TracingVerifier(passes=False),
                                         tmp_path, samples=8, rounds=1000)
    assert result.status == "failed" and summary["reason"].startswith(NO_MORE)
    assert "single mutants of 1 suspicious lines and pairs of the best tried" in summary["reason"]
    patches = [line["patch_sha256"] for line in lines
               if line["status"] == "failed" and not line["duplicate_of"]]
    assert len(patches) == len(set(patches)) > source.singles > 3  # every mutant once, pairs too


def test_without_a_trace_the_smallest_editable_files_are_mutated(
    task: Task, tmp_path: Path
) -> None:
    source = MutationSource(task)
    result, _, summary, log = run_loop(task, source, FakeVerifier(), tmp_path, samples=4,
                                       rounds=20)
    assert result.status == "passed", summary["reason"]
    answer = (log.dir / "attempts" / result.winner.attempt_id / "answer.md").read_text()
    assert "no line was pointed at" in answer


def test_a_mutants_tests_get_a_few_times_what_the_traced_run_took() -> None:
    traces = (TestTrace("a", "passed", duration_s=4.0), TestTrace("b", "failed", duration_s=1.0),
              TestTrace("c", "timeout", duration_s=2.0))
    assert time_limit(Spectrum(traces, duration_s=7.0)) == 20.0  # its start-up counts
    assert time_limit(Spectrum(traces, duration_s=3.5)) == TEST_TIME_FLOOR
    assert time_limit(Spectrum()) == TEST_TIME_FLOOR


# --------------------------------------------------------------------------- a first tier

SUMMED = "calc.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return sum((a, b))\n>>>>>>> REPLACE\n"


class OnlySum(TracingVerifier):
    """Passes only the model's fix (`sum((a, b))`), which no mutant makes."""

    def verify(self, patch: str, **kwargs: object):  # type: ignore[no-untyped-def]
        verdict = super().verify(patch)
        verdict.status = "passed" if "sum((a, b))" in patch else "failed"
        return verdict


def test_a_first_tier_hands_over_to_the_model_when_it_has_nothing_left(
    task: Task, tmp_path: Path
) -> None:
    model = FakeModel({1: [SUMMED]})
    schedule = ModelSchedule(Tier(LLMSource(model)), first=Tier(MutationSource(task),
                                                                role="first"))
    log = RunLog(tmp_path / "runs", "run1")
    loop = Loop(task, LLMSource(model), OnlySum(), log, LoopOptions(samples=2, rounds=1000),
                schedule=schedule)
    result = loop.run()
    assert result.status == "passed" and result.winner.model == "fake"
    assert schedule.first_exhausted and schedule.handed_over_at is not None
    assert schedule.handover_reason == "mutate has no more candidates"
    # the model's samples ask at once and the fake answers in the order the requests arrive:
    # the fix is whichever sample got it, every sample of the hand-over round starts afresh
    first_llm = next(a for a in result.attempts if a.model == "fake" and "sum((a, b))" in a.patch)
    assert first_llm.parent is None
    assert "A faster model tried this task first" in first_llm.messages[-1]["content"]
    summary = json.loads((log.dir / "run.json").read_text())
    assert summary["models"]["mutate"]["role"] == "first" and summary["first"] == "mutate"
    assert summary["handover_reason"] == "mutate has no more candidates"
    assert summary["handed_over_at_round"] == schedule.handed_over_at


def test_a_first_tier_hands_over_after_its_share_of_the_budget() -> None:
    first, fast, strong = (Tier(LLMSource(FakeModel({1: ["x"]}))) for _ in range(3))
    schedule = ModelSchedule(fast, strong, first=first, after_rounds=2)
    assert schedule.tier_for(1, 100, 1.0) is first
    assert schedule.tier_for(5, 100, 0.7) is first
    assert schedule.tier_for(6, 100, 0.6) is fast and schedule.handed_over_at == 6
    assert schedule.starts_afresh(6) and not schedule.starts_afresh(7)
    assert schedule.tier_for(7, 100, 0.5) is fast
    assert schedule.tier_for(8, 100, 0.5) is strong and schedule.escalated_at == 8
    assert schedule.tiers == [first, fast, strong]


def test_nothing_to_propose_is_a_failed_run_not_an_endpoint_error(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for n in range(25):  # too many files to mutate blindly
        (repo / f"m{n}.py").write_text("def f(a, b):\n    return a - b\n")
    task = Task(id="big", statement="?", repo=repo, fail_to_pass=["tests/test_m.py"])
    result, _, summary, _ = run_loop(task, MutationSource(task), FakeVerifier(), tmp_path,
                                     samples=2, rounds=3)
    assert result.status == "failed" and summary["reason"] == (
        f"{NO_MORE} (no suspicious line; the verifier cannot trace the tests; no line was "
        "pointed at, in too large a repository to mutate blindly)")

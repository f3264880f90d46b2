"""Unit tests of the loop with a fake model and a fake verifier (no network, no sandbox)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from loop_fakes import (
    NO_MATCH,
    RIGHT,
    WRONG,
    FakeModel,
    FakeVerifier,
    edit,
    run_loop,
)

from ooda.agent.contracts.errors import ContextOverflow, GenerationError
from ooda.agent.contracts.protocols import Completion
from ooda.tasks.loader import Task


def test_first_right_answer_wins_and_run_files_hold_contract_fields(
    task: Task, tmp_path: Path
) -> None:
    result, lines, summary, log = run_loop(
        task, FakeModel({1: [RIGHT]}), FakeVerifier(), tmp_path, samples=1
    )
    assert result.status == "passed"
    assert summary["winner"] == "r1c1"
    for key in (
        "run_id",
        "task_id",
        "status",
        "reason",
        "model",
        "samples",
        "rounds_used",
        "wall_s",
        "budget_s",
        "winner",
        "attempts",
        "tokens",
    ):
        assert key in summary
    for key in (
        "attempt_id",
        "round",
        "parent_id",
        "model",
        "t_start_s",
        "t_first_token_s",
        "t_generated_s",
        "t_verified_s",
        "prompt_tokens",
        "completion_tokens",
        "patch_sha256",
        "duplicate_of",
        "status",
        "verifiers",
    ):
        assert key in lines[0]
    assert (log.dir / "final.diff").read_text().count("+    return a + b") == 1
    assert (log.dir / "attempts" / "r1c1" / "answer.md").exists()


def test_wrong_first_round_is_solved_through_feedback(task: Task, tmp_path: Path) -> None:
    model = FakeModel({1: [WRONG, NO_MATCH, "I think it is fine."], 2: [RIGHT]})
    result, lines, summary, _ = run_loop(task, model, FakeVerifier(), tmp_path, samples=3, rounds=3)
    assert result.status == "passed"
    assert result.winner is not None and result.winner.round == 2
    by_id = {line["attempt_id"]: line for line in lines}
    parent = by_id[result.winner.attempt_id]["parent_id"]
    assert parent is not None and by_id[parent]["status"] in ("failed", "invalid_edit")
    statuses = {line["status"] for line in lines if line["round"] == 1}
    assert statuses == {"failed", "invalid_edit"}


def test_child_of_failed_parent_continues_from_its_patch(task: Task, tmp_path: Path) -> None:
    fix_on_top = edit("    return a * b", "    return a + b")
    model = FakeModel({1: [WRONG], 2: [fix_on_top]})
    result, _, _, _ = run_loop(task, model, FakeVerifier(), tmp_path, samples=1, rounds=2)
    assert result.status == "passed"
    assert "-    return a - b" in result.winner.patch  # relative to the original file


def test_identical_patches_are_verified_once(task: Task, tmp_path: Path) -> None:
    verifier = FakeVerifier(delay_s=0.2)
    model = FakeModel({1: [WRONG]})
    result, lines, _, _ = run_loop(task, model, verifier, tmp_path, samples=4, rounds=1)
    assert result.status == "failed"
    assert verifier.calls == 1
    dups = [line for line in lines if line["duplicate_of"]]
    assert len(dups) == 3 and all(line["status"] == "failed" for line in dups)


class _Gathering(FakeModel):
    """Each answer is given only once `n` are being generated at once (at most 30 s): four in
    flight together is then shown by the run, not by four 0.3 s sleeps happening to overlap
    (a thread started late on a loaded machine)."""

    def __init__(self, answers: dict[int, list[str]], n: int) -> None:
        super().__init__(answers)
        self.together = threading.Barrier(n, timeout=30)

    def complete(self, messages: list[dict[str, str]], *, deadline: float,
                 on_text: Callable[[str], bool] | None = None) -> Completion:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self.together.wait()
        finally:
            with self.lock:
                self.in_flight -= 1
        return super().complete(messages, deadline=deadline, on_text=on_text)


def test_candidates_generate_in_parallel(task: Task, tmp_path: Path) -> None:
    model = _Gathering({1: [WRONG]}, 4)
    result, lines, _, _ = run_loop(task, model, FakeVerifier(), tmp_path, samples=4, rounds=1)
    assert model.max_in_flight == 4 and not model.together.broken
    assert len(lines) == 4 and all(line["status"] == "failed" for line in lines)


def test_budget_ends_the_run(task: Task, tmp_path: Path) -> None:
    model = FakeModel({1: [WRONG]}, delay_s=5.0)
    start = time.monotonic()
    result, _, summary, _ = run_loop(
        task, model, FakeVerifier(), tmp_path, samples=2, time_budget_s=1.0
    )
    assert time.monotonic() - start < 3.0
    # the model never answered: the endpoint's failure, whatever ran out first (issue 15.5)
    assert result.status == "error" and "budget" in summary["reason"]


class FailingModel(FakeModel):
    """An endpoint whose retries are still going when the deadline comes (HTTP 500s)."""

    def complete(self, messages: list[dict[str, str]], *, deadline: float,
                 on_text: Callable[[str], bool] | None = None) -> Completion:
        time.sleep(max(0.0, min(0.2, deadline - time.monotonic())))
        raise TimeoutError("deadline reached after 3 attempts; last error: HTTP 500")


def test_a_run_without_any_answer_is_an_infrastructure_error(task: Task, tmp_path: Path) -> None:
    result, _, summary, _ = run_loop(
        task, FailingModel({1: [WRONG]}), FakeVerifier(), tmp_path, samples=2, rounds=3,
        time_budget_s=1.5,
    )
    assert result.status == "error" and summary["status"] == "error"
    assert "no answer" in result.reason and "HTTP 500" in result.reason


def test_a_run_with_answers_that_fail_stays_failed(task: Task, tmp_path: Path) -> None:
    result, _, _, _ = run_loop(task, FakeModel({1: [WRONG]}), FakeVerifier(), tmp_path,
                               samples=1, rounds=1)
    assert result.status == "failed"


def test_select_best_prefers_smallest_diff(task: Task, tmp_path: Path) -> None:
    bigger = edit(
        "def add(a, b):\n    return a - b", "def add(a, b):\n    # fixed\n    return a + b"
    )
    model = FakeModel({1: [bigger, RIGHT, RIGHT]})
    result, _, _, _ = run_loop(
        task, model, FakeVerifier(), tmp_path, samples=3, rounds=1, select="best"
    )
    assert result.winner is not None and "# fixed" not in result.winner.patch


def test_token_budget_stops_new_rounds(task: Task, tmp_path: Path) -> None:
    model = FakeModel({1: [WRONG]})
    result, _, summary, _ = run_loop(
        task, model, FakeVerifier(), tmp_path, samples=1, rounds=5, token_budget=25
    )
    assert summary["reason"] == "tokens" and summary["rounds_used"] == 1


class WindowModel(FakeModel):
    """A model whose window holds the first prompt and one exchange, no more."""

    def complete(self, messages: list[dict[str, str]], *, deadline: float,
                 on_text: Callable[[str], bool] | None = None) -> Completion:
        if len(messages) > 4:
            raise ContextOverflow("the prompt does not fit", window=100)
        return super().complete(messages, deadline=deadline, on_text=on_text)


def test_a_feedback_conversation_over_the_window_is_shortened(task: Task,
                                                              tmp_path: Path) -> None:
    model = WindowModel({1: [WRONG], 2: [WRONG, RIGHT]})  # by the user messages it sees
    result, _, summary, records = run_loop(task, model, FakeVerifier(), tmp_path, samples=1,
                                           rounds=3)
    assert summary["status"] == "passed" and summary["rounds_used"] == 3
    third = next(a for a in result.attempts if a.round == 3)
    assert len(third.messages) == 4  # the task, the last answer and its feedback


def test_a_first_prompt_over_the_window_ends_the_run(task: Task, tmp_path: Path) -> None:
    class Tiny(FakeModel):
        def complete(self, messages: list[dict[str, str]], *, deadline: float,
                     on_text: Callable[[str], bool] | None = None) -> Completion:
            raise ContextOverflow("the prompt (~900 tokens) does not fit 200", window=200)

    with pytest.raises(ContextOverflow):
        run_loop(task, Tiny({1: [RIGHT]}), FakeVerifier(), tmp_path, samples=2, rounds=2)


def test_a_partial_answer_is_kept_when_generation_fails(task: Task, tmp_path: Path) -> None:
    class Breaks(FakeModel):
        def complete(self, messages: list[dict[str, str]], *, deadline: float,
                     on_text: Callable[[str], bool] | None = None) -> Completion:
            raise GenerationError("gave up after 3 attempts", partial="calc.py\n<<<<<<< SEA")

    result, _, summary, records = run_loop(task, Breaks({1: [RIGHT]}), FakeVerifier(), tmp_path,
                                           samples=1, rounds=1)
    (attempt,) = result.attempts
    assert attempt.status == "error" and attempt.answer == "calc.py\n<<<<<<< SEA"
    assert attempt.completion_tokens == 5 and attempt.tokens_estimated
    assert summary["tokens"]["estimated"] is True

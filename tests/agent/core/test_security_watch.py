"""The security watchdog as a stream check (agent/core/checks/security.py) and the LLM source's
correction at once: a halted answer is continued in the same candidate with its finding, the
halts are recorded (`halted_by`, `chars_saved`), at most MAX_CORRECTIONS times."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from loop_fakes import RIGHT, FakeVerifier, edit, run_loop

from ooda.agent.contracts.protocols import Completion
from ooda.agent.core.sources.llm import MAX_CORRECTIONS
from ooda.tasks.loader import Task
from ooda.tasks.verifier_options import VerifierOptions

EVAL = edit("    return a - b", "    return eval(f'{a} + {b}')") + "\nThat is all. " * 40


class Scripted:
    """Streams its answers in turn (the last one again once they run out), a line at a time,
    stopping when told; keeps each request's messages."""

    name = "scripted"

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[list[dict[str, str]]] = []

    def complete(self, messages: list[dict[str, str]], *, deadline: float,
                 on_text: Callable[[str], bool] | None = None) -> Completion:
        answer = self.answers[min(len(self.requests), len(self.answers) - 1)]
        self.requests.append(list(messages))
        text = ""
        for line in answer.splitlines(keepends=True):
            text += line
            if on_text is not None and on_text(text) is False:
                return Completion(text, 100, len(text) // 4, stopped_early=True)
        return Completion(text, 100, len(text) // 4, finish_reason="stop")


def test_a_halted_answer_is_corrected_in_the_same_candidate(task: Task,
                                                            tmp_path: Path) -> None:
    model = Scripted(EVAL, RIGHT)
    result, lines, summary, log = run_loop(task, model, FakeVerifier(), tmp_path,  # type: ignore[arg-type]
                                           samples=1, rounds=1)
    assert result.status == "passed" and len(lines) == 1
    assert summary["halted"] == {"S307 eval": 1}  # run.json counts them too
    kept = (log.attempt_dir("r1c1") / "halted-1.md").read_text()  # the halted answer, kept
    assert "return eval(f'{a} + {b}')" in kept and "S307 eval" in kept
    (line,) = lines
    assert line["status"] == "passed" and line["halted_by"] == ["S307 eval"]
    assert line["completion_tokens"] > len(RIGHT) // 4  # the halted answer's tokens count
    assert len(model.requests) == 2
    halted, finding = model.requests[1][-2:]
    assert halted["role"] == "assistant" and halted["content"].endswith(
        "    return eval(f'{a} + {b}')\n")
    assert "That is all" not in halted["content"]
    assert finding["role"] == "user" and "S307 eval" in finding["content"]
    assert "ast.literal_eval" in finding["content"]  # the safe alternative


def test_chars_saved_estimates_what_the_halted_answer_did_not_stream(
    task: Task, tmp_path: Path
) -> None:
    corrected = RIGHT + "\nThat is all. " * 40
    _, lines, _, _ = run_loop(task, Scripted(EVAL, corrected), FakeVerifier(), tmp_path,  # type: ignore[arg-type]
                              samples=1, rounds=1)
    halted_at = EVAL.index(">>>>>>> REPLACE")  # streamed up to the end of the eval line
    assert lines[0]["chars_saved"] == len(corrected) - halted_at


def test_corrections_are_bounded(task: Task, tmp_path: Path) -> None:
    model = Scripted(EVAL)
    result, lines, _, _ = run_loop(task, model, FakeVerifier(), tmp_path, samples=1,  # type: ignore[arg-type]
                                   rounds=1)
    assert result.status == "failed" and len(model.requests) == MAX_CORRECTIONS + 1
    (line,) = lines
    assert line["status"] == "invalid_edit" and line["invalid_reason"] == "security"
    assert line["halted_by"] == ["S307 eval"] * MAX_CORRECTIONS
    assert "S307 eval" in line["reason"]
    assert "S307 eval" in result.attempts[0].feedback  # the next round is told


def test_off_with_no_watchdog_or_without_the_security_stage(task: Task,
                                                            tmp_path: Path) -> None:
    model = Scripted(EVAL, RIGHT)
    _, lines, _, _ = run_loop(task, model, FakeVerifier(), tmp_path / "a", samples=1,  # type: ignore[arg-type]
                              rounds=1, no_watchdog=True)
    assert len(model.requests) == 1 and "halted_by" not in lines[0]
    off = dataclasses.replace(task, verifiers=VerifierOptions(security=False))
    model = Scripted(EVAL, RIGHT)
    _, lines, _, _ = run_loop(off, model, FakeVerifier(), tmp_path / "b", samples=1,  # type: ignore[arg-type]
                              rounds=1)
    assert len(model.requests) == 1 and "halted_by" not in lines[0]


def test_the_tasks_rules_select_what_halts(task: Task, tmp_path: Path) -> None:
    only_yaml = dataclasses.replace(task, verifiers=VerifierOptions(security_rules=["S506"]))
    model = Scripted(EVAL, RIGHT)
    _, lines, _, _ = run_loop(only_yaml, model, FakeVerifier(), tmp_path, samples=1,  # type: ignore[arg-type]
                              rounds=1)
    assert len(model.requests) == 1 and "halted_by" not in lines[0]

"""The plug-in seams: a new candidate source, stream check, edit format and verifier stage are
each one small class and one registry line (agent/core/sources/__init__.py SOURCES,
agent/core/checks/__init__.py CHECKS, agent/edits/formats.py EXPLICIT, agent/contracts/stages.py
STAGES); the loop and the cascade run them with no other change."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from loop_fakes import BUGGY, RIGHT, WRONG, FakeModel, FakeVerifier, run_loop

from ooda.agent import edits
from ooda.agent.contracts import stages
from ooda.agent.contracts.options import LoopOptions
from ooda.agent.contracts.protocols import Completion, VerifierResult
from ooda.agent.contracts.stages import Stage
from ooda.agent.core import checks, prompts, sources
from ooda.agent.core.checks import Stop, StreamContext
from ooda.agent.core.loop import NO_MORE, Loop
from ooda.agent.core.runlog import RunLog
from ooda.agent.core.schedule import ModelSchedule, Tier
from ooda.agent.core.sources import (
    Exhausted,
    LLMSource,
    Proposal,
    Request,
    SourceKind,
    source_kind,
)
from ooda.agent.edits import formats
from ooda.agent.edits.base import Workspace
from ooda.agent.edits.scan import Fence
from ooda.tasks.loader import Task
from ooda.tasks.verifier_options import verifier_keys, verifier_options
from ooda.verifiers.cascade import build, default_verifiers, split_at_tests
from ooda.verifiers.settings import StageSettings

# --------------------------------------------------------------------------- a candidate source


class FixedFiles:
    """A source that asks no model: it proposes new file contents directly."""

    name = "fixed"

    def __init__(self, task: Task) -> None:
        self.task = task

    def propose(self, request: Request, deadline: float) -> Proposal:
        now = time.monotonic()
        text = (request.read("calc.py") or "").replace("a - b", "a + b")
        return Proposal(Completion("", t_first_token=now, t_done=now), request.messages,
                        {"calc.py": text})


FIXED = SourceKind("fixed", FixedFiles, asks_endpoint=False)


def test_a_new_source_is_a_class_and_a_registry_line(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sources.SOURCES, FIXED.name, FIXED)  # the registry line
    kind = source_kind("fixed")
    assert kind is FIXED and kind.open is not None and source_kind("some-model") is sources.LLM
    result, lines, summary, _ = run_loop(task, kind.open(task), FakeVerifier(), tmp_path,
                                         samples=1, rounds=1)
    assert result.status == "passed" and summary["model"] == "fixed"
    assert lines[0]["model"] == "fixed" and "+    return a + b" in result.winner.patch
    assert (task.repo / "calc.py").read_text() == BUGGY  # proposals never touch the repository


def test_the_gold_source_proposes_the_tasks_patch(task: Task, tmp_path: Path) -> None:
    gold = source_kind("gold")
    assert gold.oracle and not gold.asks_endpoint
    patch = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
             "-    return a - b\n+    return a + b\n")
    task = Task(id=task.id, statement=task.statement, repo=task.repo,
                fail_to_pass=task.fail_to_pass, gold_patch=patch)
    assert gold.open is not None
    one = gold.loop_options(LoopOptions(samples=4, rounds=3))
    assert (one.samples, one.rounds, one.context_votes) == (1, 1, 0)
    result, lines, _, _ = run_loop(task, gold.open(task), FakeVerifier(), tmp_path,
                                   samples=1, rounds=1)
    assert result.status == "passed" and len(lines) == 1 and lines[0]["edit_format"] == "udiff"


class Countdown:
    """Proposes `left` wrong candidates, then has no more."""

    name = "countdown"

    def __init__(self, left: int) -> None:
        self.left = left
        self.lock = threading.Lock()

    def propose(self, request: Request, deadline: float) -> Proposal:
        with self.lock:
            if self.left == 0:
                raise Exhausted
            self.left -= 1
        text = (request.read("calc.py") or "").replace("a - b", f"a - b - {self.left}")
        return Proposal(Completion(""), request.messages, {"calc.py": text})


def test_a_source_with_no_more_candidates_ends_the_run(task: Task, tmp_path: Path) -> None:
    result, lines, summary, _ = run_loop(task, Countdown(3), FakeVerifier(), tmp_path,
                                         samples=2, rounds=5)
    assert result.status == "failed" and summary["reason"] == NO_MORE
    assert [x["status"] for x in lines].count("failed") == 3
    assert summary["rounds_used"] == 3  # round 2: one had nothing; round 3: none had any


def test_a_fast_source_with_no_more_candidates_escalates(task: Task, tmp_path: Path) -> None:
    schedule = ModelSchedule(Tier(Countdown(0)), Tier(LLMSource(FakeModel({1: [RIGHT]})),
                                                      role="strong"))
    log = RunLog(tmp_path / "runs", "run1")
    result = Loop(task, schedule.fast.source, FakeVerifier(), log,
                  LoopOptions(samples=1, rounds=4), schedule=schedule).run()
    assert result.status == "passed" and result.winner is not None
    assert result.winner.model == "fake" and schedule.escalated_at == 2
    assert "no more candidates" in str(schedule.escalation_reason)


# --------------------------------------------------------------------------- a stream check


class Streaming:
    """A model that streams its answer a line at a time and stops when told to."""

    name = "streaming"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.stopped_at: int | None = None

    def complete(self, messages: list[dict[str, str]], *, deadline: float,
                 on_text: Callable[[str], bool] | None = None) -> Completion:
        text = ""
        for line in self.answer.splitlines(keepends=True):
            text += line
            if on_text is not None and on_text(text) is False:
                self.stopped_at = len(text)
                return Completion(text, 5, 5, stopped_early=True)
        return Completion(text, 5, 5)


class NoSubtraction:
    """Stops an answer as soon as a line it adds subtracts."""

    def __init__(self, context: StreamContext) -> None:
        self.context = context

    def observe(self, text: str) -> Stop | None:
        if "return a * b" in text:
            return Stop("stopped while streaming: multiplies", "multiplies",
                        feedback="Do not multiply: add.")
        return None


def test_a_new_stream_check_is_a_class_and_a_registry_line(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checks, "CHECKS", (*checks.CHECKS, NoSubtraction))  # the registry line
    model = Streaming(WRONG + "\nand some more text that never arrives\n")
    result, lines, _, log = run_loop(task, model, FakeVerifier(), tmp_path, samples=1,
                                     rounds=1)
    assert model.stopped_at is not None and model.stopped_at < len(model.answer)
    assert lines[0]["status"] == "invalid_edit" and lines[0]["invalid_reason"] == "multiplies"
    assert result.attempts[0].feedback == "Do not multiply: add."  # what the next turn is told
    assert "more text" not in (log.attempt_dir("r1c1") / "answer.md").read_text()


def test_without_the_check_the_same_answer_is_verified(task: Task, tmp_path: Path) -> None:
    result, lines, _, _ = run_loop(task, Streaming(RIGHT), FakeVerifier(), tmp_path,
                                   samples=1, rounds=1)
    assert result.status == "passed" and lines[0]["status"] == "passed"


# --------------------------------------------------------------------------- an edit format


class LineEdit:
    """`LINE path:N = text` replaces line N of path with text."""

    name = "line"
    prompt = "A line `LINE path:N = text` replaces line N of the file with the text."
    asked = True
    begins = r"LINE \S+:\d+ = "
    completes = None

    def reader(self, lines: list[str], fences: list[Fence]) -> LineReader:
        return LineReader(lines)

    def apply_block(self, ws: Workspace, block: object) -> bool:
        path, number, text = block  # type: ignore[misc]
        old = (ws.get(path) or "").splitlines(keepends=True)
        old[number - 1] = text + "\n"
        ws.set(path, "".join(old))
        return True


class LineReader:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def read(self, index: int) -> tuple[object, int] | None:
        found = re.match(r"LINE (\S+):(\d+) = (.*)$", self.lines[index])
        if found is None:
            return None
        return (found[1], int(found[2]), found[3]), index + 1


def test_a_new_edit_format_is_a_class_and_a_registry_line(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(formats, "EXPLICIT", (*formats.EXPLICIT, LineEdit()))  # the line
    answer = "The fix:\nLINE calc.py:2 =     return a + b\n"
    assert LineEdit.prompt in prompts.system_prompt()  # the prompt teaches it
    assert edits.prose_before_edits(answer) is None  # the stream sees an edit begun
    result, lines, _, _ = run_loop(task, FakeModel({1: [answer]}), FakeVerifier(), tmp_path,
                                   samples=1, rounds=1)
    assert result.status == "passed" and lines[0]["edit_format"] == "line"


def test_without_the_format_its_answer_is_prose(task: Task, tmp_path: Path) -> None:
    answer = "The fix:\nLINE calc.py:2 =     return a + b\n"
    assert edits.prose_before_edits(answer) == answer
    _, lines, _, _ = run_loop(task, FakeModel({1: [answer]}), FakeVerifier(), tmp_path,
                              samples=1, rounds=1)
    assert lines[0]["status"] == "invalid_edit"


# --------------------------------------------------------------------------- a verifier stage


class ShortFiles:
    """A stage that fails a candidate whose changed files are over 100 lines."""

    name = "short_files"

    def verify(self, sandbox: object, check: object) -> VerifierResult:
        return VerifierResult(self.name, "passed", 0.0)


def stage(settings: StageSettings) -> ShortFiles:
    """What the registry line names: this module's stage."""
    return ShortFiles()


def test_a_new_stage_is_a_module_and_a_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    new = Stage("short_files", __name__, after_tests=True, task_key="short_files")
    at = [s.name for s in stages.STAGES].index("security")
    monkeypatch.setattr(stages, "STAGES", (*stages.STAGES[:at], new, *stages.STAGES[at:]))
    names = [v.name for v in default_verifiers()]
    assert names == ["syntax", "tampering", "ruff", "pytest", "short_files", "security", "mypy"]
    first, late = split_at_tests(default_verifiers())
    assert [v.name for v in late] == ["short_files", "security", "mypy"]  # after the tests
    assert "short_files" in verifier_keys()  # task.toml [verifiers] short_files = false
    off = verifier_options({"short_files": False}, "task.toml")
    assert not off.on("short_files") and off.on("ruff")
    assert "short_files" not in [v.name for v in build(off.on, StageSettings())]

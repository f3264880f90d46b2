"""Fakes for the loop's tests: a scripted model, a verifier that passes `a + b`, the `calc`
task (the `task` fixture of tests/agent/core/conftest.py) and `run_loop`; shared by tests/agent/core and tests/acceptance/test_speed.py (helpers are on
the import path through pytest's `pythonpath`, so no test module imports another by name)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ooda.agent.contracts.protocols import Completion, Verdict, VerifierResult
from ooda.agent.core.loop import Loop, LoopOptions
from ooda.agent.core.runlog import RunLog
from ooda.tasks.loader import Task

BUGGY = "def add(a, b):\n    return a - b\n"


def edit(old: str, new: str) -> str:
    return f"calc.py\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"


RIGHT = edit("    return a - b", "    return a + b")
WRONG = edit("    return a - b", "    return a * b")
NO_MATCH = edit("    return b - a", "    return a + b")


class FakeModel:
    """Answers by round: round -> list of answers, cycled; records concurrency."""

    name = "fake"

    def __init__(self, answers: dict[int, list[str]], delay_s: float = 0.0) -> None:
        self.answers = answers
        self.delay_s = delay_s
        self.counters: dict[int, int] = {}
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        deadline: float,
        on_text: Callable[[str], bool] | None = None,
    ) -> Completion:
        round_no = sum(1 for m in messages if m["role"] == "user")
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            options = self.answers.get(round_no) or self.answers[max(self.answers)]
            i = self.counters.get(round_no, 0)
            self.counters[round_no] = i + 1
        try:
            t0 = time.monotonic()
            time.sleep(min(self.delay_s, max(0.0, deadline - t0)))
            if time.monotonic() >= deadline:
                raise TimeoutError("deadline")
            return Completion(options[i % len(options)], 10, 20, t0, time.monotonic())
        finally:
            with self.lock:
                self.in_flight -= 1


class FakeVerifier:
    """Passes a patch that contains `a + b`; counts verifications."""

    backend_name = "fake"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.calls = 0
        self.verdict_only: list[bool] = []
        self.lock = threading.Lock()

    def verify(
        self,
        patch: str,
        *,
        log_dir: Path | None = None,
        deadline: float | None = None,
        verdict_only: bool = False,
        stop: threading.Event | None = None,
    ) -> Verdict:
        with self.lock:
            self.calls += 1
            self.verdict_only.append(verdict_only)
        time.sleep(self.delay_s)
        ok = "+    return a + b" in patch
        result = VerifierResult(
            "pytest",
            "passed" if ok else "failed",
            0.01,
            "" if ok else "tests/test_calc.py::test_add: assert -1 == 3",
        )
        return Verdict(
            status="passed" if ok else "failed",
            reason="all checks passed" if ok else "pytest: 1 test failed",
            results=[result],
            feedback=result.summary,
            changed_files=["calc.py"],
        )


def calc_task(tmp_path: Path) -> Task:
    """The `calc` task: calc.py subtracts where it should add."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text(BUGGY)
    return Task(
        id="calc", statement="add() subtracts", repo=repo, fail_to_pass=["tests/test_calc.py"]
    )


def run_loop(
    task: Task, model: FakeModel, verifier: FakeVerifier, tmp_path: Path, **config: object
):
    log = RunLog(tmp_path / "runs", "run1")
    loop = Loop(task, model, verifier, log, LoopOptions(**config))  # type: ignore[arg-type]
    result = loop.run()
    lines = [json.loads(x) for x in (log.dir / "attempts.jsonl").read_text().splitlines()]
    summary = json.loads((log.dir / "run.json").read_text())
    return result, lines, summary, log

"""A blind run's loop (select="blind"): reproduction tests written beside the first round,
candidates chosen without the judging tests (agent/core/blind_select.py). Fake model, fake
verifier: no network, no sandbox."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ooda.agent.contracts.protocols import (
    REPRO_REQUEST_LINE,
    Completion,
    ReproOnBase,
    ReproTest,
    Verdict,
    VerifierResult,
)
from ooda.agent.core.budget import Budget
from ooda.agent.core.loop import Loop, LoopOptions, RunResult
from ooda.agent.core.repro_writer import ReproWriter
from ooda.agent.core.runlog import RunLog
from ooda.agent.verify.admit import admit
from ooda.tasks.loader import Task


def edit(new: str, old: str = "    return a - b") -> str:
    return f"calc.py\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"


RIGHT = edit("    return a + b")
RIGHT_AGAIN = edit("    return a+b")  # another sample of the same fix, other layout
WRONG = edit("    return abs(a - b)")  # keeps the regression tests, fails the reproduction
BREAKS = edit("    return None")  # breaks the regression tests
SCRIPT = "```python\nfrom calc import add\nassert add(2, 3) == 5\n```"


class Model:
    """Reproduction requests get SCRIPT (or `tests`); fix requests the round's answers."""

    name = "fake"

    def __init__(self, answers: dict[int, list[str]], tests: list[str] | None = None) -> None:
        self.answers = answers
        self.tests = [SCRIPT] if tests is None else tests
        self.sent: list[list[dict[str, str]]] = []
        self.lock = threading.Lock()
        self.counters: dict[object, int] = {}

    def complete(self, messages: list[dict[str, str]], *, deadline: float,
                 on_text: Callable[[str], bool] | None = None) -> Completion:
        with self.lock:
            self.sent.append(messages)
            users = [m for m in messages if m["role"] == "user"]
            key: object = "test" if users[0]["content"].startswith(REPRO_REQUEST_LINE) \
                else len(users)
            options = self.tests if key == "test" else self.answers[int(key)]  # type: ignore[call-overload]
            i = self.counters.get(key, 0)
            self.counters[key] = i + 1
        now = time.monotonic()
        return Completion(options[i % len(options)], 100, 10, now, now)


class Verifier:
    """The regression tests fail `return None`; the reproduction test passes only `a + b`."""

    def __init__(self) -> None:
        self.adopted: list[ReproTest] = []
        self.ready = threading.Event()

    def adopt_reproduction(self, tests: list[ReproTest], *, deadline: float) -> list[ReproOnBase]:
        self.adopted = [ReproTest(t.name, t.source, True) for t in tests]
        self.ready.set()
        return [ReproOnBase(t.name, "failed", "AssertionError", True, True) for t in tests]

    def verify(self, patch: str, *, log_dir: Path | None = None, deadline: float | None = None,
               verdict_only: bool = False, stop: object = None) -> Verdict:
        assert self.ready.wait(5), "verified before the reproduction tests were adopted"
        if "return None" in patch:
            result = VerifierResult("pytest", "failed", 0.1, "test_add_small failed")
            return Verdict("failed", "pytest failed", [result], result.summary)
        fixed = "a+b" in patch.replace(" ", "")
        outcomes = {t.name: "passed" if fixed else "failed" for t in self.adopted}
        results = [VerifierResult("pytest", "passed", 0.1, ""),
                   VerifierResult("repro", "passed" if fixed else "failed", 0.1,
                                  "" if fixed else "repro_1 ended with AssertionError",
                                  details={"outcomes": outcomes,
                                           "required": [t.name for t in self.adopted]})]
        if fixed:
            return Verdict("passed", "passed: pytest, repro", results)
        return Verdict("failed", "repro failed", results, "repro_1 ended with AssertionError")


@pytest.fixture
def task(tmp_path: Path) -> Task:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return Task(id="calc", statement="add() subtracts", repo=repo)


def run(task: Task, model: Model, tmp_path: Path, samples: int, rounds: int = 1,
        tests: int = 2) -> tuple[RunResult, Verifier]:
    verifier = Verifier()
    log = RunLog(tmp_path / "runs", "run1")
    writer = ReproWriter(task, model, verifier, tests, log.dir / "reproduction")
    config = LoopOptions(samples=samples, rounds=rounds, time_budget_s=30, select="blind")
    return Loop(task, model, verifier, log, config, repro=writer).run(), verifier


def test_the_candidate_passing_its_reproduction_test_wins_over_a_wrong_one(
    task: Task, tmp_path: Path
) -> None:
    model = Model({1: [WRONG, RIGHT, WRONG, BREAKS]})
    result, _ = run(task, model, tmp_path, samples=4)
    assert result.winner is not None and result.submitted is result.winner
    assert "a + b" in result.winner.patch
    assert (result.summary.selection or {})["why"].startswith(result.winner.attempt_id)
    assert not (tmp_path / "runs" / "run1" / "final.diff").exists()  # the judge's to write
    repro = result.summary.reproduction or {}
    assert repro["requested"] == 2 and repro["kept"] == 1  # two equal scripts, kept once
    assert [r["fate"] for r in repro["requests"]] == ["kept (required)", "same as repro_1"]
    # the test-writing calls count: 2 requests of 100 + 10 tokens beside 4 candidates
    tokens = result.summary.tokens
    assert (tokens.prompt, tokens.completion) == (600, 60)
    assert result.summary.models["fake"]["other_requests"] == 2


def test_a_majority_of_samples_decides_between_equals(task: Task, tmp_path: Path) -> None:
    model = Model({1: [edit("    return a + b + 0"), RIGHT, RIGHT_AGAIN, WRONG]})
    result, _ = run(task, model, tmp_path, samples=4)
    assert result.winner is not None and "+ 0" not in result.winner.patch
    assert "produced by 2 sample(s), the most" in (result.summary.selection or {})["why"]
    # each candidate's agreement with the other samples' changed lines is recorded
    assert all(isinstance(e["consensus"], float)
               for e in (result.summary.selection or {})["evidence"])


def test_without_a_pass_the_best_standing_candidate_is_submitted(
    task: Task, tmp_path: Path
) -> None:
    again = edit("def add(a, b):\n    a = a * 1", "def add(a, b):")  # applies on any parent
    model = Model({1: [BREAKS, WRONG], 2: [again]})
    result, _ = run(task, model, tmp_path, samples=2, rounds=2)
    assert result.status == "failed" and result.winner is None
    assert result.submitted is not None and "abs(a - b)" in result.submitted.patch
    assert result.summary.submitted == result.submitted.attempt_id
    selection = result.summary.selection or {}
    assert "no candidate passed every check" in selection["why"]
    # no candidate ever passed the reproduction test: weak evidence, recorded as such
    assert selection["tests"] == {"repro_1": {"ran_on": 2, "passed_by": 0, "weak": True}}


def test_reproduction_failures_are_fed_back_and_no_request_names_a_hidden_test(
    task: Task, tmp_path: Path
) -> None:
    model = Model({1: [WRONG], 2: [edit("    return a + b", "    return abs(a - b)")]})
    result, _ = run(task, model, tmp_path, samples=1, rounds=2)
    assert result.winner is not None and result.winner.round == 2
    fix_requests = [m for m in model.sent if not m[1]["content"].startswith(REPRO_REQUEST_LINE)]
    assert "repro_1 ended with AssertionError" in fix_requests[-1][-1]["content"]


def test_no_script_in_the_answers_leaves_the_loop_to_the_other_checks(
    task: Task, tmp_path: Path
) -> None:
    model = Model({1: [RIGHT]}, tests=["I would rather not."])
    result, verifier = run(task, model, tmp_path, samples=1)
    assert verifier.adopted == [] and result.winner is not None
    assert (result.summary.reproduction or {})["requests"][0]["fate"] == "no script in the answer"


def test_the_issue_probe_goes_to_the_judge_beside_the_written_tests(task: Task,
                                                                    tmp_path: Path) -> None:
    """The probe the run hands the writer (verifiers/issue_probes.py) is judged on the base
    with the model's scripts, kept as a file, and counted apart from them in run.json."""
    probe = ReproTest("probe_issue", "print(1)\n", required=False, probe=True)
    verifier = Verifier()
    log = RunLog(tmp_path / "runs", "run1")
    writer = ReproWriter(task, Model({}), verifier, 1, log.dir / "reproduction", lambda: probe)
    writer.start(Budget(30), time.monotonic() + 30, threading.Event())
    writer.join(10)
    assert [t.name for t in verifier.adopted] == ["repro_1", "probe_issue"]
    assert (log.dir / "reproduction" / "probe_issue.py").read_text() == "print(1)\n"
    summary = writer.summary()
    assert summary["scripts"] == 1 and summary["kept"] == 1 and summary["probe"] is True
    assert [r.get("behaviour") for r in summary["on_base"]] == [None, []]


class Dropping(Verifier):
    """As the loop's verifier ("drop", agent/verify/admit.py): files the policy protects are
    left out and the rest judged."""

    def verify(self, patch: str, *, log_dir: Path | None = None, deadline: float | None = None,
               verdict_only: bool = False, stop: object = None) -> Verdict:
        admitted = admit(patch)
        verdict = super().verify(admitted.patch)
        verdict.dropped, verdict.patch = admitted.dropped, admitted.patch
        return verdict


def test_a_candidate_that_also_edits_a_test_is_judged_and_submitted_without_it(
    task: Task, tmp_path: Path
) -> None:
    """Issue 35: the right fix that also rewrites a test is no longer refused whole: it is
    judged without the test file, submitted as judged, and run.json says what was left out."""
    (task.repo / "tests").mkdir()
    (task.repo / "tests" / "test_calc.py").write_text("def test_add():\n    assert 1\n")
    test_edit = ("tests/test_calc.py\n<<<<<<< SEARCH\n    assert 1\n=======\n    assert 2\n"
                 ">>>>>>> REPLACE\n")
    model = Model({1: [WRONG, RIGHT + test_edit]})
    verifier = Dropping()
    log = RunLog(tmp_path / "runs", "run1")
    writer = ReproWriter(task, model, verifier, 1, log.dir / "reproduction")
    config = LoopOptions(samples=2, rounds=1, time_budget_s=30, select="blind")
    result = Loop(task, model, verifier, log, config, repro=writer).run()
    winner = result.winner
    assert winner is not None and winner.status == "passed"
    assert "a + b" in winner.patch and "tests/" not in winner.patch
    # which sample got which answer is the order their requests came in (generated at once:
    # either on a loaded machine), so the right answer's id is read, not assumed
    right = winner.attempt_id
    (other,) = {"r1c1", "r1c2"} - {right}
    assert list(winner.files) == ["calc.py"]  # a next round starts from what was judged
    assert (log.dir / "attempts" / right / "patch.diff").read_text() == winner.patch
    (dropped,) = result.summary.dropped[right]
    assert list(result.summary.dropped) == [right] and dropped["kind"] == "test_file"
    assert dropped["path"] == "tests/test_calc.py" and "test file" in dropped["reason"]
    selection = result.summary.selection or {}
    assert {e["attempt_id"]: e["dropped"] for e in selection["evidence"]} == {
        other: [], right: ["tests/test_calc.py"]}
    assert "1 test or configuration file(s) were left out" in selection["why"]
    lines = (log.dir / "attempts.jsonl").read_text().splitlines()
    assert sum('"dropped": [{"path": "tests/test_calc.py"' in line for line in lines) == 1

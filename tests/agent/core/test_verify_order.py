"""The order waiting candidates are verified in (agent/core/verify_order.py): an inert change
(one no test can execute) after every other; the loop's candidates with a fake verifier; a
verification under way when the run is decided stops (no verdict)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path

from loop_fakes import RIGHT, WRONG, FakeModel, FakeVerifier, edit, run_loop

from ooda.agent.contracts.errors import VerificationStopped
from ooda.agent.contracts.protocols import Verdict
from ooda.agent.core.verify_order import INERT, LIVE, VerifySlots, name_counts, priority
from ooda.tasks.loader import Task

BASE = {
    "pkg/calc.py": "def add(a, b):\n    return a - b\n",
    "pkg/util.py": "from pkg.calc import add\n\n\ndef total(xs):\n    return add(*xs)\n",
    "tests/test_calc.py": "from pkg.calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
}
HELPER = "\n\ndef _scratch(value):\n    return value * 2\n"


def _priority(changes: dict[str, str], base: Mapping[str, str] = BASE,
              names: Mapping[str, int] | None = None) -> int:
    counts = name_counts_of(base) if names is None else names
    return priority(changes, base.get, lambda: counts)


def name_counts_of(files: Mapping[str, str]) -> Mapping[str, int]:
    counts: dict[str, int] = {}
    for text in files.values():
        for word in set(text.replace("(", " ").replace(")", " ").replace(":", " ").split()):
            counts[word.strip(",.*")] = counts.get(word.strip(",.*"), 0) + 1
    return counts


def test_a_helper_nothing_calls_is_inert_and_a_change_the_tests_reach_is_live() -> None:
    calc = BASE["pkg/calc.py"]
    assert _priority({"pkg/calc.py": calc + HELPER}) == INERT
    assert _priority({"pkg/calc.py": calc.replace("a - b", "a + b")}) == LIVE
    assert _priority({"pkg/calc.py": calc.replace("a - b", "a - b  # fine")}) == INERT
    called = calc.replace("return a - b", "return _scratch(a) - b") + HELPER
    assert _priority({"pkg/calc.py": called}) == LIVE
    assert _priority({"pkg/calc.py": calc + "\n\n@register" + HELPER}) == LIVE
    assert _priority({"pkg/calc.py": calc + HELPER.replace("_scratch", "test_scratch")}) == LIVE
    assert _priority({"pkg/calc.py": calc + HELPER.replace("_scratch", "__getattr__")}) == LIVE
    assert _priority({"pkg/calc.py": calc + "\nX = 1\n"}) == LIVE
    assert _priority({"pkg/calc.py": calc + "def broken(:\n"}) == LIVE
    assert _priority({"setup.cfg": "[x]\n"}) == LIVE
    assert _priority({"pkg/__init__.py": ""}) == LIVE  # a new file: a package now imports
    # a public function is live even where nothing in the repository names it (hidden tests,
    # `import *` and users may); a private one named only in its own definition is dead code
    assert _priority({"pkg/util.py": BASE["pkg/util.py"].replace("*xs", "xs[0], xs[1]")}) == LIVE
    assert _priority({"pkg/calc.py": calc + HELPER.replace("_scratch", "scratch")}) == LIVE
    lonely = {**BASE, "pkg/calc.py": BASE["pkg/calc.py"] + HELPER}
    assert _priority({"pkg/calc.py": lonely["pkg/calc.py"].replace("* 2", "* 3")}, lonely) == INERT
    # named by a file the candidate did not change (an entry point, a caller): live
    named = {**lonely, "setup.cfg": "console_scripts = s = pkg.calc:_scratch\n"}
    assert _priority({"pkg/calc.py": named["pkg/calc.py"].replace("* 2", "* 3")}, named) == LIVE
    # a repository too large to index: nothing is called inert
    assert priority({"pkg/calc.py": calc + HELPER}, BASE.get, lambda: None) == LIVE


def test_name_counts_counts_files_not_occurrences(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("f(f(f))\n")
    (tmp_path / "b.toml").write_text("x = 'f'\n")
    (tmp_path / "c.bin").write_bytes(b"\xff\xfe f")
    counts = name_counts(tmp_path, ["a.py", "b.toml", "c.bin", "missing.py"])
    assert counts is not None and counts["f"] == 2


def test_a_free_slot_goes_to_the_most_promising_waiter_then_the_earliest() -> None:
    slots = VerifySlots(1)
    order: list[str] = []
    started: list[threading.Thread] = []

    def wait_for(name: str, key: int) -> None:
        with slots.slot(key):
            order.append(name)

    with slots.slot():
        for name, key in (("inert", INERT), ("live1", LIVE), ("live2", LIVE)):
            thread = threading.Thread(target=wait_for, args=(name, key))
            thread.start()
            started.append(thread)
            # each is waiting before the next comes (a fixed 0.05 s sleep raced under load)
            deadline = time.monotonic() + 30
            while len(slots._waiting) < len(started) and time.monotonic() < deadline:
                time.sleep(0.005)
            assert len(slots._waiting) == len(started)
    for thread in started:
        thread.join(5)
    assert order == ["live1", "live2", "inert"]


def test_an_inert_candidate_waits_while_a_live_one_is_verified() -> None:
    slots = VerifySlots(2)
    took = threading.Event()

    def inert() -> None:
        with slots.slot(INERT):
            took.set()

    with slots.slot(LIVE):
        thread = threading.Thread(target=inert)
        thread.start()
        assert not took.wait(0.2)  # a slot is free, but a live candidate is being verified
    assert took.wait(5)
    thread.join(5)
    took.clear()
    with slots.generating():  # another candidate is still being generated
        thread = threading.Thread(target=inert)
        thread.start()
        assert not took.wait(0.2)
    assert took.wait(5)
    thread.join(5)
    with slots.slot(INERT), slots.slot(INERT):  # alone, inert ones use every slot
        pass


def test_the_loop_verifies_the_live_candidate_before_the_inert_ones(
    task: Task, tmp_path: Path
) -> None:
    helpers = [edit("    return a - b", f"    return a - b\n\n\ndef _scratch_{i}(v):\n"
                                        f"    return v * {i}") for i in range(5)]
    verifier = FakeVerifier(delay_s=0.1)
    result, lines, _, _ = run_loop(task, FakeModel({1: [*helpers, RIGHT]}), verifier, tmp_path,
                                   samples=6, rounds=1, verify_concurrency=1)
    assert result.status == "passed"
    # whichever came first holds the one sandbox; the right answer is next, whatever its place
    assert verifier.calls <= 2
    assert sum(line["status"] == "cancelled" for line in lines) >= 4


class _UntilDecided(FakeVerifier):
    """A wrong answer's verification runs until the run is decided, then stops."""

    def __init__(self) -> None:
        super().__init__()
        self.stopped = 0
        self.wrong_under_way = threading.Event()

    def verify(self, patch: str, *, log_dir: Path | None = None, deadline: float | None = None,
               verdict_only: bool = False, stop: threading.Event | None = None) -> Verdict:
        if "a + b" in patch:
            # the right answer decides the run only once the wrong one is being verified: on a
            # loaded machine it could otherwise be decided before the wrong one's turn came
            self.wrong_under_way.wait(20)
        else:
            self.wrong_under_way.set()
            assert stop is not None
            if stop.wait(20):
                self.stopped += 1
                raise VerificationStopped()
        return super().verify(patch, verdict_only=verdict_only)


def test_a_verification_under_way_stops_when_another_candidate_decides_the_run(
    task: Task, tmp_path: Path
) -> None:
    verifier = _UntilDecided()
    result, lines, _, _ = run_loop(task, FakeModel({1: [WRONG, RIGHT]}), verifier, tmp_path,
                                   samples=2, rounds=1, verify_concurrency=2)
    assert result.status == "passed" and verifier.stopped == 1
    wrong = next(line for line in lines if line["status"] != "passed")
    winner = next(line["attempt_id"] for line in lines if line["status"] == "passed")
    assert wrong["status"] == "cancelled"  # never "failed": it has no verdict
    assert wrong["reason"] == f"stopped: run decided ({winner} passed) while being verified"

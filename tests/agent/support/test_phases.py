"""agent/support/phases.py: spans from several threads split into phases that add up to the
wall time, the later phase of PHASES winning an overlap; the command's start."""

from __future__ import annotations

import threading
import time

import pytest

from ooda.agent.support import clock, phases
from ooda.agent.support.phases import OTHER, PHASES, Timeline


def test_overlapping_spans_add_up_to_the_wall_time() -> None:
    timeline = Timeline(start=0.0)
    timeline.add("environment", 1.0, 3.0)
    timeline.add("generation", 2.0, 4.0)  # the model client opens while the sandbox starts
    timeline.add("verification", 3.5, 5.0)
    timeline.add("writing", 5.0, 6.0)
    split = timeline.split(end=7.0)
    assert list(split) == [*PHASES, OTHER]
    assert split["environment"] == 2.0  # what the model client's set-up waited for
    assert split["generation"] == 0.5
    assert split["verification"] == 1.5
    assert split["writing"] == 1.0
    assert split[OTHER] == 2.0  # 0-1 and 6-7: nothing recorded
    assert sum(split.values()) == pytest.approx(7.0)


def test_spans_outside_the_wall_time_are_cut_and_a_parent_sees_every_span() -> None:
    evaluation = Timeline(start=0.0)
    task = Timeline(start=2.0, parent=evaluation)
    task.add("base_check", 1.0, 3.0)
    task.add("verification", 2.5, 9.0)
    assert task.split(end=4.0) == {**dict.fromkeys((*PHASES, OTHER), 0.0),
                                   "base_check": 1.0, "verification": 1.0}
    whole = evaluation.split(end=10.0)
    assert whole["base_check"] == 2.0 and whole["verification"] == 6.0
    assert sum(whole.values()) == pytest.approx(10.0)


def test_spans_come_from_any_thread_and_unknown_phases_are_refused() -> None:
    timeline = Timeline()
    def work() -> None:
        with timeline.span("generation"):
            time.sleep(0.01)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    end = time.monotonic()  # (a clock read after split() would race with a preempted test)
    split = timeline.split(end)
    assert split["generation"] > 0
    assert sum(split.values()) == pytest.approx(end - timeline.start, abs=0.001)
    with pytest.raises(ValueError):
        timeline.add("thinking", 0.0, 1.0)


def test_the_command_starts_with_its_process_or_its_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(clock, "_command_start", None)
    age = phases.process_age()
    assert age > 0
    assert phases.command_start() <= time.monotonic() - age + 0.05
    phases.set_command_start(123.0)
    assert phases.command_start() == 123.0

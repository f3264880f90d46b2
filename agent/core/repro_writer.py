"""A blind run's reproduction tests, written by the model while the first candidates are.

`ReproWriter.start` sends `count` reproduction-test requests (agent/core/repro_prompt.py) to the
run's first model at once, beside the first round's candidates: a fast model's answers are
short and come back before the candidates are ready to verify. Each answer's script is taken
(one ```python block), scripts equal up to layout are kept once, and the rest go to the task
verifier (the `ReproJudge` protocol), which runs them on the unpatched code and keeps those
that fail there; every candidate's verification waits for that. The requests' tokens count in
the run's budget and in the model's tokens and cost (`usage`); each answer is kept under
`reproduction/` in the run directory. With them (also when none is asked for) goes the issue's
own examples as a probe (verifiers/issue_probes.py), which needs no model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ooda.agent.contracts.protocols import Model, ReproJudge, ReproOnBase, ReproTest
from ooda.agent.core import repro_prompt
from ooda.agent.core.budget import Budget
from ooda.agent.support.text import one_line
from ooda.tasks.loader import Task

WRITING_SHARE = 0.3
"""The share of the time left that the requests may take (at least MIN_WRITING_S)."""
MIN_WRITING_S = 20.0


@dataclass
class Written:
    """One reproduction-test request and what became of its answer."""

    request_id: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    test: str | None = None
    """The name its script runs under (repro_N), when it gave one that no earlier one did."""
    fate: str = "not sent"
    """What became of it: kept (required | optional), not kept (how it ended on the base),
    same as repro_N, no script in the answer, request failed: ..."""


class ReproWriter:
    """Writes, de-duplicates and hands over one run's reproduction tests."""

    def __init__(self, task: Task, model: Model, judge: ReproJudge, count: int,
                 out_dir: Path | None = None,
                 probe: Callable[[], ReproTest | None] | None = None) -> None:
        """`task`: the run's visible task; `out_dir`: where each answer is kept; `probe`: the
        issue's own examples as a probe, if it has some (verifiers/issue_probes.py)."""
        self.probe = probe
        self._probe_name: str | None = None
        self.task = task
        self.model = model
        self.judge = judge
        self.count = max(0, count)
        self.out_dir = out_dir
        self.written: list[Written] = []
        self.on_base: list[ReproOnBase] = []
        self.seconds = 0.0
        self.failure: str | None = None
        """Why the tests could not be judged on the base (None: they were)."""
        self._thread: threading.Thread | None = None

    def start(self, budget: Budget, deadline: float, stop: threading.Event) -> None:
        """Send the requests in the background; the verifier is handed the tests (possibly
        none) before `deadline`, whatever happens."""
        self._thread = threading.Thread(target=self._run, args=(budget, deadline, stop),
                                        name="ooda-repro", daemon=True)
        self._thread.start()

    def join(self, timeout_s: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self, budget: Budget, deadline: float, stop: threading.Event) -> None:
        started = time.monotonic()
        tests: list[ReproTest] = []
        try:
            left = max(0.0, deadline - started)
            until = min(deadline, started + max(MIN_WRITING_S, WRITING_SHARE * left))
            self.written = [Written(f"t{i + 1}", self.model.name) for i in range(self.count)]
            if self.written:
                with ThreadPoolExecutor(len(self.written), "ooda-repro-ask") as pool:
                    answers = list(pool.map(lambda w: self._ask(w, budget, until, stop),
                                            self.written))
                tests = self._take(answers)
            tests += self._probe()
        finally:  # the verifier waits for this call, even after a failure here
            try:
                self.on_base = self.judge.adopt_reproduction(tests, deadline=deadline)
            except Exception as exc:  # a broken sandbox: the candidates meet it too
                self.failure = one_line(exc, with_type=True)
            self.seconds = time.monotonic() - started
            self._settle()

    def _ask(self, written: Written, budget: Budget, until: float,
             stop: threading.Event) -> str:
        if stop.is_set() or budget.tokens_exhausted():
            written.fate = "not sent: the run was stopping or out of tokens"
            return ""
        started = time.monotonic()
        try:
            completion = self.model.complete(repro_prompt.reproduction_prompt(self.task),
                                             deadline=until)
        except Exception as exc:  # the candidates meet an endpoint that is down themselves
            written.fate = f"request failed: {one_line(exc, with_type=True)}"
            written.seconds = time.monotonic() - started
            return ""
        written.seconds = time.monotonic() - started
        written.prompt_tokens = completion.prompt_tokens
        written.completion_tokens = completion.completion_tokens
        budget.add_tokens(completion.prompt_tokens, completion.completion_tokens)
        self._save(f"{written.request_id}.md", completion.text)
        return completion.text

    def _take(self, answers: list[str]) -> list[ReproTest]:
        """One test per distinct script, named in request order."""
        tests: list[ReproTest] = []
        seen: dict[str, str] = {}
        for written, answer in zip(self.written, answers, strict=True):
            if not answer:
                continue
            source = repro_prompt.parse_reproduction(answer)
            if source is None:
                written.fate = "no script in the answer"
                continue
            key = repro_prompt.script_key(source)
            if key in seen:
                written.fate = f"same as {seen[key]}"
                continue
            name = f"repro_{len(tests) + 1}"
            seen[key] = written.test = name
            tests.append(ReproTest(name, source))
            self._save(f"{name}.py", source)
        return tests

    def _probe(self) -> list[ReproTest]:
        """The issue's own examples as a probe, when it has some."""
        probe = self.probe() if self.probe is not None else None
        if probe is None:
            return []
        self._probe_name = probe.name
        self._save(f"{probe.name}.py", probe.source)
        return [probe]

    def _settle(self) -> None:
        """Each request's fate from the verifier's judgement on the base."""
        by_name = {r.name: r for r in self.on_base}
        for written in self.written:
            result = by_name.get(written.test or "")
            if result is None:
                continue
            if result.kept:
                written.fate = "kept (required)" if result.required else (
                    f"kept (optional: it ended with {result.exception} on the base)")
            else:
                how = f"{result.status}" + (f" ({result.exception})" if result.exception else "")
                written.fate = f"not kept: {how} on the unpatched code"

    def _save(self, name: str, text: str) -> None:
        if self.out_dir is None:
            return
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            (self.out_dir / name).write_text(text, encoding="utf-8", errors="backslashreplace")
        except OSError:
            pass  # the record in run.json says what happened; a lost copy is no failure

    # ------------------------------------------------------------------ records

    def usage(self) -> dict[str, tuple[int, int, int]]:
        """(requests, prompt tokens, completion tokens) per model name."""
        out: dict[str, tuple[int, int, int]] = {}
        for w in self.written:
            if w.fate.startswith("not sent"):
                continue
            calls, prompt, completion = out.get(w.model, (0, 0, 0))
            out[w.model] = (calls + 1, prompt + w.prompt_tokens, completion + w.completion_tokens)
        return out

    def summary(self) -> dict[str, Any]:
        """run.json's `reproduction`: the requests, the tests kept, their tokens and time."""
        kept = [r for r in self.on_base if r.kept and r.name != self._probe_name]
        return {
            "requested": self.count,
            "scripts": sum(1 for r in self.on_base if r.name != self._probe_name),
            "probe": any(r.kept for r in self.on_base if r.name == self._probe_name),
            "kept": len(kept),
            "required": sum(1 for r in kept if r.required),
            "seconds": round(self.seconds, 3),
            **({"failure": self.failure} if self.failure else {}),
            "prompt_tokens": sum(w.prompt_tokens for w in self.written),
            "completion_tokens": sum(w.completion_tokens for w in self.written),
            "requests": [
                {"request_id": w.request_id, "model": w.model, "test": w.test, "fate": w.fate,
                 "prompt_tokens": w.prompt_tokens, "completion_tokens": w.completion_tokens,
                 "seconds": round(w.seconds, 3)}
                for w in self.written
            ],
            "on_base": [
                {"test": r.name, "status": r.status, "exception": r.exception, "kept": r.kept,
                 "required": r.required, **({"behaviour": list(r.behaviour)}
                                            if r.name == self._probe_name else {})}
                for r in self.on_base
            ],
        }

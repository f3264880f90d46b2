"""A model's judgement of a blind run's finalists: the candidates its checks could not tell
apart (agent/core/blind_select.py asks only then, and only where a model is configured).

The model sees the issue and the finalists' diffs, labelled A, B, ... — never a test, a
verdict or which sample wrote what — and scores each from 0 to 10 for how likely it resolves
the issue completely without breaking anything else (a listwise critic, as R2E-Gym's hybrid
verifier pairs execution with a model's judgement). It is asked `requests` times, each time
with the finalists in another order (sample order, then reversed, then rotated), and the
scores averaged, so that a position the model favours favours no candidate. Every request's
tokens count in the run's budget and are recorded. An answer counts only when it scores every
candidate shown on the scale asked (0 to 10): one that names some and skips others, or scores
off the scale, is recorded as a failure and left out whole (a small model's answer often names
one candidate only, which would otherwise rank it above every other); a failed request too.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from ooda.agent.contracts.protocols import CRITIC_REQUEST_LINE, Model
from ooda.agent.core.budget import Budget
from ooda.agent.core.records import Attempt
from ooda.agent.support.text import one_line
from ooda.tasks.loader import Task

SYSTEM = """\
You review candidate patches for an issue reported against a Python repository. You cannot \
run anything. For each candidate, judge how likely it is to resolve the issue completely and \
correctly without breaking other behaviour: read the issue closely, check that the change \
handles every case it describes, and prefer a fix at the root cause to a symptom patch."""

ASK = """\
# Answer
Think briefly, then end your answer with one line per candidate, exactly in this form:
Candidate A: <score from 0 to 10>"""

MAX_FINALISTS = 5
"""Candidates shown at most (the best standing ones by the checks)."""
PATCH_CHARS = 6000
"""A diff longer than this is cut (the model is told so)."""
_SCORE = re.compile(r"Candidate\s+([A-Z])\s*[:=-]\s*(\d+(?:\.\d+)?)", re.IGNORECASE)


@dataclass
class CriticReport:
    """What the critic did (run.json `selection.critic`)."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)
    """attempt id -> mean score over the requests that scored it."""
    failures: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "seconds": round(self.seconds, 3),
                "scores": {k: round(v, 3) for k, v in self.scores.items()},
                **({"failures": self.failures} if self.failures else {})}


def labels(count: int) -> list[str]:
    return [chr(ord("A") + i) for i in range(count)]


def critic_prompt(task: Task, patches: list[str]) -> list[dict[str, str]]:
    """The messages asking the model to score `patches` (labelled A, B, ... in this order)."""
    parts = [CRITIC_REQUEST_LINE, f"Task id: {task.id}", "", "# Issue", task.statement.strip(),
             "", "# Candidates"]
    for label, patch in zip(labels(len(patches)), patches, strict=True):
        shown = patch if len(patch) <= PATCH_CHARS else \
            patch[:PATCH_CHARS] + "\n[... the rest of this diff is cut ...]\n"
        parts += [f"## Candidate {label}", "```diff", shown.rstrip("\n"), "```", ""]
    parts.append(ASK)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts)}]


def parse_scores(answer: str, count: int) -> dict[str, float]:
    """label -> score (0-10) from an answer: the last score given for each label shown (a
    score off the scale is none)."""
    shown = set(labels(count))
    found: dict[str, float] = {}
    for match in _SCORE.finditer(answer):
        label = match.group(1).upper()
        if label in shown:
            score = float(match.group(2))
            if score <= 10.0:
                found[label] = score
            else:
                found.pop(label, None)
    return found


def orders(count: int, requests: int) -> list[list[int]]:
    """The finalists' order in each request: as given, reversed, then rotations."""
    out: list[list[int]] = []
    base = list(range(count))
    candidates = [base, base[::-1]] + [base[i:] + base[:i] for i in range(1, count)]
    for order in candidates:
        if len(out) >= requests:
            break
        if order not in out:
            out.append(order)
    return out


class Critic:
    """Scores a blind run's finalists with `model` (see the module docstring)."""

    def __init__(self, task: Task, model: Model, budget: Budget, requests: int = 2) -> None:
        self.task = task
        self.model = model
        self.budget = budget
        self.requests = max(0, requests)
        self.report = CriticReport()

    def __call__(self, finalists: list[Attempt], deadline: float) -> dict[str, float]:
        """attempt id -> score for the finalists (at most MAX_FINALISTS, in the order given)."""
        finalists = finalists[:MAX_FINALISTS]
        started = time.monotonic()
        sums: dict[str, list[float]] = {}
        for order in orders(len(finalists), self.requests):
            if self.budget.tokens_exhausted() or time.monotonic() >= deadline:
                self.report.failures.append("not sent: out of time or tokens")
                break
            shown = [finalists[i] for i in order]
            try:
                completion = self.model.complete(
                    critic_prompt(self.task, [a.patch for a in shown]), deadline=deadline)
            except Exception as exc:  # the selection goes on without the model's word
                self.report.failures.append(one_line(exc, with_type=True))
                continue
            self.report.requests += 1
            self.report.prompt_tokens += completion.prompt_tokens
            self.report.completion_tokens += completion.completion_tokens
            self.budget.add_tokens(completion.prompt_tokens, completion.completion_tokens)
            scored = parse_scores(completion.text, len(shown))
            if len(scored) < len(shown):
                self.report.failures.append(
                    f"answer scored {len(scored)} of {len(shown)} candidates on the scale: left out")
                continue
            for label, attempt in zip(labels(len(shown)), shown, strict=True):
                sums.setdefault(attempt.attempt_id, []).append(scored[label])
        self.report.seconds += time.monotonic() - started
        self.report.scores = {k: sum(v) / len(v) for k, v in sums.items()}
        return dict(self.report.scores)

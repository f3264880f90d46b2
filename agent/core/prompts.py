"""Prompt text: the first message for a task, and the feedback message for a failed attempt."""

from __future__ import annotations

from collections.abc import Callable

from ooda.agent.context import Context, choose_context, votes
from ooda.agent.context.choose import Refine
from ooda.agent.context.index import RepoIndex
from ooda.agent.context.rank import Ranking
from ooda.agent.context.tokens import estimate
from ooda.agent.context.visible import visible_tests
from ooda.agent.context.votes import Votes
from ooda.agent.contracts.options import LoopOptions
from ooda.agent.contracts.protocols import KnowsWindow, Model
from ooda.agent.edits import formats
from ooda.tasks.loader import Task


def system_prompt() -> str:
    """Asks for the formats agent/edits/formats.py marks `asked`, in its order (SEARCH/REPLACE
    blocks first: the cheapest format to generate); each format's teaching text lives beside
    its parser in agent/edits/. Whole files and bare definitions are accepted too
    (docs/EDIT_FORMATS.md) but not asked for: they cost more tokens."""
    return f"""\
You are an expert software engineer fixing a bug in a Python repository.
{formats.teaching()}
Do not edit tests, conftest.py or tool configuration: such edits are rejected.
Think briefly, then give the edits."""

FRAME_TOKENS = 120
"""Tokens of the code section's heading and note, on top of the files' own."""
PARTIAL_NOTE = (
    "Large files are shown in part: a line `# ... lines A-B not shown ...` stands for lines "
    "you were not shown. Edit only lines you were shown; to keep elided lines, keep their "
    "marker line as it is."
)


def first_prompt(task: Task, context: Context | None = None, *, told: str = "",
                 context_tokens: int = LoopOptions().context_tokens) -> list[dict[str, str]]:
    """The system and user messages that start a candidate from scratch: the issue, the code
    `context` shows (agent/context; when not given, chosen so that the whole prompt stays
    within `context_tokens`), the tests the model may see; `told`: what earlier candidates
    did and how they failed (agent/core/schedule.digest), shown before the ask."""
    if context is None:
        context = context_for(task, context_tokens, told=told)
    return _messages(task, context, told)


ANSWER_ROOM = 4096
"""Tokens of the model's window the first prompt leaves for an answer (at most a quarter)."""
WINDOW_SHARE = 0.85
"""The context counts ~3.5 characters a token; a window is filled as if ~3 (agent/models)."""


def window_budget(context_tokens: int, model: object) -> int:
    """`context_tokens`, lowered to fit `model`'s window when it is known: the window less
    room for an answer, in the context's own (less cautious) token count."""
    window = model.context_window() if isinstance(model, KnowsWindow) else None
    budget = context_tokens
    if window:
        answer = min(ANSWER_ROOM, window // 4)
        budget = min(budget, int((window - answer) * WINDOW_SHARE))
    return max(1, budget)


def first_context(task: Task, context_tokens: int, model: Model | None, samples: int,
                  deadline: float, heard: Callable[[Votes], None] | None = None) -> Context:
    """The code a run's first prompt shows, as a run chooses it and `ooda prompt` shows it:
    within `context_tokens` lowered to the model's window, the fast model (`samples`
    requests; none: 0 or no model) voting on the ranking of a repository too large to show
    whole; `heard`: told what the votes said and cost."""

    def voted(index: RepoIndex, ranking: Ranking) -> Ranking:
        assert model is not None
        found = votes.ask(model, task.id, task.statement, index, ranking, samples, deadline)
        if heard is not None:
            heard(found)
        return votes.merged(ranking, found)

    refine = voted if model is not None and samples > 0 else None
    return context_for(task, window_budget(context_tokens, model), refine=refine)


def context_for(task: Task, context_tokens: int, *, told: str = "",
                refine: Refine | None = None) -> Context:
    """The code the first prompt shows: what fits in `context_tokens` once the rest of the
    prompt (instructions, issue, tests) is counted; `refine`: a second opinion on the ranking
    (the fast model's votes)."""
    rest = sum(estimate(m["content"]) for m in _messages(task, Context(), told))
    return choose_context(task, max(0, context_tokens - rest - FRAME_TOKENS), refine=refine)


def _messages(task: Task, context: Context, told: str) -> list[dict[str, str]]:
    parts = [f"Task id: {task.id}", "", "# Issue", task.statement.strip(), ""]
    if context.files:
        parts += ["# Relevant code (current contents)", ""]
        if any(not f.whole for f in context.files):
            parts += [PARTIAL_NOTE, ""]
        parts += [f"{f.path}\n```python\n{f.text}\n```" for f in context.files]
        parts.append("")
    tests = visible_tests(task) or ([task.test_cmd] if task.test_cmd else [])
    if tests:
        parts += ["# Tests that must pass after your change", *[f"- {t}" for t in tests], ""]
    if told:
        parts += ["# Earlier attempts", told, ""]
    parts.append("Fix the issue with SEARCH/REPLACE blocks.")
    return [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": "\n".join(parts)},
    ]


def feedback_prompt(
    status: str, reason: str, summary: str, patch: str, siblings: list[str] | None = None
) -> str:
    """The user message that follows a failed attempt's answer in a next-round conversation."""
    lines = [f"Your previous answer did not solve the task ({status}): {reason}"]
    if status == "invalid_edit":
        lines.append("None of its edits were applied: the files are as they were before it.")
    else:
        lines += [
            "Its edits are applied now; further edits apply on top of them. The change so far:",
            f"```diff\n{patch.strip()}\n```",
        ]
    if summary.strip():
        lines += ["", "What failed:", summary.strip()]
    if siblings:
        lines += ["", "Other attempts failed like this:", *[f"- {s}" for s in siblings]]
    lines += ["", "Fix it. Answer with SEARCH/REPLACE blocks against the current files."]
    return "\n".join(lines)

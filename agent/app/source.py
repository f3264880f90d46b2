"""Open the candidate source a run's `--model` names: a source of agent/core/sources/ for its
task, or an endpoint's model (agent/models) asked through the LLM source. `ooda run`, `ooda eval`
and the Ray node open theirs here."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.options import ModelOptions
from ooda.agent.core.sources import CandidateSource, LLMSource, source_kind
from ooda.agent.models import open_model
from ooda.tasks.loader import Task


@contextlib.contextmanager
def open_source(options: ModelOptions, task: Task | None, *, api_key: str | None = None,
                replays: Sequence[Path] = ()) -> Iterator[CandidateSource]:
    """The source `options.name` stands for, open for the `with` block. `task`: the task it
    answers (None: one source for many tasks, which only an endpoint's model can be); the
    other arguments are `open_model`'s."""
    kind = source_kind(options.name)
    if kind.open is None:
        with open_model(options, task, api_key=api_key, replays=replays) as model:
            yield LLMSource(model)
        return
    if task is None:
        raise UsageError(f"--model {kind.name} answers one task at a time: open it with its task")
    yield kind.open(task)

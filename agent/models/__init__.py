"""The models a run can use, by name, and the one way to open one: `open_model(spec, task)`.

`MODELS` maps a name to its factory: "gold" answers with the task's reference patch,
"replay" starts the bundled endpoint (agent/models/server.py) over the tasks' scripted
answers for as long as the model is open (with a base URL, "replay" is the model of the
endpoint there, e.g. an `ooda serve` started apart), and "openai" (every other name) is a model on an
OpenAI-compatible endpoint, checked reachable before use. `ooda run`, `ooda eval` and
`ooda ci` all open their model here.

The factories import their implementation when called: the client and the bundled server
cost 55 and 80 ms to import (`python -X importtime`), which a run of "gold" need not pay.
Models sit below tasks, so a task is seen through `TaskAnswers` (ooda.tasks.loader.Task fits).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ooda.agent.contracts.defaults import DEFAULTS
from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.protocols import Model
from ooda.agent.models.endpoint import DEFAULT_BASE_URL
from ooda.agent.models.gold import GoldModel


@dataclass(frozen=True)
class ModelSpec:
    """Which model a run uses and how to sample from it."""

    name: str
    """"gold", "replay", or the model name sent to the endpoint."""
    base_url: str | None = None
    """The endpoint (…/v1); None: $OPENAI_BASE_URL, else the OpenAI API."""
    api_key: str | None = None
    """None: $OPENAI_API_KEY, else a fixed key for a loopback endpoint."""
    temperature: float = DEFAULTS.temperature
    concurrency: int = DEFAULTS.concurrency
    """Requests in flight at once through the model."""
    replay_tokens_per_s: float = 0.0
    """"replay" only: simulated generation speed (0 = instant)."""
    max_tokens: int | None = DEFAULTS.max_tokens
    """Completion tokens one answer may take (fitted to the context window)."""
    context_window: int | None = None
    """The model's context window in tokens; None: learned from the endpoint."""
    request_timeout_s: float | None = None
    """Longest time one request may take; None: only the deadline."""


class TaskAnswers(Protocol):
    """What the stand-in models read of a task."""

    @property
    def id(self) -> str: ...

    @property
    def gold_patch(self) -> str | None: ...

    @property
    def replay(self) -> Path | None: ...


ModelFactory = Callable[
    [ModelSpec, TaskAnswers | None, Sequence[Path]], AbstractContextManager[Model]
]
"""(spec, the task or None when the model serves many, replay scripts) -> the open model."""


@contextlib.contextmanager
def _gold(spec: ModelSpec, task: TaskAnswers | None, replays: Sequence[Path]) -> Iterator[Model]:
    if task is None:
        raise UsageError("--model gold answers one task at a time: open it with its task")
    yield GoldModel(task.gold_patch, task.id)


@contextlib.contextmanager
def _replay(
    spec: ModelSpec, task: TaskAnswers | None, replays: Sequence[Path]
) -> Iterator[Model]:
    from ooda.agent.models.openai_model import LOCAL_API_KEY, ModelConfig, OpenAIModel
    from ooda.agent.models.server import ReplayServer

    scripts = list(replays)
    if task is not None and not scripts:
        if task.replay is None:
            raise UsageError(f"--model replay: task {task.id} ships no replay.jsonl")
        scripts = [task.replay]
    with ReplayServer(scripts, tokens_per_s=spec.replay_tokens_per_s) as server:
        config = ModelConfig(
            name="replay",
            base_url=server.start(),
            api_key=LOCAL_API_KEY,
            temperature=spec.temperature,
            concurrency=spec.concurrency,
            max_tokens=spec.max_tokens,
            context_window=spec.context_window,
            request_timeout_s=spec.request_timeout_s,
        )
        yield OpenAIModel(config)


@contextlib.contextmanager
def _openai(
    spec: ModelSpec, task: TaskAnswers | None, replays: Sequence[Path]
) -> Iterator[Model]:
    from ooda.agent.models.openai_model import ModelConfig, OpenAIModel

    config = ModelConfig(
        name=spec.name,
        base_url=spec.base_url,
        api_key=spec.api_key,
        temperature=spec.temperature,
        concurrency=spec.concurrency,
        max_tokens=spec.max_tokens,
        context_window=spec.context_window,
        request_timeout_s=spec.request_timeout_s,
    )
    model = OpenAIModel(config)
    model.check_reachable()
    yield model


def endpoint_of(name: str | None, base_url: str | None) -> str | None:
    """Where a model of this name is served, as a run records it: the URL given, else
    $OPENAI_BASE_URL, else OpenAI's API; None for the stand-ins ("gold", and "replay", whose
    bundled endpoint lives only as long as the run)."""
    if name in (None, "gold", "replay"):
        return None
    return base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL


MODELS: dict[str, ModelFactory] = {"gold": _gold, "replay": _replay, "openai": _openai}
"""Model name -> factory; a name not listed is an endpoint's model ("openai")."""


def open_model(
    spec: ModelSpec, task: TaskAnswers | None = None, *, replays: Sequence[Path] = ()
) -> AbstractContextManager[Model]:
    """The model `spec` names, open for the duration of the `with` block.

    `task`: the task it answers (needed by "gold"; "replay" serves its replay.jsonl). For one
    model over many tasks pass `task=None` and, for "replay", every task's script in
    `replays`."""
    factory: ModelFactory = MODELS.get(spec.name, _openai)
    if spec.name == "replay" and spec.base_url:
        factory = _openai  # "replay" served apart (`ooda serve --replay ...`) at that URL
    return factory(spec, task, replays)

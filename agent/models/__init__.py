"""The models a run can use, by name, and the one way to open one: `open_model(options, task)`.

`MODELS` maps a name to its factory: "replay" starts the bundled endpoint (agent/models/server.py) over the tasks' scripted
answers for as long as the model is open (with a base URL, "replay" is the model of the
endpoint there, e.g. an `ooda serve` started apart), and "openai" (every other name) is a model on an
OpenAI-compatible endpoint, checked reachable before use. `ooda run`, `ooda eval` and
`ooda ci` all open their model here.

The factories import their implementation when called: the client and the bundled server
cost 55 and 80 ms to import (`python -X importtime`), which a run of another candidate source
(agent/core/sources: `--model gold`) need not pay. Models sit below tasks, so a task is seen
through `TaskAnswers` (ooda.tasks.loader.Task fits).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.options import ModelOptions
from ooda.agent.contracts.protocols import Model
from ooda.agent.models.endpoint import DEFAULT_BASE_URL


class TaskAnswers(Protocol):
    """What the stand-in models read of a task."""

    @property
    def id(self) -> str: ...

    @property
    def replay(self) -> Path | None: ...


ModelFactory = Callable[
    [ModelOptions, str | None, TaskAnswers | None, Sequence[Path]],
    AbstractContextManager[Model],
]
"""(options, API key, the task or None when the model serves many, replay scripts) -> the
open model."""


@contextlib.contextmanager
def _replay(
    options: ModelOptions, api_key: str | None, task: TaskAnswers | None,
    replays: Sequence[Path],
) -> Iterator[Model]:
    from ooda.agent.models.openai_model import LOCAL_API_KEY, ModelConfig, OpenAIModel
    from ooda.agent.models.server import ReplayServer

    scripts = list(replays)
    if task is not None and not scripts:
        if task.replay is None:
            raise UsageError(f"--model replay: task {task.id} ships no replay.jsonl")
        scripts = [task.replay]
    with ReplayServer(scripts, tokens_per_s=options.replay_tokens_per_s) as server:
        config = ModelConfig.from_options(options, name="replay", base_url=server.start(),
                                          api_key=LOCAL_API_KEY)
        yield OpenAIModel(config)


@contextlib.contextmanager
def _openai(
    options: ModelOptions, api_key: str | None, task: TaskAnswers | None,
    replays: Sequence[Path],
) -> Iterator[Model]:
    from ooda.agent.models.openai_model import ModelConfig, OpenAIModel

    model = OpenAIModel(ModelConfig.from_options(options, api_key=api_key))
    model.check_reachable()
    yield model


def endpoint_of(name: str | None, base_url: str | None) -> str | None:
    """Where a model of this name is served, as a run records it: the URL given, else
    $OPENAI_BASE_URL, else OpenAI's API; None for "replay" (whose bundled endpoint lives only
    as long as the run)."""
    if name in (None, "replay"):
        return None
    return base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL


MODELS: dict[str, ModelFactory] = {"replay": _replay, "openai": _openai}
"""Model name -> factory; a name not listed is an endpoint's model ("openai")."""


def open_model(
    options: ModelOptions, task: TaskAnswers | None = None, *, api_key: str | None = None,
    replays: Sequence[Path] = (),
) -> AbstractContextManager[Model]:
    """The model `options` name (agent/contracts/options.py), open for the duration of the
    `with` block.

    `task`: the task it answers ("replay" serves its replay.jsonl). For one
    model over many tasks pass `task=None` and, for "replay", every task's script in
    `replays`. `api_key`: None for $OPENAI_API_KEY (or a loopback endpoint's fixed key)."""
    factory: ModelFactory = MODELS.get(options.name, _openai)
    if options.name == "replay" and options.base_url:
        factory = _openai  # "replay" served apart (`ooda serve --replay ...`) at that URL
    return factory(options, api_key, task, replays)

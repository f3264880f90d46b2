"""The model registry (ooda.agent.models.open_model): each name opens the model it stands for,
over real HTTP for "replay" and an endpoint; `--model gold` opens the gold candidate source
(ooda.agent.app.source.open_source); bad input is one UsageError line."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ooda.agent.app.source import open_source
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.options import ModelOptions
from ooda.agent.core.sources.patch import PatchSource
from ooda.agent.models import MODELS, open_model
from ooda.agent.models.server import ReplayServer

PATCH = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
MESSAGES = [{"role": "user", "content": "Task id: t\nfix it"}]


@dataclass
class FakeTask:
    id: str = "t"
    gold_patch: str | None = PATCH
    replay: Path | None = None


def script(tmp_path: Path, task_id: str, answer: str) -> Path:
    path = tmp_path / task_id / "replay.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"answer": answer, "task": task_id}) + "\n")
    return path


def ask(options: ModelOptions, task: FakeTask | None, replays: tuple[Path, ...] = (),
        api_key: str | None = None) -> str:
    with open_model(options, task, replays=replays, api_key=api_key) as model:
        return model.complete(MESSAGES, deadline=time.monotonic() + 10).text


def test_the_registry_names_replay_and_openai() -> None:
    assert set(MODELS) == {"replay", "openai"}  # gold is a candidate source (agent/core/sources)


def test_gold_answers_with_the_tasks_patch() -> None:
    with open_source(ModelOptions("gold"), FakeTask()) as source:  # type: ignore[arg-type]
        assert isinstance(source, PatchSource) and PATCH.rstrip() in source.answer


def test_gold_needs_a_task_and_its_patch() -> None:
    with pytest.raises(UsageError, match="one task at a time"), \
            open_source(ModelOptions("gold"), None):
        pass
    with pytest.raises(UsageError, match="no gold_patch"), \
            open_source(ModelOptions("gold"), FakeTask(gold_patch=None)):  # type: ignore[arg-type]
        pass


def test_replay_serves_the_tasks_script_and_then_stops(tmp_path: Path) -> None:
    task = FakeTask(replay=script(tmp_path, "t", "scripted"))
    with open_model(ModelOptions("replay"), task) as model:
        assert model.complete(MESSAGES, deadline=time.monotonic() + 10).text == "scripted"
        base_url = model.base_url  # type: ignore[attr-defined]
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as sock, pytest.raises(OSError):
        sock.connect(("127.0.0.1", port))  # the bundled endpoint is gone with the model


def test_replay_over_many_tasks_takes_their_scripts(tmp_path: Path) -> None:
    assert ask(ModelOptions("replay"), None, replays=(script(tmp_path, "t", "many"),)) == "many"


def test_replay_without_a_script_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="ships no replay.jsonl"):
        ask(ModelOptions("replay"), FakeTask())


def test_any_other_name_is_an_endpoints_model(tmp_path: Path) -> None:
    with ReplayServer([script(tmp_path, "t", "from the endpoint")]) as server:
        options = ModelOptions("some-model", base_url=server.start())
        assert ask(options, None, api_key="k") == "from the endpoint"


def test_an_unreachable_endpoint_fails_when_opened() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    options = ModelOptions("m", base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(InfraError, match="unreachable"), open_model(options, api_key="k"):
        pass

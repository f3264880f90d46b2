"""The bundled endpoint serving two models: each its own scripts, token rate and listed price."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.agent.models.openai_model import ModelConfig, OpenAIModel
from ooda.agent.models.server import ReplayServer, ServedModel, parse_served

MESSAGES = [{"role": "user", "content": "Task id: t\nfix it"}]


def test_two_models_answer_from_their_own_scripts(tmp_path: Path) -> None:
    replay = tmp_path / "replay.jsonl"
    replay.write_text(
        json.dumps({"task": "t", "model": "fast", "answer": "fast " * 40}) + "\n"
        + json.dumps({"task": "t", "model": "strong", "answer": "strong " * 40}) + "\n"
        + json.dumps({"task": "t", "answer": "anyone"}) + "\n"
    )
    served = [ServedModel("fast", 0.0, 0.1, 0.4), ServedModel("strong", 200.0, 3.0, 15.0)]
    with ReplayServer([replay], served=served) as server:
        listing = json.load(urllib.request.urlopen(server.base_url + "/models"))
        by_id = {m["id"]: m for m in listing["data"]}
        assert by_id["strong"]["pricing"] == {"prompt": 3.0, "completion": 15.0}
        assert (by_id["fast"]["tokens_per_s"], by_id["strong"]["tokens_per_s"]) == (0.0, 200.0)

        def ask(name: str) -> str:
            model = OpenAIModel(ModelConfig(name=name, base_url=server.base_url, api_key="k"))
            return model.complete(MESSAGES, deadline=time.monotonic() + 30).text

        fast_texts = {ask("fast").split()[0] for _ in range(2)}
        strong_text = ask("strong")
    assert fast_texts == {"fast", "anyone"}  # its own line and the line for any model
    assert strong_text.startswith("strong")


def test_served_model_specs() -> None:
    assert parse_served("fast:2000:0.1:0.4") == ServedModel("fast", 2000.0, 0.1, 0.4)
    assert parse_served("m") == ServedModel("m")
    for bad in ("m:1:2", ":5", "m:x", "m:-1"):
        with pytest.raises(UsageError):
            parse_served(bad)


def test_reproduction_requests_get_their_own_answers_and_every_request_is_logged(
    tmp_path: Path,
) -> None:
    from ooda.agent.contracts.protocols import REPRO_REQUEST_LINE

    replay = tmp_path / "replay.jsonl"
    replay.write_text(json.dumps({"task": "t", "answer": "the fix"}) + "\n"
                      + json.dumps({"task": "t", "kind": "reproduction", "answer": "a test"})
                      + "\n")
    log = tmp_path / "requests.jsonl"
    with ReplayServer([replay], request_log=log) as server:
        model = OpenAIModel(ModelConfig(name="m", base_url=server.base_url, api_key="k"))

        def ask(text: str) -> str:
            messages = [{"role": "user", "content": text}]
            return model.complete(messages, deadline=time.monotonic() + 30).text

        answers = [ask("Task id: t\nfix it"), ask(f"{REPRO_REQUEST_LINE}\nTask id: t\nwrite"),
                   ask("Task id: t\nfix it")]
    assert answers == ["the fix", "a test", "the fix"]
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [entry["messages"][0]["content"].splitlines()[-1] for entry in logged] == [
        "fix it", "write", "fix it"]
    assert {entry["model"] for entry in logged} == {"m"}
    bad = tmp_path / "bad" / "replay.jsonl"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"task": "t", "kind": "tests", "answer": "x"}) + "\n")
    with pytest.raises(UsageError, match='"kind"'):
        ReplayServer([bad])

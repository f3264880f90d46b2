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

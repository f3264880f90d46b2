"""The replay endpoint, over real HTTP: scripts, wire format, pacing, concurrency, faults."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai  # at collection: no test's deadline pays for its import
import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.agent.models.openai_model import ModelConfig, OpenAIModel
from ooda.agent.models.server import ReplayServer, ServedModel, load_scripts


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture()
def scripts(tmp_path: Path) -> Path:
    """tasks/gcd (id from task.toml), tasks/plain (id from the dir name), one task field."""
    gcd = tmp_path / "tasks" / "gcd-dir"
    gcd.mkdir(parents=True)
    (gcd / "task.toml").write_text('id = "gcd"\nstatement = "x"\n')
    write_jsonl(
        gcd / "replay.jsonl",
        [
            {"answer": "first answer"},
            {"answer": "second answer"},
            {"answer": "round two answer", "round": 2},
            {"answer": "answer about ruff", "round": 2, "contains": "ruff"},
        ],
    )
    write_jsonl(tmp_path / "tasks" / "plain" / "replay.jsonl", [{"answer": "plain answer"}])
    write_jsonl(
        tmp_path / "tasks" / "plain" / "sub" / "replay.jsonl",
        [{"answer": "named answer", "task": "named"}],
    )
    return tmp_path / "tasks"


def ask(model: OpenAIModel, task: str, *users: str, timeout: float = 60.0) -> str:
    messages = [{"role": "system", "content": f"You fix bugs.\nTask id: {task}\n"}]
    for k, text in enumerate(users):
        if k:
            messages.append({"role": "assistant", "content": "an earlier answer"})
        messages.append({"role": "user", "content": text})
    return model.complete(messages, deadline=time.monotonic() + timeout).text


def model_for(server: ReplayServer, **options: Any) -> OpenAIModel:
    return OpenAIModel(
        ModelConfig(name="replay", base_url=server.base_url, retry_backoff_s=0.02, **options)
    )


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


# --------------------------------------------------------------------------- scripts


def test_load_scripts_task_ids(scripts: Path) -> None:
    by_task = load_scripts([scripts])
    assert sorted(by_task) == ["gcd", "named", "plain"]
    assert [s.answer for s in by_task["gcd"]][:2] == ["first answer", "second answer"]
    assert by_task["gcd"][3].round == 2 and by_task["gcd"][3].contains == "ruff"
    single = load_scripts([scripts / "plain" / "replay.jsonl"])
    assert list(single) == ["plain"]


def test_load_scripts_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        load_scripts([tmp_path / "missing"])
    bad = tmp_path / "t" / "replay.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"answer": "ok"}\nnot json\n')
    with pytest.raises(UsageError, match=r"replay.jsonl:2: not valid JSON"):
        load_scripts([bad])
    bad.write_text('{"text": "no answer"}\n')
    with pytest.raises(UsageError, match='"answer"'):
        load_scripts([bad])
    with pytest.raises(UsageError, match="unknown fault"):
        ReplayServer([], faults=["explode"])


# --------------------------------------------------------------------------- replay


def test_replay_by_round_contains_and_cycling(scripts: Path) -> None:
    with ReplayServer([scripts]) as server:
        model = model_for(server)
        assert [ask(model, "gcd", "fix it") for _ in range(3)] == [
            "first answer",
            "second answer",
            "first answer",
        ]
        assert ask(model, "gcd", "fix it", "tests still fail") == "round two answer"
        assert ask(model, "gcd", "fix it", "ruff says E501") == "answer about ruff"
        assert ask(model, "plain", "go") == "plain answer"
        assert ask(model, "named", "go") == "named answer"
        # 27.6: a task no script answers is the endpoint's error (404), never a model answer
        with pytest.raises(UsageError, match=r"HTTP 404 .*no scripted answer for task 'other':"
                           r" the scripts served here are for gcd, named, plain"):
            ask(model, "other", "go")
        assert server.stats["status"]["404"] == 1
        # a prompt of no task (a probe, as `ooda doctor` sends) gets a plain answer
        no_id = model.complete(
            [{"role": "user", "content": "hi"}], deadline=time.monotonic() + 60
        ).text
        assert "no 'Task id: <id>' line" in no_id


def test_models_and_stats_endpoints(scripts: Path) -> None:
    with ReplayServer([scripts], models=["replay", "other"]) as server:
        models = get_json(server.base_url + "/models")
        assert [m["id"] for m in models["data"]] == ["replay", "other"]
        ask(model_for(server), "gcd", "x")
        stats = get_json(server.base_url.removesuffix("/v1") + "/stats")
        assert stats["chat_requests"] == 1 and stats["status"] == {"200": 2}
        assert server.stats["status"] == {"200": 3}  # the /stats answer counted too


def test_wire_format_streaming_and_plain(scripts: Path) -> None:
    with ReplayServer([scripts]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        messages: Any = [{"role": "user", "content": "Task id: plain\ngo"}]
        chunks = list(
            client.chat.completions.create(
                model="replay",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        assert chunks[0].choices[0].delta.role == "assistant"
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
            "plain answer"
        )
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        assert chunks[-1].usage.completion_tokens == 3  # "plain answer" = 12 chars
        without_usage = list(
            client.chat.completions.create(model="replay", messages=messages, stream=True)
        )
        assert all(c.usage is None for c in without_usage)

        plain = client.chat.completions.create(model="replay", messages=messages)
        assert plain.choices[0].message.content == "plain answer"
        assert plain.choices[0].finish_reason == "stop"
        assert plain.usage is not None and plain.usage.completion_tokens == 3

        short = client.chat.completions.create(model="replay", messages=messages, max_tokens=2)
        assert short.choices[0].message.content == "plain an"
        assert short.choices[0].finish_reason == "length"


def test_token_rate_and_ttft_are_honoured(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "t" / "replay.jsonl", [{"answer": "x" * 400}])  # 100 tokens
    with ReplayServer([tmp_path], tokens_per_s=500, ttft_s=0.3) as server:
        model = model_for(server)
        model.check_reachable()
        start = time.monotonic()
        done = model.complete(
            [{"role": "user", "content": "Task id: t"}], deadline=time.monotonic() + 10
        )
    assert done.text == "x" * 400 and done.completion_tokens == 100
    assert done.t_first_token is not None and done.t_done is not None
    ttft = done.t_first_token - start
    streaming = done.t_done - done.t_first_token
    assert 0.28 <= ttft <= 0.9, ttft
    assert 0.17 <= streaming <= 0.8, streaming  # 99 tokens after the first at 500/s


def test_parallel_requests_are_in_flight_together(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "t" / "replay.jsonl", [{"answer": "y" * 200}])
    with ReplayServer([tmp_path], tokens_per_s=100, ttft_s=0.1) as server:
        model = model_for(server)  # one shared instance, concurrency 8
        results: list[str] = []
        threads = [
            threading.Thread(target=lambda: results.append(ask(model, "t", "go")))
            for _ in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == ["y" * 200] * 6
        assert server.stats["max_in_flight"] >= 4
        settle = time.monotonic() + 20  # the handler may still be finishing its last write
        while server.stats["in_flight"] and time.monotonic() < settle:
            time.sleep(0.01)
        assert server.stats["in_flight"] == 0


def test_fault_sequence_and_rates(scripts: Path) -> None:
    with ReplayServer([scripts], faults=["500", "ok", "429:2"]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        messages: Any = [{"role": "user", "content": "Task id: plain"}]
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="r", messages=messages)
        client.chat.completions.create(model="r", messages=messages)
        with pytest.raises(openai.RateLimitError) as info:
            client.chat.completions.create(model="r", messages=messages)
        assert info.value.response.headers["retry-after"] == "2"
        assert info.value.response.headers["retry-after-ms"] == "2000"
        assert server.stats["status"] == {"500": 1, "200": 1, "429": 1}
    with ReplayServer([scripts], fault_rate_500=1.0, seed=1) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="r", messages=messages)


def test_api_key_is_enforced_when_set(scripts: Path) -> None:
    with ReplayServer([scripts], api_key="secret") as server:
        bad = openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        good = openai.OpenAI(base_url=server.base_url, api_key="secret", max_retries=0)
        assert [m.id for m in good.models.list()] == ["replay"]


def test_strict_models_answer_an_unknown_name_with_404_model_not_found(scripts: Path) -> None:
    """27.4: `ooda serve --strict-models` answers as OpenAI and vLLM do for a model they do
    not have; by default any name is served, as llama.cpp does."""
    served = [ServedModel("fast"), ServedModel("strong")]
    with ReplayServer([scripts], served=served, strict_models=True) as server:
        assert ask(OpenAIModel(ModelConfig(name="fast", base_url=server.base_url)), "gcd",
                   "fix it") == "first answer"
        request = urllib.request.Request(
            server.base_url + "/chat/completions", method="POST",
            data=json.dumps({"model": "nope", "messages": [{"role": "user", "content": "x"}]})
            .encode(), headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=5)
        assert info.value.code == 404
        error = json.loads(info.value.read())["error"]
        assert error["code"] == "model_not_found" and "`nope` does not exist" in error["message"]
        assert server.stats["status"] == {"200": 1, "404": 1}
    with ReplayServer([scripts], served=served) as lenient:
        assert ask(OpenAIModel(ModelConfig(name="nope", base_url=lenient.base_url)), "gcd",
                   "fix it") == "first answer"


def test_stop_ends_a_hanging_request(scripts: Path) -> None:
    server = ReplayServer([scripts], faults=["hang"])
    client = openai.OpenAI(base_url=server.start(), api_key="k", max_retries=0, timeout=120)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            client.chat.completions.create(model="r", messages=[{"role": "user", "content": "x"}])
        except BaseException as err:  # noqa: BLE001 - recorded for the assertion
            errors.append(err)

    thread = threading.Thread(target=call)
    thread.start()
    arrived = time.monotonic() + 30  # (a fixed 0.3 s sleep raced with a slow client thread)
    while not server.stats["in_flight"] and time.monotonic() < arrived:
        time.sleep(0.01)
    assert server.stats["in_flight"] == 1
    start = time.monotonic()
    server.stop()
    thread.join(timeout=30)
    # ended by the stop, not by the client's own 120 s timeout
    assert not thread.is_alive() and time.monotonic() - start < 30
    assert errors and isinstance(errors[0], openai.APIConnectionError)

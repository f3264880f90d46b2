"""The model client over real HTTP against the replay server: retries, deadlines, errors."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import openai  # noqa: F401 - imported at collection: no test's deadline pays for it
import pytest

from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.models.openai_model import (
    LOCAL_API_KEY,
    ModelCompletion,
    ModelConfig,
    ModelDeadline,
    ModelError,
    OpenAIModel,
    resolve_endpoint,
)
from ooda.agent.models.server import ReplayServer, ServedModel

ANSWER = "m.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n"
MESSAGES = [
    {"role": "system", "content": "Task id: t"},
    {"role": "user", "content": "fix it"},
]


@pytest.fixture()
def scripts(tmp_path: Path) -> Path:
    path = tmp_path / "t" / "replay.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"answer": ANSWER}) + "\n")
    return tmp_path


def model_for(base_url: str, **options: Any) -> OpenAIModel:
    options.setdefault("retry_backoff_s", 0.02)
    return OpenAIModel(ModelConfig(name="replay", base_url=base_url, **options))


def complete(model: OpenAIModel, timeout: float = 60.0, **kwargs: Any) -> ModelCompletion:
    return model.complete(MESSAGES, deadline=time.monotonic() + timeout, **kwargs)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --------------------------------------------------------------------------- configuration


def test_resolve_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert resolve_endpoint("http://127.0.0.1:8000/v1", None) == (
        "http://127.0.0.1:8000/v1",
        LOCAL_API_KEY,
    )
    assert resolve_endpoint("http://localhost:1/v1", None)[1] == LOCAL_API_KEY
    assert resolve_endpoint("http://[::1]:1/v1", None)[1] == LOCAL_API_KEY
    with pytest.raises(UsageError, match="OPENAI_API_KEY is not set"):
        resolve_endpoint("https://api.example.com/v1", None)
    with pytest.raises(UsageError, match="OPENAI_API_KEY is not set"):
        resolve_endpoint(None, None)
    monkeypatch.setenv("OPENAI_BASE_URL", "https://env.example.com/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert resolve_endpoint(None, None) == ("https://env.example.com/v1", "sk-env")
    assert resolve_endpoint("http://127.0.0.1:9/v1", "k") == ("http://127.0.0.1:9/v1", "k")
    with pytest.raises(UsageError):
        OpenAIModel(ModelConfig(name="m", base_url="http://127.0.0.1:9/v1", concurrency=0))


# --------------------------------------------------------------------------- happy path


def test_complete_streams_text_usage_and_timings(tmp_path: Path) -> None:
    # unpaced, the server sends 16 tokens a piece: 42 tokens are three pieces whatever the
    # load (paced, a server thread stalled a few ms sent a short answer in one piece)
    answer = ANSWER * 3
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "replay.jsonl").write_text(json.dumps({"answer": answer}) + "\n")
    seen: list[str] = []
    with ReplayServer([tmp_path]) as server:
        start = time.monotonic()
        done = complete(model_for(server.base_url), on_text=lambda t: seen.append(t) or True)
    assert done.text == answer and done.finish_reason == "stop" and done.attempts == 1
    assert done.completion_tokens == 42 and done.prompt_tokens == 5  # ~4 chars a token
    assert not done.tokens_estimated and not done.stopped_early
    assert done.t_first_token is not None and done.t_done is not None
    assert start < done.t_first_token <= done.t_done
    assert len(seen) == 3 and seen[-1] == answer


def test_on_text_false_stops_the_stream_early(tmp_path: Path) -> None:
    # a long tail after the marker: the server sends every token already due in one piece, so
    # with a short answer a server thread stalled a few ms (a loaded machine) sent the rest
    # with the marker, and nothing was left to stop (the ~5 s tail here is never streamed)
    answer = ANSWER + "The tail nobody reads. " * 170
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "replay.jsonl").write_text(json.dumps({"answer": answer}) + "\n")
    with ReplayServer([tmp_path], tokens_per_s=200) as server:
        done = complete(model_for(server.base_url), on_text=lambda t: "=======" not in t)
    assert done.stopped_early and done.finish_reason is None and done.tokens_estimated
    assert "=======" in done.text and answer.startswith(done.text)
    assert len(done.text) < len(answer) // 2  # the tail never came


def test_endpoint_without_stream_options_support(scripts: Path) -> None:
    with ReplayServer([scripts], accept_stream_options=False) as server:
        model = model_for(server.base_url)
        first, second = complete(model), complete(model)
        assert first.text == second.text == ANSWER
        assert first.tokens_estimated and first.completion_tokens == (len(ANSWER) + 3) // 4
        assert server.stats["status"] == {"400": 1, "200": 2}  # remembered after the first


def test_concurrency_is_bounded_across_threads(scripts: Path) -> None:
    with ReplayServer([scripts], tokens_per_s=400) as server:
        model = model_for(server.base_url, concurrency=2)
        threads = [threading.Thread(target=complete, args=(model,)) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert server.stats["chat_requests"] == 5 and server.stats["max_in_flight"] == 2


# --------------------------------------------------------------------------- retries


@pytest.mark.parametrize("fault", ["429", "500", "drop"])
def test_transient_faults_are_retried(scripts: Path, fault: str) -> None:
    with ReplayServer([scripts], faults=[fault, "ok"], tokens_per_s=5000) as server:
        done = complete(model_for(server.base_url))
        assert done.text == ANSWER and done.attempts == 2
        assert server.stats["faults"] == {fault: 1}


def test_many_mixed_faults_with_parallel_requests(scripts: Path) -> None:
    faults = ["429", "drop", "ok", "500", "ok", "drop"]
    with ReplayServer([scripts], faults=faults, tokens_per_s=5000) as server:
        model = model_for(server.base_url)
        results: list[str] = []
        threads = [
            threading.Thread(target=lambda: results.append(complete(model).text))
            for _ in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [ANSWER] * 6


def test_retry_after_is_honoured(scripts: Path) -> None:
    with ReplayServer([scripts], faults=["429:0.4", "ok"]) as server:
        start = time.monotonic()
        done = complete(model_for(server.base_url))
        assert done.attempts == 2 and time.monotonic() - start >= 0.4


def test_retry_after_past_the_deadline_gives_up_at_once(scripts: Path) -> None:
    with ReplayServer([scripts], faults=["429:30"]) as server:
        start = time.monotonic()
        with pytest.raises(ModelDeadline, match="HTTP 429"):
            complete(model_for(server.base_url), timeout=5)
        assert time.monotonic() - start < 2


def test_retries_are_bounded(scripts: Path) -> None:
    with ReplayServer([scripts], faults=["500"]) as server:
        with pytest.raises(ModelError, match="gave up after 3 attempts: HTTP 500") as info:
            complete(model_for(server.base_url, max_retries=2))
        assert not isinstance(info.value, ModelDeadline)
        assert server.stats["chat_requests"] == 3


def test_hang_respects_the_deadline(scripts: Path) -> None:
    with ReplayServer([scripts], faults=["hang"]) as server:
        start = time.monotonic()
        with pytest.raises(ModelDeadline) as info:
            complete(model_for(server.base_url), timeout=1.0)
        elapsed = time.monotonic() - start
        assert 0.9 <= elapsed <= 2.0, elapsed
        assert isinstance(info.value, TimeoutError)


def test_slow_stream_is_cut_at_the_deadline(scripts: Path) -> None:
    with ReplayServer([scripts], tokens_per_s=20) as server:
        start = time.monotonic()
        with pytest.raises(ModelDeadline) as info:
            complete(model_for(server.base_url), timeout=0.6)
        assert time.monotonic() - start < 1.5
        assert info.value.partial and ANSWER.startswith(info.value.partial)


# --------------------------------------------------------------------------- hard errors


def test_unreachable_endpoint_is_an_infra_error() -> None:
    model = model_for(f"http://127.0.0.1:{closed_port()}/v1", max_retries=3)
    start = time.monotonic()
    with pytest.raises(InfraError, match="unreachable after 4 attempts"):
        complete(model, timeout=30)
    assert time.monotonic() - start < 5
    start = time.monotonic()
    with pytest.raises(InfraError, match="unreachable"):
        model.check_reachable(timeout_s=2)
    assert time.monotonic() - start < 2


def test_check_reachable_accepts_any_http_answer_but_a_rejected_key(scripts: Path) -> None:
    with ReplayServer([scripts], api_key="secret") as server:
        with pytest.raises(UsageError, match="rejected the API key"):  # 401: said at once (27.4)
            model_for(server.base_url).check_reachable()
        model_for(server.base_url.removesuffix("/v1") + "/nothing/here",
                  api_key="secret").check_reachable()  # 404
        model_for(server.base_url, api_key="secret").check_reachable()  # 200


def test_bad_api_key_is_a_clear_error(scripts: Path) -> None:
    with ReplayServer([scripts], api_key="secret") as server:
        # the same for every sample: bad input (exit 2), not a per-candidate error
        with pytest.raises(UsageError, match="OPENAI_API_KEY") as info:
            complete(model_for(server.base_url, api_key="wrong"))
        assert "401" in str(info.value)
        assert server.stats["status"] == {"401": 1}  # not retried


def test_not_found_is_not_retried(scripts: Path) -> None:
    with ReplayServer([scripts]) as server:
        model = model_for(server.base_url.removesuffix("/v1") + "/wrong/v1")
        with pytest.raises(UsageError, match="HTTP 404"):
            complete(model)
        assert server.stats["status"] == {"404": 1}


def test_a_model_the_endpoint_lacks_is_named_with_the_ones_it_lists(scripts: Path) -> None:
    """27.4: a 404 model_not_found is bad input naming the model and, from the listing the
    start-up check read (no request more), a few the endpoint has; a 404 of a wrong base URL
    keeps its own words."""
    served = [ServedModel(f"m{k}") for k in range(7)]
    with ReplayServer([scripts], served=served, strict_models=True) as server:
        model = OpenAIModel(ModelConfig(name="nope", base_url=server.base_url,
                                        retry_backoff_s=0.02))
        model.check_reachable()
        with pytest.raises(UsageError) as info:
            complete(model)
        said = str(info.value)
        assert f"{server.base_url} has no model 'nope'" in said and "\n" not in said
        assert "it lists m0, m1, m2, m3, m4 and 2 more" in said
        assert server.stats["status"] == {"200": 1, "404": 1}  # GET /models, one completion
        unlisted = OpenAIModel(ModelConfig(name="nope", base_url=server.base_url))
        with pytest.raises(UsageError, match="has no model 'nope'") as info:
            complete(unlisted)  # no listing read: the 404's own words decide
        assert "it lists" not in str(info.value)


def test_a_bug_in_on_text_is_not_disguised_as_a_model_error(scripts: Path) -> None:
    def broken(text: str) -> bool:
        raise KeyError("bug")

    with ReplayServer([scripts]) as server:
        with pytest.raises(KeyError):
            complete(model_for(server.base_url), on_text=broken)
        assert server.stats["chat_requests"] == 1

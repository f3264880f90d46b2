"""The model client against the bundled endpoint behaving like local servers with their
defaults (`ooda serve --like llama-cpp-python`, `--like vllm`), over real HTTP: capacity
learned from cut streams, the context window learned and fitted, an empty stream explained,
token counts flagged as estimated, finish_reason kept, partial answers kept."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import openai  # noqa: F401 - imported at collection: no test's deadline pays for it
import pytest

from ooda.agent.contracts.errors import ContextOverflow
from ooda.agent.models.capacity import AdaptiveLimit
from ooda.agent.models.context import ContextWindow, overflow_facts, window_from_listing
from ooda.agent.models.openai_model import ModelConfig, ModelDeadline, ModelError, OpenAIModel
from ooda.agent.models.replay_behaviour import behaviour_for
from ooda.agent.models.server import ReplayServer

ANSWER = ("Here is the fix.\n\nm.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n"
          + "That is all. " * 10)
MESSAGES = [{"role": "system", "content": "Task id: t"}, {"role": "user", "content": "fix it"}]


@pytest.fixture()
def scripts(tmp_path: Path) -> Path:
    path = tmp_path / "t" / "replay.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"answer": ANSWER}) + "\n")
    return tmp_path


def model_for(server: ReplayServer, **options: Any) -> OpenAIModel:
    options.setdefault("retry_backoff_s", 0.02)
    model = OpenAIModel(ModelConfig(name="replay", base_url=server.base_url, **options))
    model.check_reachable()
    return model


def complete_many(model: OpenAIModel, n: int, messages: list[dict[str, str]] = MESSAGES
                  ) -> list[Any]:
    """`n` answers asked at once, each a completion or the exception it raised."""
    results: list[Any] = [None] * n

    def one(i: int) -> None:
        try:
            results[i] = model.complete(messages, deadline=time.monotonic() + 60)
        except Exception as exc:  # noqa: BLE001 - the test counts them
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def big_prompt(chars: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Task id: t"}, {"role": "user", "content": "x" * chars}]


# --------------------------------------------------------------------------- capacity


def test_streams_cut_while_others_wait_lower_the_concurrency_and_all_finish(
        scripts: Path) -> None:
    with ReplayServer([scripts], tokens_per_s=400,
                      behaviour=behaviour_for("llama-cpp-python")) as server:
        model = model_for(server, concurrency=8, max_retries=2)
        results = complete_many(model, 16)
        stats = server.stats
    assert all(not isinstance(r, Exception) for r in results), Counter(map(repr, results))
    assert {r.finish_reason for r in results} == {"stop"}
    assert all(r.tokens_estimated for r in results)  # the server sends no usage
    report = model.report()["concurrency"]
    assert report["configured"] == 8 and report["lowest"] == 1 and report["streams_cut"] >= 1
    assert stats["interrupted"] == report["streams_cut"]
    # no retry storm: each cut stream is sent once more, nothing else
    assert stats["chat_requests"] == 16 + stats["interrupted"]
    assert any("--interrupt_requests" in n for n in model.notices)


def test_a_stream_cut_while_alone_is_an_ordinary_retry() -> None:
    limit = AdaptiveLimit(4)
    slot = limit.acquire(1.0)
    assert slot is not None
    assert limit.release(slot, cut=True) is False  # nobody else ran: not about capacity
    assert limit.limit == 4 and limit.cuts == 0


def test_the_limit_rises_again_as_streams_finish_and_probes_less_after_each_cut() -> None:
    limit = AdaptiveLimit(4)
    a, b = limit.acquire(1.0), limit.acquire(1.0)
    assert a is not None and b is not None
    assert limit.release(a, cut=True) is True
    limit.release(b, finished=True)
    assert limit.limit == 1
    finished_until_raised = 0
    while limit.limit == 1:
        slot = limit.acquire(1.0)
        assert slot is not None
        limit.release(slot, finished=True)
        finished_until_raised += 1
    assert limit.limit == 2 and finished_until_raised == 4
    a, b = limit.acquire(1.0), limit.acquire(1.0)
    assert a is not None and b is not None
    limit.release(a, cut=True)
    limit.release(b, finished=True)
    waited = 0
    while limit.limit == 1:
        slot = limit.acquire(1.0)
        assert slot is not None
        limit.release(slot, finished=True)
        waited += 1
    assert waited == 8  # twice as long before probing the level that was cut again


# --------------------------------------------------------------------------- context window


def test_an_empty_stream_is_asked_once_unstreamed_and_the_overflow_is_said_in_seconds(
        scripts: Path) -> None:
    with ReplayServer([scripts], behaviour=behaviour_for("llama-cpp-python")) as server:
        model = model_for(server, max_retries=6)
        start = time.monotonic()
        with pytest.raises(ContextOverflow) as info:
            model.complete(big_prompt(9000), deadline=time.monotonic() + 60)
        took = time.monotonic() - start
        stats = server.stats
    message = str(info.value)
    assert "2,048 tokens" in message and "\n" not in message and took < 5
    assert info.value.window == 2048
    assert stats["chat_requests"] == 2 and stats["status"] == {"200": 2, "400": 1}
    assert model.report()["context_window"] == {"tokens": 2048,
                                                "source": "stated by the endpoint's error"}


def test_the_answer_cap_is_fitted_to_the_window(scripts: Path) -> None:
    with ReplayServer([scripts], behaviour=behaviour_for("vllm", context_window=1024)) as server:
        model = model_for(server, max_tokens=4096)
        assert model.window.window == 1024  # vLLM lists max_model_len
        done = model.complete(big_prompt(2000), deadline=time.monotonic() + 30)
        assert done.finish_reason == "stop" and not done.tokens_estimated
        with pytest.raises(ContextOverflow, match="1,024 tokens"):
            model.complete(big_prompt(5000), deadline=time.monotonic() + 30)
        stats = server.stats
    assert stats["status"].get("400") is None  # fitted before sending: never refused


def test_a_window_stated_by_a_400_is_learned_and_the_request_sent_again(scripts: Path) -> None:
    with ReplayServer([scripts], behaviour=behaviour_for("openai", context_window=1500)) as server:
        model = model_for(server, max_tokens=4096)
        assert model.window.window is None  # not listed
        done = model.complete(big_prompt(2000), deadline=time.monotonic() + 30)
        stats = server.stats
    assert done.finish_reason == "stop" and done.attempts == 2
    assert stats["status"] == {"200": 2, "400": 1}  # the listing, the 400, the answer
    assert model.window.window == 1500


def test_the_user_window_is_used_from_the_start(scripts: Path) -> None:
    with ReplayServer([scripts], behaviour=behaviour_for("llama-cpp-python")) as server:
        model = model_for(server, context_window=2048)
        with pytest.raises(ContextOverflow, match=r"\(--context-window\)"):
            model.complete(big_prompt(9000), deadline=time.monotonic() + 30)
        assert server.stats["chat_requests"] == 0


def test_context_errors_of_each_server_are_read() -> None:
    vllm = overflow_facts("This model's maximum context length is 8192 tokens. However, you "
                          "requested 9000 tokens (5000 in the messages, 4000 in the completion).")
    assert vllm is not None and (vllm.window, vllm.prompt_tokens) == (8192, 5000)
    raw = overflow_facts("Requested tokens (5753) exceed context window of 4096")
    assert raw is not None and (raw.window, raw.prompt_tokens) == (4096, 5753)
    server = overflow_facts("request (4476 tokens) exceeds the available context size (4096 "
                            "tokens)", {"error": {"n_ctx": 4096, "n_prompt_tokens": 4476}})
    assert server is not None and (server.window, server.prompt_tokens) == (4096, 4476)
    assert overflow_facts("model 'x' not found") is None
    assert window_from_listing({"id": "m", "max_model_len": 32768}) == 32768
    assert window_from_listing({"id": "m", "owned_by": "me"}) is None


def test_a_calibrated_estimate_fits_closer() -> None:
    window = ContextWindow(4096, "test")
    messages = [{"role": "user", "content": "y" * 6000}]
    loose = window.answer_cap(messages, None)
    window.calibrate(6000, 1500)  # the endpoint counted 4 characters a token
    tight = window.answer_cap(messages, None)
    assert loose is not None and tight is not None and tight > loose


# --------------------------------------------------------------------------- what is kept


def test_finish_reason_length_is_kept(scripts: Path) -> None:
    with ReplayServer([scripts]) as server:
        model = model_for(server, max_tokens=5)
        done = model.complete(MESSAGES, deadline=time.monotonic() + 30)
    assert done.finish_reason == "length" and len(done.text) == 20


def test_the_request_timeout_keeps_the_partial_answer(scripts: Path) -> None:
    with ReplayServer([scripts], tokens_per_s=20) as server:
        model = model_for(server, request_timeout_s=0.6)
        with pytest.raises(ModelDeadline, match="--request-timeout") as info:
            model.complete(MESSAGES, deadline=time.monotonic() + 30)
    assert info.value.partial and ANSWER.startswith(info.value.partial)
    assert info.value.t_first_token is not None


def test_a_stream_that_keeps_breaking_gives_up_with_its_partial_text(scripts: Path) -> None:
    with ReplayServer([scripts], tokens_per_s=200, faults=["drop"]) as server:
        model = model_for(server, max_retries=1)
        with pytest.raises(ModelError) as info:
            model.complete(MESSAGES, deadline=time.monotonic() + 30)
    assert info.value.partial and ANSWER.startswith(info.value.partial)
    assert "alone on the endpoint" in str(info.value)


def test_a_prompt_the_endpoint_silently_cut_is_said(scripts: Path) -> None:
    with ReplayServer([scripts], behaviour=behaviour_for("ollama")) as server:
        model = model_for(server)
        done = model.complete(big_prompt(30_000), deadline=time.monotonic() + 30)
        assert server.stats["overflows"] == 1
    assert done.finish_reason == "stop" and not done.tokens_estimated
    assert any("OLLAMA_CONTEXT_LENGTH" in n for n in model.notices)

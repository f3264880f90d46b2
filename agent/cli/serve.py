"""`ooda serve`: the bundled OpenAI-compatible endpoint replaying scripted answers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ooda.agent.contracts.errors import UsageError


def serve(
    replay: Annotated[
        list[Path],
        typer.Option("--replay", help="replay.jsonl file or directory of tasks (repeat)."),
    ],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 = any free port).")] = 8000,
    tokens_per_s: Annotated[float, typer.Option(help="Simulated token rate (0 = instant).")] = 0.0,
    ttft: Annotated[float, typer.Option("--ttft", help="Simulated time to first token (s).")] = 0.0,
    faults: Annotated[
        str | None, typer.Option(help="Comma-separated fault cycle: ok,429,500,drop,hang.")
    ] = None,
    answer_as: Annotated[
        str, typer.Option(help="Rewrite each answer: as-is, whole-file, definitions (bare "
                          "functions in prose) or mixed (agent/models/answer_styles.py).")
    ] = "as-is",
    served_model: Annotated[
        list[str] | None,
        typer.Option("--served-model", help="A model to serve, "
                     "NAME[:TOKENS_PER_S[:PRICE_IN:PRICE_OUT]] (USD per million tokens; "
                     "repeat; replay.jsonl lines with a \"model\" go only to it) "
                     "[default: replay]."),
    ] = None,
    like: Annotated[
        str, typer.Option("--like", metavar="openai|llama-cpp-python|ollama|vllm",
                          help="Behave like this server with its defaults: llama-cpp-python "
                          "generates one answer at a time, cuts a stream when another request "
                          "waits, has a 2,048-token window and sends no usage "
                          "(docs/LOCAL_MODELS.md).")
    ] = "openai",
    slots: Annotated[
        int | None, typer.Option(help="Answers generated at once; others wait (0: no "
                                 "limit) [default: as --like says].")
    ] = None,
    context_window: Annotated[
        int | None, typer.Option(help="The served model's context window in tokens (0: no "
                                 "limit) [default: as --like says].")
    ] = None,
    log_requests: Annotated[
        Path | None,
        typer.Option("--log-requests", help="Append every chat request (model and messages) "
                     "to this file, one JSON line each: what a run showed the model."),
    ] = None,
    strict_models: Annotated[
        bool, typer.Option("--strict-models", help="Answer a request for a model not served "
                           "with HTTP 404 model_not_found, as OpenAI and vLLM do (default: any "
                           "name is served, as llama.cpp does).")
    ] = False,
) -> None:
    """Serve scripted answers over an OpenAI-compatible API (tests, demos, benchmarks)."""
    from ooda.agent.models.replay_behaviour import behaviour_for
    from ooda.agent.models.server import parse_served, serve_forever

    for p in replay:
        if not p.exists():
            raise UsageError(f"--replay {p}: no such file or directory")
    serve_forever(
        replay,
        host=host,
        port=port,
        tokens_per_s=tokens_per_s,
        ttft_s=ttft,
        faults=faults.split(",") if faults else None,
        answer_as=answer_as,
        served=[parse_served(m) for m in served_model] if served_model else None,
        behaviour=behaviour_for(like, slots=slots, context_window=context_window),
        request_log=log_requests,
        strict_models=strict_models,
    )

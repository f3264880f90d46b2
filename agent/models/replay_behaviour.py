"""How the bundled endpoint behaves besides its script: like the local servers people run, with
their defaults, so that ooda's handling of them is tested over real HTTP without them
(`ooda serve --like llama-cpp-python`), and a user can rehearse a setup offline.

What each preset copies (checked against the servers' sources and, for llama-cpp-python 0.3,
against the real server with a small model; docs/LOCAL_MODELS.md):
- `llama-cpp-python`: one generation at a time (others wait); a running stream ends with
  `[DONE]` and no finish_reason as soon as another request waits (`--interrupt_requests`,
  on by default); a context of 2,048 tokens (`--n_ctx`); a prompt that does not fit is an
  empty HTTP 200 stream (a 400 `context_length_exceeded` when not streaming); an answer cap
  that passes the window is shortened to fit; no usage in streams.
- `vllm`: many generations at once; the model listing states `max_model_len`; a prompt plus
  answer cap over the window is a 400 saying both numbers; usage on request.
- `ollama`: one generation at a time (others wait, `OLLAMA_NUM_PARALLEL`); a context of 4,096
  tokens on a machine without a large GPU, and a longer prompt silently loses its start (the
  server logs "truncating input prompt"; the usage counts what it kept).
- `openai` (the default): no limits, usage on request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ooda.agent.contracts.errors import UsageError


@dataclass(frozen=True)
class Behaviour:
    """The endpoint's limits and habits."""

    slots: int = 0
    """Answers generated at once; later requests wait (0: no limit)."""
    interrupt: bool = False
    """A running stream ends with [DONE] and no finish_reason when another request waits."""
    context_window: int = 0
    """Prompt plus answer tokens the model holds (0: no limit)."""
    overflow: str = "400"
    """A prompt that does not fit: "400" (an error stating the window), "empty" (streamed: an
    empty 200 stream; unstreamed: the 400), or "truncate" (its start is dropped, silently: the
    usage counts what was kept)."""
    fit_answer_cap: bool = False
    """An answer cap that passes the window is shortened (llama-cpp-python), not refused."""
    stream_usage: bool = True
    """Usage is sent in a stream when the request asks for it (stream_options)."""
    list_context: bool = False
    """`GET /v1/models` states each model's window (`max_model_len`)."""
    prompt_chars_per_token: float = 4.0
    """How the endpoint's tokenizer counts a prompt: characters a token."""
    template_tokens: int = 0
    """Tokens its chat template adds around each message."""

    def prompt_tokens(self, texts: list[str]) -> int:
        """The endpoint's count of a prompt of messages holding `texts`."""
        return sum(math.ceil(len(text) / self.prompt_chars_per_token) + self.template_tokens
                   for text in texts)


PRESETS: dict[str, Behaviour] = {
    "openai": Behaviour(),
    "llama-cpp-python": Behaviour(
        slots=1, interrupt=True, context_window=2048, overflow="empty", fit_answer_cap=True,
        stream_usage=False, prompt_chars_per_token=3.2, template_tokens=4,
    ),
    "ollama": Behaviour(slots=1, context_window=4096, overflow="truncate", fit_answer_cap=True,
                        prompt_chars_per_token=3.5, template_tokens=4),
    "vllm": Behaviour(context_window=8192, list_context=True, prompt_chars_per_token=3.5,
                      template_tokens=4),
}


def behaviour_for(like: str = "openai", *, slots: int | None = None,
                  context_window: int | None = None) -> Behaviour:
    """The preset `like`, with the given limits replacing its own."""
    preset = PRESETS.get(like)
    if preset is None:
        raise UsageError(f"--like {like!r}: use one of {', '.join(PRESETS)}")
    if slots is not None:
        if slots < 0:
            raise UsageError("--slots must not be negative")
        preset = replace(preset, slots=slots)
    if context_window is not None:
        if context_window < 0:
            raise UsageError("--context-window must not be negative")
        preset = replace(preset, context_window=context_window)
    return preset


def overflow_message(window: int, prompt: int, answer: int | None) -> str:
    """The 400's message for a request over the window, in OpenAI's wording (which vLLM and
    llama-cpp-python use too)."""
    asked = prompt + (answer or 0)
    return (f"This model's maximum context length is {window} tokens. However, you requested "
            f"{asked} tokens ({prompt} in the messages, {answer or 0} in the completion). "
            "Please reduce the length of the messages or completion.")

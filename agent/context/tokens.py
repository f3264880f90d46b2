"""How many tokens a text costs a model, estimated without its tokenizer (the endpoint may be
any model; no tokenizer is downloaded). Code runs shorter per token than prose: indentation,
punctuation and short names; CHARS_PER_TOKEN errs on the side of more tokens, so that a
prompt fitted to a budget stays within the model's window."""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 3.5


def estimate(text: str) -> int:
    """The tokens `text` costs, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_chars(chars: int) -> int:
    """The tokens a text of `chars` characters costs, rounded up."""
    return math.ceil(chars / CHARS_PER_TOKEN)

"""Small text helpers: one line of an exception for console lines and records, text made
valid UTF-8 before it goes back to an endpoint, and the rough token estimate (~4 characters
a token) used where an endpoint counts none."""

from __future__ import annotations

import re

LIMIT = 300
_SURROGATE = re.compile("[\ud800-\udfff]")


def one_line(exc: BaseException, *, with_type: bool = False) -> str:
    """The first line of `exc`'s message (its type's name when it has none), at most LIMIT
    characters; `with_type` puts the type's name in front."""
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    if with_type:
        return f"{type(exc).__name__}: {first}"[:LIMIT]
    return (first or type(exc).__name__)[:LIMIT]


def valid_utf8(text: str) -> str:
    """`text` with what UTF-8 cannot encode (lone surrogates) replaced by U+FFFD, so it can be
    sent back to an endpoint (a model's invalid answer stays in the conversation history)."""
    return _SURROGATE.sub("\ufffd", text)


CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """A rough token count: ~4 characters a token (the figure recorded when an endpoint sends
    no usage, flagged as estimated)."""
    return -(-len(text) // CHARS_PER_TOKEN)

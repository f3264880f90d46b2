"""One line of an exception, for console lines and records (bounded, never empty)."""

from __future__ import annotations

LIMIT = 300


def one_line(exc: BaseException, *, with_type: bool = False) -> str:
    """The first line of `exc`'s message (its type's name when it has none), at most LIMIT
    characters; `with_type` puts the type's name in front."""
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    if with_type:
        return f"{type(exc).__name__}: {first}"[:LIMIT]
    return (first or type(exc).__name__)[:LIMIT]

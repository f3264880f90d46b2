"""Numbers a user sets through the environment (OODA_* settings): one reader, so a bad value is
the same one-line usage error (exit 2) whichever setting it is, never a traceback."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TypeVar

from ooda.agent.contracts.errors import UsageError

Number = TypeVar("Number", int, float)


def positive_from_env(name: str, default: Number, parse: Callable[[str], Number],
                      what: str) -> Number:
    """The positive, finite value of environment variable `name` (`default` when unset or
    blank); anything else is a UsageError asking for `what`."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    error = UsageError(f"{name}={raw!r}: give {what}")
    try:
        value = parse(raw)
    except ValueError:
        raise error from None
    if not value > 0 or math.isinf(value):
        raise error
    return value

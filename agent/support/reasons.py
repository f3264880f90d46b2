"""A failure's headline: the one line that goes into consoles, run.json, reports and the
feedback's first line. For a test run it names the first failing test and its assertion line
(which a bare first line, "2 of 6 required tests did not pass:", leaves out)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_TEST = re.compile(r"^(?:FAILED|ERROR|MISSING) (\S+?):?(\s.*)?$")
_ASSERTION = re.compile(r"^\s*E\s+(\S.*)$")
_LOCATION = re.compile(r"^\s*(\S+\.py:\d+): \w+")


def headline(summary: str) -> str:
    """The first line of `summary`; when it ends with a colon (a list follows), the first
    failing test, its first `E` line (the assertion) and where it failed are added."""
    lines = [line for line in summary.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0].strip()
    if not first.endswith(":") or len(lines) < 2:
        return first
    for i, line in enumerate(lines[1:], start=1):
        test = _TEST.match(line.strip())
        if test is None:
            continue
        detail = (test.group(2) or "").strip()
        assertion = location = ""
        for follow in lines[i + 1:]:
            if _TEST.match(follow.strip()):
                break
            found = _ASSERTION.match(follow)
            if found and not assertion:
                assertion = found.group(1).strip()
            where = _LOCATION.match(follow)
            if where and not location:
                location = where.group(1)
        said = assertion or detail
        return (f"{first} {test.group(1)}" + (f": {said}" if said else "")
                + (f" ({location})" if location else ""))
    return f"{first} {lines[1].strip()}"


def failure_reason(record: Mapping[str, Any]) -> str:
    """Why a task of an evaluation (a results.jsonl record) did not resolve: how its run
    ended and, when known, its last judged candidate's reason (naming the failing test)."""
    reason = headline(str(record.get("reason") or ""))
    last = headline(str(record.get("last_reason") or ""))
    return f"{reason}; last: {last}" if last and last != reason else reason

"""The one line that says why an environment build failed, found in its (long) log.

pip and apt bury the cause under progress lines and tracebacks; the line a user needs is
e.g. "No matching distribution found for MarkupSafe==2.1.1". Patterns are tried in order of
how telling they are (a Python exception: the last one, where a traceback ends); failing all
of them, the last line that looks like an error is used.
"""

from __future__ import annotations

import re

PATTERNS = (
    re.compile(r"No matching distribution found for \S+"),
    re.compile(r"Could not find a version that satisfies the requirement \S+"),
    re.compile(r"E: Unable to locate package \S+"),
    re.compile(r"E: Package '[^']+' has no installation candidate"),
    re.compile(r"ResolutionImpossible.*"),
    re.compile(r"Cannot install .+ because these package versions have conflicting dependencies"),
    re.compile(r"Failed to build \S+"),
    re.compile(r"Could not build wheels for .+"),
    re.compile(r"(?:ModuleNotFoundError|ImportError|SyntaxError): .+"),
    re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception): .+"),
    re.compile(r"error: command '[^']+' failed.*"),
    re.compile(r"fatal error: .+"),
    re.compile(r"ooda: the build ran past its .+"),
)
_ERRORISH = re.compile(r"(?i)\b(error|failed|fatal|not found)\b")
MAX_LEN = 300


def cause(log: str, exit_code: int | None = None) -> str:
    """The most telling single line of `log` (a failed build's output)."""
    for pattern in PATTERNS:
        found = pattern.findall(log)
        if found:
            exception = pattern.pattern.endswith("(?:Error|Exception): .+")
            return _clip((found[-1] if exception else found[0]).strip().rstrip(" .:"))
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    for line in reversed(lines):
        if _ERRORISH.search(line):
            return _clip(line)
    if lines:
        return _clip(lines[-1])
    return f"the build exited with status {exit_code}" if exit_code is not None else "no output"


def _clip(line: str) -> str:
    line = re.sub(r"^(?:ERROR|error|E):\s*", "", line)
    return line if len(line) <= MAX_LEN else line[: MAX_LEN - 1] + "…"

"""Which failures of the unpatched code are the machine's, not the code's.

A test that fails on the unpatched code because the sandbox has no network, lacks a locale or
a program, or refuses an operation a developer's machine allows (no capabilities, a read-only
root) fails there for a reason no change to the repository can remove. With only a test
command, such a test must not silently become a test the fix must make pass; with a task's own
test lists it is reported as what it is. Pure: it reads the failure's text.

Only unambiguous signatures count: a name that does not resolve, a network that is
unreachable, an unsupported locale, a missing executable (a bare program name), a denied
privilege or a read-only file system. A failure that merely mentions a file or a refused
connection (a test server the bug keeps from starting) stays the code's.
"""

from __future__ import annotations

import re

_SIGNATURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("needs the network", re.compile(
        r"Temporary failure in name resolution|Name or service not known|"
        r"No address associated with hostname|nodename nor servname|getaddrinfo failed|"
        r"socket\.gaierror|Network is unreachable|\[Errno 101\]|No route to host|"
        r"\[Errno 113\]|Failed to resolve|NameResolutionError")),
    ("lacks a locale", re.compile(r"unsupported locale setting|locale\.Error")),
    ("lacks a program", re.compile(
        r"(?s)(?:_execute_child|subprocess).*(?:FileNotFoundError|OSError): \[Errno 2\] "
        r"No such file or directory: '[A-Za-z0-9_.+-]+'")),
    ("is refused a privilege", re.compile(
        r"PermissionError: \[Errno 1\] Operation not permitted|"
        r"\[Errno 30\] Read-only file system")),
)


def environmental_reason(message: str) -> str | None:
    """Why the failure in `message` is the machine's ("needs the network", "lacks a
    locale", ...), or None when it may be the code's."""
    for reason, pattern in _SIGNATURES:
        if pattern.search(message):
            return reason
    return None

"""The consoles every command prints through (rich): soft-wrapped, so that rich never breaks
a line itself. In a terminal the terminal folds long lines (a path copied from it stays whole);
piped, every line stays whole."""

from __future__ import annotations

from rich.console import Console


def make_console(*, stderr: bool = True) -> Console:
    """A console on stderr (progress, results) or stdout (`ooda verify`'s report)."""
    return Console(stderr=stderr, soft_wrap=True)

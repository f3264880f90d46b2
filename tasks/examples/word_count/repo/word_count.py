"""Word frequencies of a text: case-insensitive, punctuation ignored."""

import re
from collections import Counter

_WORD = re.compile(r"[a-z0-9']+")


def word_counts(text: str) -> dict[str, int]:
    """Map each word of `text`, lower-cased, to the number of times it occurs."""
    return dict(Counter(_WORD.findall(text)))


def top_words(text: str, n: int) -> list[tuple[str, int]]:
    """The `n` most frequent words with their counts; ties in alphabetical order."""
    counts = word_counts(text)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]

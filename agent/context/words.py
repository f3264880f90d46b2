"""Words for lexical retrieval: code and prose cut into the same lower-case terms, so that an
issue's "to_stacked_array" and "stacked array" meet a function named `to_stacked_array`.

An identifier gives itself (lower-cased) and its parts split at underscores, case changes and
digits (`_print_LatexPrinter` → `_print_latexprinter`, `print`, `latex`, `printer`); English
stop words, Python keywords and one-letter parts are dropped. Standard library only.
"""

from __future__ import annotations

import re
from functools import lru_cache

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

STOP = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing done down during each
    else few for from further get got had has have having he her here hers him his how i if in
    into is it its itself just let like may me might more most much must my no nor not now of
    off on once only or other our out over own same she should so some such than that the
    their them then there these they this those through to too under until up us use used
    using very via was we were what when where which while who whom why will with would you
    your def self cls return none true false import class elif pass raise try except finally
    lambda yield assert del global nonlocal async await is not str int float bool list dict
    tuple set object args kwargs""".split()
)
"""Words too common in prose or in Python code to tell one code unit from another."""


@lru_cache(maxsize=1 << 17)
def identifier_terms(word: str) -> tuple[str, ...]:
    """An identifier's terms: itself lower-cased and its parts (cached: identifiers repeat)."""
    whole = word.lower().strip("_")
    if not whole:
        return ()
    parts = [p.lower() for p in _PARTS.findall(word)]
    terms = [whole] if whole not in STOP else []
    if len(parts) > 1:
        terms += [p for p in parts if len(p) > 1 and p not in STOP and p != whole]
    return tuple(terms)


def terms(text: str) -> list[str]:
    """Every term of `text` (code or prose), in order, repeats kept (BM25 counts them)."""
    out: list[str] = []
    for word in _IDENT.findall(text):
        out += identifier_terms(word)
    return out


def identifiers(text: str) -> set[str]:
    """The distinct identifiers of `text` as written (for exact name matches)."""
    return set(_IDENT.findall(text))

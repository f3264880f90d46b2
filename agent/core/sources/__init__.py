"""Where candidates come from, by the name `--model` gives: `SOURCES`, one line per source.

A source is one module of this package with a `CandidateSource` class and its `SourceKind`
(agent/core/sources/base.py says what both are); adding one is adding its file and its line
below. A name not listed is an endpoint's model, asked through the LLM source (`LLM`).
"""

from __future__ import annotations

from ooda.agent.contracts.protocols import Model
from ooda.agent.core.sources import mutate, patch
from ooda.agent.core.sources.base import (
    CandidateSource,
    Exhausted,
    Proposal,
    Request,
    SourceKind,
)
from ooda.agent.core.sources.llm import LLM, LLMSource

__all__ = ["FIRST_SOURCES", "LLM", "SOURCES", "CandidateSource", "Exhausted", "LLMSource", "Proposal",
           "Request",
           "SourceKind", "as_source", "learns", "model_of", "source_kind"]

SOURCES: dict[str, SourceKind] = {
    kind.name: kind for kind in (
        patch.GOLD,  # the task's reference patch
        mutate.MUTATE,  # fault-localised mutation of the code under test, no model
    )
}
"""Source name -> kind; the name is `--model`'s value."""
FIRST_SOURCES = frozenset(kind.name for kind in SOURCES.values()
                          if not kind.asks_endpoint and not kind.oracle)
"""The sources a run may try before its model (`--first`, `--model mutate,FAST[,STRONG]`):
those that need no model and are no oracle."""


def source_kind(name: str | None) -> SourceKind:
    """The kind of source `--model name` stands for (an endpoint's model when not listed)."""
    return SOURCES.get(name or "", LLM)


def as_source(answerer: Model | CandidateSource) -> CandidateSource:
    """`answerer` as a source: a model is asked through the LLM source."""
    if isinstance(answerer, CandidateSource):
        return answerer
    return LLMSource(answerer)


def learns(source: CandidateSource) -> bool:
    """Whether `source` reads prompts and feedback; one that does not (`learns_from_feedback =
    False`: --model mutate) has each candidate start from the task, without a prompt, judged
    for its verdict only, and may say how many candidates a round has (`samples`)."""
    return bool(getattr(source, "learns_from_feedback", True))


def model_of(source: CandidateSource) -> Model | None:
    """The model a source asks, if it asks one."""
    return source.model if isinstance(source, LLMSource) else None

"""Importers: public benchmarks (QuixBugs, HumanEvalFix, SWE-bench) → self-contained task directories."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ooda.tasks.importers.humanevalfix import import_humanevalfix
from ooda.tasks.importers.quixbugs import import_quixbugs
from ooda.tasks.importers.swebench import import_swebench

Importer = Callable[..., list[Path]]
"""`(src, dest, *, only=None, overwrite=False) -> task dirs written`."""

IMPORTERS: dict[str, Importer] = {
    "quixbugs": import_quixbugs,
    "humanevalfix": import_humanevalfix,
    "swebench": import_swebench,
}
"""Importers by the KIND name of `ooda tasks import KIND SRC DEST`."""

__all__ = ["IMPORTERS", "Importer", "import_humanevalfix", "import_quixbugs", "import_swebench"]

"""The index of a repository's Python code at one state: every file cut into units
(agent/context/units.py), the modules they import, and a BM25 index over the units of the
files a fix may touch (tests are cut into units but not retrieved: a benchmark's tests are
not the model's to see, and a fix never belongs in them).

Built once per state and cached (agent/context/store.py): `load_index(repo)` reads and hashes
the files, and finds the index by that fingerprint, or builds it, reusing each unchanged
file's units from the per-file cache. BM25 is `bm25s` (sparse matrices over numpy: a query
against sympy's ~40,000 units takes milliseconds, where rank-bm25 loops in Python per
document).
"""

from __future__ import annotations

import gc
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ooda.agent.context import store
from ooda.agent.context.units import FileUnits, Unit, cut
from ooda.agent.context.words import terms

if TYPE_CHECKING:
    import bm25s

SKIP_DIRS = frozenset({
    ".git", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".tox", ".nox",
    ".eggs", "site-packages", ".pytest_cache", ".ruff_cache",
})
"""Folders that hold no code of the repository's own."""
SKIP_TOP = frozenset({"build", "dist"})
"""Top-level folders that hold copies of the code (build outputs)."""
INDEX_VERSION = 3
"""Bumped whenever what is cached changes shape."""


def is_test_file(path: str) -> bool:
    """Test modules, conftest.py, and everything under a tests/ or test/ folder (or a
    top-level testing/ folder, pytest's own)."""
    p = PurePosixPath(path)
    folders = p.parts[:-1]
    return (p.name.startswith("test_") or p.name.endswith("_test.py") or p.name == "conftest.py"
            or bool({"tests", "test"} & set(folders)) or folders[:1] == ("testing",))


def module_name(path: str) -> str:
    """The dotted name `path` is imported by (`src/pkg/mod.py` → `pkg.mod`)."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    if len(parts) > 1 and parts[0] in ("src", "lib"):
        parts.pop(0)
    return ".".join(parts)


@dataclass
class RepoIndex:
    """Every Python file of one repository state; the non-test ones cut into units, with BM25
    over those units (test files are cut on demand: `units_of`)."""

    fingerprint: str
    files: dict[str, FileUnits]
    """Every .py file by path (a test file's entry holds no units until `units_of` cuts it)."""
    units: list[Unit]
    """The units of every non-test file, files in path order: what BM25 ranks."""
    bm25: bm25s.BM25 | None
    file_bm25: bm25s.BM25 | None = None
    """BM25 over whole non-test files (a file is its path and its units' words)."""
    file_paths: list[str] = field(default_factory=list)
    """The files `file_bm25` ranks, in its order."""
    modules: dict[str, str] = field(default_factory=dict)
    """Dotted module name → path."""
    by_name: dict[str, list[int]] = field(default_factory=dict)
    """A unit's last name part → the indices of the units so named."""
    by_part: dict[str, list[int]] = field(default_factory=dict)
    """A capitalised part of a unit's name between underscores (`Sum` of `_print_Sum`) → the
    indices of the units whose name has it (names that are the part itself left out)."""
    repo: Path = Path()
    """Where the files are (set on every load; the cached index is the same for any copy)."""

    def unit_scores(self, query_terms: list[str]) -> dict[int, float]:
        """BM25 score of each unit for the query (only those above zero)."""
        if self.bm25 is None or not query_terms:
            return {}
        scores = self.bm25.get_scores(query_terms)
        return {int(k): float(scores[k]) for k in scores.nonzero()[0]}

    def file_scores(self, query_terms: list[str]) -> dict[str, float]:
        """BM25 score of each whole non-test file for the query (only those above zero)."""
        if self.file_bm25 is None or not query_terms:
            return {}
        scores = self.file_bm25.get_scores(query_terms)
        return {self.file_paths[k]: float(scores[k]) for k in scores.nonzero()[0]}

    def units_of(self, path: str) -> list[Unit]:
        """The units of `path` (a test file is cut now); [] for a file not in the index."""
        entry = self.files.get(path)
        if entry is None:
            return []
        if entry.parsed or entry.units:
            return entry.units
        data = _read(self.repo, path)
        if data is not None:
            self.files[path] = entry = _cut_file(path, data)[0]
        return entry.units

    def text_of(self, path: str) -> str | None:
        data = _read(self.repo, path)
        return None if data is None else data.decode("utf-8", errors="replace")


def list_python(repo: Path) -> list[str]:
    """The repository's .py files, repo-relative, sorted, skipping SKIP_DIRS and hidden dirs."""
    found: list[str] = []
    for folder, dirs, names in os.walk(repo):
        rel = Path(folder).relative_to(repo)
        top = rel == Path(".")
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")
                         and not (top and d in SKIP_TOP))
        found += [(rel / n).as_posix() for n in names if n.endswith(".py")]
    return sorted(found)


def _read(repo: Path, rel: str) -> bytes | None:
    try:
        return (repo / rel).read_bytes()
    except OSError:
        return None


def load_index(repo: Path, *, cache: bool = True) -> RepoIndex:
    """The index of `repo` as it is now: from the cache when this exact state was indexed
    before, else built (unchanged files' units from the per-file cache) and cached."""
    contents: dict[str, bytes] = {}
    keys: dict[str, str] = {}
    for rel in list_python(repo):
        data = _read(repo, rel)
        if data is None:
            continue
        contents[rel] = data
        keys[rel] = hashlib.sha1(rel.encode() + b"\0" + data).hexdigest()
    fingerprint = hashlib.sha1(
        f"v{INDEX_VERSION}\n".encode() + "".join(f"{k}\n" for k in keys.values()).encode()
    ).hexdigest()
    found = store.load_index(fingerprint) if cache else None
    if isinstance(found, RepoIndex):
        found.repo = repo
        return found
    gc.disable()  # hundreds of thousands of new objects: collections would rescan them all
    try:
        index = _build(fingerprint, contents, keys, cache)
    finally:
        gc.enable()
    index.repo = repo
    if cache:
        store.save_index(fingerprint, index)
    return index


def _build(fingerprint: str, contents: dict[str, bytes], keys: dict[str, str],
           cache: bool) -> RepoIndex:
    sources = {rel: data for rel, data in contents.items() if not is_test_file(rel)}
    wanted = [keys[rel] for rel in sources]
    cached = store.load_files(wanted) if cache else {}
    fresh = {keys[rel]: _cut_file(rel, data) for rel, data in sources.items()
             if keys[rel] not in cached}
    if cache and fresh:
        store.save_files(fresh)
    entries = {**cached, **fresh}
    files: dict[str, FileUnits] = {}
    units: list[Unit] = []
    corpus: list[list[str]] = []
    file_corpus: list[list[str]] = []
    for rel in sorted(contents):
        if rel not in sources:
            files[rel] = FileUnits(rel, 0, len(contents[rel]), [], [], parsed=False)
            continue
        parsed, unit_terms = entries[keys[rel]]
        files[rel] = parsed
        units += parsed.units
        corpus += unit_terms
        path_terms = terms(rel)  # each unit's words begin with its path's
        file_corpus.append(path_terms + [t for words in unit_terms
                                         for t in words[len(path_terms):]])
    index = RepoIndex(fingerprint, files, units, _bm25(corpus), _bm25(file_corpus),
                      [rel for rel in sorted(contents) if rel in sources])
    index.modules = {module_name(rel): rel for rel in files}
    for k, unit in enumerate(units):
        index.by_name.setdefault(unit.name, []).append(k)
        for part in unit.name.split("_"):
            if part[:1].isupper() and part != unit.name:
                index.by_part.setdefault(part, []).append(k)
    return index


def _cut_file(rel: str, data: bytes) -> tuple[FileUnits, list[list[str]]]:
    """A file's units and each unit's terms (its path and name count as its words too)."""
    text = data.decode("utf-8", errors="replace")
    parsed = cut(rel, text, module_name(rel))
    lines = text.splitlines()
    path_terms = terms(rel)
    words = []
    for unit in parsed.units:
        body = "\n".join(lines[unit.start - 1 : unit.end])
        words.append(path_terms + terms(unit.qualname) * 2 + terms(body))
    return parsed, words


def _bm25(corpus: list[list[str]]) -> bm25s.BM25 | None:
    if not corpus:
        return None
    import bm25s  # numpy and bm25s: ~0.2 s, only when an index is built or queried

    model = bm25s.BM25()
    model.index(corpus, show_progress=False)
    return model

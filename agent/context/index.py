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
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ooda.agent.context import graph, store
from ooda.agent.context.units import AST_MAX_CHARS, FileUnits, Unit, cut, imports_of
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
INDEX_VERSION = 4
"""Bumped whenever what is cached changes shape (the per-file entries' keys include it)."""
LARGE_CUT_VERSION = 2
"""Bumped when the cutting of files too large to parse changes (units.AST_MAX_CHARS): only
their per-file entries, and the indexes holding them, are made anew."""
_NAME = re.compile(r"\b[A-Za-z_]\w*")
_LITERAL = re.compile(r"""(?<![\w'"])(['"])(-{0,2}:?[A-Za-z][\w.:-]{2,48})\1""")
"""A string literal that reads as a name: an option (`--import-mode`), a configuration value
(`autodoc_typehints`), a directive or role (`code-block`, `kbd`), a message (`unused-import`)."""
_BASES = re.compile(r"^[ \t]*class[ \t]+\w+[ \t]*\(([^)]*)\)", re.MULTILINE)


def is_test_file(path: str) -> bool:
    """Test modules, conftest.py, and everything under a tests/ or test/ folder (or a
    top-level testing/ folder, pytest's own)."""
    *folders, name = _parts(path)  # strings, not PurePosixPath: called per file, 20,000 times
    return (name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
            or "tests" in folders or "test" in folders or folders[:1] == ["testing"])


def module_name(path: str) -> str:
    """The dotted name `path` is imported by (`src/pkg/mod.py` → `pkg.mod`)."""
    parts = _parts(path)
    dot = parts[-1].rfind(".")
    if 0 < dot < len(parts[-1]) - 1:  # the suffix, as PurePosixPath.with_suffix("") drops it
        parts[-1] = parts[-1][:dot]
    if parts and parts[-1] == "__init__":
        parts.pop()
    if len(parts) > 1 and parts[0] in ("src", "lib"):
        parts.pop(0)
    return ".".join(parts)


def file_of_module(modules: Mapping[str, str], dotted: str) -> str | None:
    """The file of the longest leading part of `dotted` that `modules` (dotted name -> file)
    holds, if any (`pkg.mod.func` -> the file of `pkg.mod`)."""
    parts = dotted.split(".")
    for length in range(len(parts), 0, -1):
        path = modules.get(".".join(parts[:length]))
        if path is not None:
            return path
    return None


def _parts(path: str) -> list[str]:
    """A repository-relative path's parts, as PurePosixPath(path).parts has them."""
    return [part for part in path.split("/") if part and part != "."] or [""]


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
    by_literal: dict[str, list[int]] = field(default_factory=dict)
    """A name-like string literal (`--import-mode`, `autodoc_typehints`, `unused-import`) →
    the indices of the units that hold it: how a project registers the names its users and
    its documentation speak of."""
    graph: graph.Graph | None = None
    """Who uses, calls and subclasses whom, between units (agent/context/graph.py)."""
    test_bm25: bm25s.BM25 | None = None
    """BM25 over whole test files (their identifiers and path)."""
    test_paths: list[str] = field(default_factory=list)
    """The files `test_bm25` ranks, in its order."""
    repo: Path = Path()
    """Where the files are (set on every load; the cached index is the same for any copy)."""
    contents: dict[str, bytes] = field(default_factory=dict)
    """Every file's bytes as read on this load (not cached): for exact searches."""

    def units_in_file(self, path: str) -> range:
        """The indices of `path`'s units in `units` (empty for a test or unknown file)."""
        spans: dict[str, range] | None = self.__dict__.get("_spans")
        if spans is None:  # units are grouped by file; computed once per load, not cached
            spans = {}
            start = 0
            for k in range(1, len(self.units) + 1):
                if k == len(self.units) or self.units[k].path != self.units[start].path:
                    spans[self.units[start].path] = range(start, k)
                    start = k
            self.__dict__["_spans"] = spans
        return spans.get(path, range(0))

    def find(self, text: str, limit: int) -> list[tuple[str, int]]:
        """(path, line) of the non-test files holding `text`, at most `limit` files (none
        when more hold it: then it says nothing)."""
        needle = text.encode()
        found: list[tuple[str, int]] = []
        for path, data in self.contents.items():
            at = data.find(needle)
            if at < 0 or is_test_file(path):
                continue
            if len(found) == limit:
                return []
            found.append((path, data.count(b"\n", 0, at) + 1))
        return found

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

    def test_scores(self, query_terms: list[str]) -> dict[str, float]:
        """BM25 score of each test file for the query (only those above zero)."""
        if self.test_bm25 is None or not query_terms:
            return {}
        scores = self.test_bm25.get_scores(query_terms)
        return {self.test_paths[k]: float(scores[k]) for k in scores.nonzero()[0]}

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
    return sorted(_walk_python(repo))


def more_python_than(repo: Path, limit: int) -> bool:
    """Whether the repository has more than `limit` .py files (walks no further than that)."""
    return any(k == limit for k, _ in enumerate(_walk_python(repo)))


def _walk_python(repo: Path) -> Iterator[str]:
    root = os.fspath(repo).rstrip(os.sep) or os.sep
    for folder, dirs, names in os.walk(root):
        rel = folder[len(root):].lstrip(os.sep).replace(os.sep, "/")  # strings: 20,000 files
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")
                         and not (not rel and d in SKIP_TOP))
        prefix = f"{rel}/" if rel else ""
        yield from (prefix + n for n in names if n.endswith(".py"))


def _read(repo: Path, rel: str) -> bytes | None:
    try:
        return (repo / rel).read_bytes()
    except OSError:
        return None


def load_index(repo: Path, *, cache: bool = True, paths: list[str] | None = None) -> RepoIndex:
    """The index of `repo` as it is now (of only `paths` when given: agent/context/quick.py):
    from the cache when this exact state was indexed before, else built (unchanged files'
    units from the per-file cache) and cached."""
    contents: dict[str, bytes] = {}
    keys: dict[str, str] = {}
    for rel in list_python(repo) if paths is None else paths:
        data = _read(repo, rel)
        if data is None:
            continue
        contents[rel] = data
        large = f".{LARGE_CUT_VERSION}" if len(data) > AST_MAX_CHARS else ""
        keys[rel] = hashlib.sha1(
            f"v{INDEX_VERSION}{large}\0{rel}\0".encode() + data).hexdigest()
    fingerprint = hashlib.sha1(
        f"v{INDEX_VERSION}\n".encode() + "".join(f"{k}\n" for k in keys.values()).encode()
    ).hexdigest()
    found = store.load_index(fingerprint) if cache else None
    if isinstance(found, RepoIndex):
        found.repo = repo
        found.contents = contents
        return found
    gc.disable()  # hundreds of thousands of new objects: collections would rescan them all
    try:
        index = _build(fingerprint, contents, keys, cache)
    finally:
        gc.enable()
    index.repo = repo
    if cache:
        store.save_index(fingerprint, index)
    index.contents = contents  # read anyway to fingerprint them; never cached
    return index


def _build(fingerprint: str, contents: dict[str, bytes], keys: dict[str, str],
           cache: bool) -> RepoIndex:
    wanted = list(keys.values())
    cached = store.load_files(wanted) if cache else {}
    fresh: dict[str, Any] = {}
    for rel, data in contents.items():
        if keys[rel] not in cached:
            fresh[keys[rel]] = (_test_entry(rel, data) if is_test_file(rel)
                                else _cut_file(rel, data))
    if cache and fresh:
        store.save_files(fresh)
    entries = {**cached, **fresh}
    files: dict[str, FileUnits] = {}
    units: list[Unit] = []
    corpus: list[list[str]] = []
    file_corpus: list[list[str]] = []
    refs: list[list[str]] = []
    literals: list[list[str]] = []
    bases: dict[int, list[str]] = {}
    test_corpus: list[list[str]] = []
    test_paths: list[str] = []
    for rel in sorted(contents):
        entry = entries[keys[rel]]
        if is_test_file(rel):
            imports, words = entry
            files[rel] = FileUnits(rel, 0, len(contents[rel]), [], imports, parsed=False)
            test_corpus.append(words)
            test_paths.append(rel)
            continue
        parsed, unit_terms, unit_refs, unit_literals, unit_bases = entry
        files[rel] = parsed
        for k, found in unit_bases.items():
            bases[len(units) + k] = found
        units += parsed.units
        corpus += unit_terms
        refs += unit_refs
        literals += unit_literals
        path_terms = terms(rel)  # each unit's words begin with its path's
        file_corpus.append(path_terms + [t for words in unit_terms
                                         for t in words[len(path_terms):]])
    index = RepoIndex(fingerprint, files, units, _bm25(corpus), _bm25(file_corpus),
                      [rel for rel in sorted(contents) if not is_test_file(rel)])
    index.modules = {module_name(rel): rel for rel in files}
    for k, unit in enumerate(units):
        index.by_name.setdefault(unit.name, []).append(k)
        for part in unit.name.split("_"):
            if part[:1].isupper() and part != unit.name:
                index.by_part.setdefault(part, []).append(k)
        for literal in literals[k]:
            index.by_literal.setdefault(literal, []).append(k)
    index.graph = graph.build(
        units, refs, {rel: f.imports for rel, f in files.items() if f.parsed}, bases,
        {rel: module_name(rel) for rel in files})
    index.test_bm25 = _bm25(test_corpus)
    index.test_paths = test_paths
    return index


def _cut_file(rel: str, data: bytes) -> tuple[
        FileUnits, list[list[str]], list[list[str]], list[list[str]], dict[int, list[str]]]:
    """A file's units, and for each unit its terms (its path and name count as its words
    too), the names it uses, its name-like string literals; a class unit's base names."""
    text = data.decode("utf-8", errors="replace")
    parsed = cut(rel, text, module_name(rel))
    lines = text.splitlines()
    path_terms = terms(rel)
    words: list[list[str]] = []
    refs: list[list[str]] = []
    literals: list[list[str]] = []
    bases: dict[int, list[str]] = {}
    for k, unit in enumerate(parsed.units):
        body = "\n".join(lines[unit.start - 1 : unit.end])
        words.append(path_terms + terms(unit.qualname) * 2 + terms(body))
        refs.append(sorted(set(_NAME.findall(body)) - {unit.name}))
        literals.append(sorted({m.group(2) for m in _LITERAL.finditer(body)}))
        if unit.kind == "class":
            found = _BASES.search(body)
            if found:
                bases[k] = [part.strip().rsplit(".", 1)[-1] for part in found.group(1).split(",")
                            if part.strip() and "=" not in part]
    return parsed, words, refs, literals, bases


def _test_entry(rel: str, data: bytes) -> tuple[list[str], list[str]]:
    """A test file's imports, and its words for test_bm25: its path and each distinct
    identifier's terms (a test names the code it exercises; how often matters little)."""
    text = data.decode("utf-8", errors="replace")
    names = sorted(set(_NAME.findall(text)))
    return (imports_of(text, module_name(rel), rel.endswith("__init__.py")),
            terms(rel) + [t for name in names for t in terms(name)])


def _bm25(corpus: list[list[str]]) -> bm25s.BM25 | None:
    if not corpus:
        return None
    import bm25s  # numpy and bm25s: ~0.2 s, only when an index is built or queried

    model = bm25s.BM25()
    model.index(corpus, show_progress=False)
    return model

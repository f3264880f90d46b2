"""Ranking without a model: which files and which units of them a task is about.

Each unit's score adds up what points at it: its BM25 score over the task's terms (scaled so
the best unit scores 1), its name used in the task's code (an identifier that names few units
counts more than one that names many), a dotted name of the task that ends in its qualified
name, a traceback frame inside it. A file's score is its best unit's, plus what points at the
file itself: BM25 over whole files, its path named or in a traceback frame, its module's
dotted name used (in full, or its last parts as written inside its package: `ascii.rst`), a
hint (the failing tests a user named: the files they import); a file in a folder of
documentation, examples or benchmarks keeps half its score. Then structure: the units the top
units call (in their own file or a file they import) get a share of their score.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ooda.agent.context.clues import Clues, Frame
from ooda.agent.context.graph import pagerank
from ooda.agent.context.index import RepoIndex, is_test_file
from ooda.agent.context.testhints import clue_tests
from ooda.agent.context.units import Unit

W_NAME = 0.8
"""An identifier of the task's code that names a unit (scaled down by how many it names)."""
W_NAME_PART = 0.5
"""A class-like identifier of the task's code that is a part of a unit's name."""
W_DOTTED = 1.2
"""A dotted name of the task that ends in the unit's qualified name."""
W_FRAME = 1.5
"""A traceback frame in the unit."""
W_PATH = 1.0
"""The file's path named in the task."""
W_FRAME_FILE = 0.8
"""A traceback frame in the file (the innermost frames of the repository's own code count)."""
FRAME_DECAY = 0.7
"""Each frame further out counts this much of the one inside it."""
W_MODULE = 0.8
"""The file's module named by a dotted name of the task."""
W_HINT = 0.6
"""A file a hint points at (imported by the failing tests a user named)."""
W_FILE_BM25 = 0.5
"""BM25 of the whole file (scaled so the best file scores 1): a file whose words match the
task's as a whole, though no single unit of it stands out."""
W_FILE_UNITS = 0.35
"""How much of a file's score its second and third best units add (a file with several
relevant units beats one with a single lucky one)."""
W_LITERAL = 0.8
"""A word of the task that a unit holds as a string literal (a registered name: an option,
a configuration value, a directive, a message), scaled down by how many units hold it."""
MAX_LITERAL_UNITS = 30
"""A literal held by more units than this says nothing."""
W_MESSAGE = 1.0
"""A unit that holds the fixed part of an error or warning message the task quotes."""
MESSAGE_FILES = 3
"""A message found in more files than this says nothing."""
W_TESTS = 0.5
"""A source file the test files best matching the task point at (agent/context/testhints.py)."""
W_GRAPH = 0.5
"""What the reference graph's personalised PageRank from the task's units adds (scaled so
the best unit it reaches gets this; agent/context/graph.py)."""
GRAPH_SEEDS = 30
"""The best units the PageRank starts from."""
W_NEIGHBOUR = 0.3
"""The share of a top unit's score its callees get (halved)."""
TOP_FOR_STRUCTURE = 5
AUXILIARY = frozenset({"doc", "docs", "example", "examples", "bench", "benchmark",
                       "benchmarks", "asv_bench", "release", "script", "scripts", "tools",
                       "bin", "ci", "_vendor", "vendor", "extern", "externals"})
"""Folders of code that documents, demonstrates, measures, releases or maintains the project,
or that copies another project's (vendored): a fix is rarely there, and their prose-rich files
match a task's words well."""
W_AUXILIARY = 0.5
"""What a file in such a folder keeps of its score."""


@dataclass
class Ranking:
    """Files and units, best first, with their scores."""

    files: list[tuple[str, float]] = field(default_factory=list)
    units: dict[int, float] = field(default_factory=dict)
    """Index into RepoIndex.units → score (units with no evidence are absent)."""
    terms: list[str] = field(default_factory=list)
    """The task's terms the ranking matched (what picks the parts of a long unit to show)."""

    def units_in(self, index: RepoIndex, path: str) -> list[tuple[Unit, float]]:
        """The scored units of `path`, best first."""
        found = [(index.units[k], s) for k, s in self.units.items()
                 if index.units[k].path == path]
        return sorted(found, key=lambda pair: -pair[1])


def rank(index: RepoIndex, clues: Clues, hint_files: list[str] | None = None) -> Ranking:
    """Files and units of `index` ranked by `clues` (and the files a hint points at)."""
    units: dict[int, float] = defaultdict(float)
    bm25 = index.unit_scores(clues.terms)
    top = max(bm25.values(), default=0.0)
    if top > 0:
        for k, score in bm25.items():
            units[k] += score / top
    file_bonus: dict[str, float] = defaultdict(float)
    whole = index.file_scores(clues.terms)
    best_file = max(whole.values(), default=0.0)
    for path, score in whole.items():
        file_bonus[path] += W_FILE_BM25 * score / best_file
    _names(index, clues, units)
    _literals(index, clues, units)
    _messages(index, clues, units)
    _dotted(index, clues, units, file_bonus)
    _frames(index, clues.frames, units, file_bonus)
    framed = {f.path for f in clues.frames}
    for path in resolve_paths(index, [p for p in clues.paths if p not in framed]):
        file_bonus[path] += W_PATH
    for path in hint_files or []:
        if path in index.files:
            file_bonus[path] += W_HINT
    for path, share in clue_tests(index, clues.terms).items():
        file_bonus[path] += W_TESTS * share
    _graph(index, units)
    _structure(index, units)
    per_file: dict[str, list[float]] = defaultdict(list)
    for k, score in units.items():
        per_file[index.units[k].path].append(score)
    scores: dict[str, float] = {}
    for path in set(per_file) | set(file_bonus):
        best = sorted(per_file.get(path, []), reverse=True)[:3]
        scores[path] = (best[0] if best else 0.0) + W_FILE_UNITS * sum(best[1:]) / 2
        scores[path] += file_bonus.get(path, 0.0)
        if AUXILIARY & set(PurePosixPath(path).parts[:-1]):
            scores[path] *= W_AUXILIARY
    files = sorted(((p, s) for p, s in scores.items() if not is_test_file(p)),
                   key=lambda pair: (-pair[1], pair[0]))
    return Ranking(files, dict(units), list(clues.terms))


def _specificity(count: int) -> float:
    """1 for a name one unit has, less for a name shared by many."""
    return 1.0 / (1.0 + math.log(count)) if count else 0.0


def _names(index: RepoIndex, clues: Clues, units: dict[int, float]) -> None:
    """Units named in the task's code; and, for a class-like name (`Sum`), the units named
    after it by a convention (`_print_Sum`, `visit_Sum`, `_eval_Sum_rewrite`)."""
    for name in clues.code_names:
        found = index.by_name.get(name, [])
        if found and not name.startswith("<"):
            weight = W_NAME * _specificity(len(found))
            for k in found:
                units[k] += weight
        if name[:1].isupper() and len(name) >= 3:
            derived = index.by_part.get(name, [])
            weight = W_NAME_PART * _specificity(len(derived))
            for k in derived:
                units[k] += weight


def _literals(index: RepoIndex, clues: Clues, units: dict[int, float]) -> None:
    """Units that hold a word of the task as a string literal."""
    for word in clues.written:
        found = index.by_literal.get(word, [])
        if 0 < len(found) <= MAX_LITERAL_UNITS:
            weight = W_LITERAL * _specificity(len(found))
            for k in found:
                units[k] += weight


def _messages(index: RepoIndex, clues: Clues, units: dict[int, float]) -> None:
    """The units that hold a message the task quotes (where it is raised or warned)."""
    for message in clues.messages:
        for path, line in index.find(message, MESSAGE_FILES):
            for k in index.units_in_file(path):
                unit = index.units[k]
                if unit.start <= line <= unit.end:
                    units[k] += W_MESSAGE


def _graph(index: RepoIndex, units: dict[int, float]) -> None:
    """What the reference graph adds to the units near the best ones."""
    if index.graph is None:
        return
    seeds = dict(sorted(units.items(), key=lambda pair: -pair[1])[:GRAPH_SEEDS])
    for k, score in pagerank(index.graph, seeds).items():
        units[k] += W_GRAPH * score


def _dotted(index: RepoIndex, clues: Clues, units: dict[int, float],
            file_bonus: dict[str, float]) -> None:
    tails = _module_tails(index)
    for name in clues.dotted:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):  # the longest prefix that is a module
            path = index.modules.get(".".join(parts[:cut]))
            if path is not None:
                file_bonus[path] += W_MODULE
                rest = ".".join(parts[cut:])
                if rest:
                    for unit_k in _qualified(index, rest, path):
                        units[unit_k] += W_DOTTED
                break
            # a module written from within its package (`ascii.rst` of `astropy.io.ascii`)
            written = tails.get(".".join(parts[:cut]), []) if cut >= 2 else []
            if written:
                for path in written:
                    file_bonus[path] += W_MODULE * _specificity(len(written))
                break
        else:
            for start in range(1, len(parts) - 1 + 1):  # `xr.Dataset.merge` → `Dataset.merge`
                tail = ".".join(parts[start:])
                found = _qualified(index, tail, None)
                if found and len(parts) - start >= 2:
                    weight = W_DOTTED * _specificity(len(found))
                    for unit_k in found:
                        units[unit_k] += weight
                    break


def _module_tails(index: RepoIndex) -> dict[str, list[str]]:
    """The last two or more parts of each module's dotted name → the modules' files (the
    whole name left out: `index.modules` has it)."""
    tails: dict[str, list[str]] = defaultdict(list)
    for module, path in index.modules.items():
        parts = module.split(".")
        for start in range(1, len(parts) - 1):
            tails[".".join(parts[start:])].append(path)
    return tails


def _qualified(index: RepoIndex, qualname: str, path: str | None) -> list[int]:
    """Units whose qualified name is `qualname` or ends with `.qualname` (in `path`)."""
    last = qualname.rsplit(".", 1)[-1]
    return [k for k in index.by_name.get(last, [])
            if (path is None or index.units[k].path == path)
            and (index.units[k].qualname == qualname
                 or index.units[k].qualname.endswith("." + qualname))]


def resolve_paths(index: RepoIndex, written: list[str]) -> list[str]:
    """The repository files the written paths name: the file whose path is the longest suffix
    of the written one (`/usr/lib/python3/site-packages/pkg/mod.py` → `pkg/mod.py`); a bare
    file name counts only when one file has it."""
    found: list[str] = []
    by_base: dict[str, list[str]] = defaultdict(list)
    for path in index.files:
        by_base[PurePosixPath(path).name].append(path)
    for text in written:
        parts = PurePosixPath(text.replace("\\", "/")).parts
        candidates = by_base.get(parts[-1], []) if parts else []
        best: str | None = None
        best_len = 0
        for cand in candidates:
            cand_parts = PurePosixPath(cand).parts
            common = 0
            while (common < min(len(parts), len(cand_parts))
                   and parts[-1 - common] == cand_parts[-1 - common]):
                common += 1
            if common > best_len:
                best, best_len = cand, common
        if best is not None and (best_len >= 2 or len(candidates) == 1):
            if best not in found:
                found.append(best)
    return found


def _frames(index: RepoIndex, frames: list[Frame], units: dict[int, float],
            file_bonus: dict[str, float]) -> None:
    """Frames of the repository's own files: the file and the unit holding the frame's line
    (or named by its function)."""
    resolved = [(resolve_paths(index, [f.path]), f) for f in frames]
    own = [(paths[0], f) for paths, f in resolved if paths]
    best: dict[str, float] = {}
    for depth, (path, frame) in enumerate(reversed(own)):
        weight = FRAME_DECAY ** depth  # the innermost frames matter most
        best[path] = max(best.get(path, 0.0), weight)
        if is_test_file(path):
            continue
        for k in index.by_name.get(frame.function or "", []):
            if index.units[k].path == path:
                units[k] += W_FRAME * weight
    for path, weight in best.items():
        file_bonus[path] += W_FRAME_FILE * weight


def _structure(index: RepoIndex, units: dict[int, float]) -> None:
    """The callees of the top units share their score (by name: a callee is a unit the top
    unit's text calls, in its own file or a file it imports)."""
    top = sorted(units.items(), key=lambda pair: -pair[1])[:TOP_FOR_STRUCTURE]
    for k, score in top:
        unit = index.units[k]
        text = index.text_of(unit.path)
        if text is None:
            continue
        body = "\n".join(text.splitlines()[unit.start - 1 : unit.end])
        imported = set(index.files[unit.path].imports)
        for name in _called(body) - {unit.name}:
            for other in index.by_name.get(name, [])[:20]:
                target = index.units[other]
                if target.path == unit.path or module_of(target.path, index) in imported:
                    units[other] += W_NEIGHBOUR * score / 2


def _called(body: str) -> set[str]:
    import re

    return set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", body))


def module_of(path: str, index: RepoIndex) -> str:
    from ooda.agent.context.index import module_name

    return module_name(path)

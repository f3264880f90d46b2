"""Which files of a very large repository the first prompt's index covers.

Indexing every file (agent/context/index.py) costs about a millisecond a file before the
cache knows them: 20 s at 20,000 files, so a new repository's first prompt would wait for it.
Above QUICK_MIN_FILES (5,000) Python files the index covers instead the files the task's
words point at: those the statement names (paths, modules, traceback frames), the visible tests and the
modules they import or are named after, and the QUICK_FILES files that best match the
statement's names and terms, found by one `git grep` over the repository (a scan in Python
where git cannot), scored like BM25 would weigh them (rare words count most). The same
ranking then runs on that index (rank.py, present.py): `ooda prompt` and a run choose alike,
since both call this with the same task. Followed: Aider's repository map and Agentless's
localisation, which both narrow a large repository by the issue's words before ranking.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import subprocess
import threading
from collections import defaultdict
from concurrent.futures import Future
from pathlib import Path, PurePosixPath

from ooda.agent.context.clues import Clues, read_clues
from ooda.agent.context.index import file_of_module, is_test_file, module_name
from ooda.agent.context.units import imports_of
from ooda.agent.context.words import STOP, terms

QUICK_MIN_FILES = 5000
"""A repository with more Python files than this is indexed in part (the largest repository
of the context benchmark, pylint, has 2,400: none of them is); OODA_CONTEXT_QUICK_FILES
sets another limit (read when asked: a daemon's command gets its client's environment)."""
QUICK_FILES = 400
"""The best matching files indexed, beside those the task names."""
GREP_TIMEOUT_S = 60.0
AHEAD_WAIT_S = 120.0
"""Longest the prompt waits for the files being chosen ahead before choosing them itself."""
MIN_TERM = 3
"""Shorter terms match too much to say anything."""
_WEIGHT_MESSAGE, _WEIGHT_NAME, _WEIGHT_WORD = 4.0, 2.0, 1.0


_AHEAD: dict[tuple[str, str], Future[list[str]]] = {}
"""The files the statement points at, chosen ahead (`choose_ahead`), by repository and
statement."""
_AHEAD_LOCK = threading.Lock()


def choose_ahead(repo: Path, statement: str, tests: list[str]) -> None:
    """Choose the files the statement points at, and cache the index of those with `tests`'
    part, in a thread of this process, so that the prompt that asks next (`task_paths`) finds
    them ready: a run does this while it checks its endpoint (agent/context/warm.py). The
    visible tests' part is added when the prompt asks (a run given only a test command learns
    its failing tests from the unpatched code's run)."""
    key = (os.fspath(repo), statement)
    with _AHEAD_LOCK:
        if key in _AHEAD:
            return
        future: Future[list[str]] = Future()
        _AHEAD[key] = future

    def work() -> None:
        from ooda.agent.context.index import list_python, load_index

        try:
            paths = list_python(repo)
            part = statement_paths(repo, paths, read_clues(statement))
            future.set_result(part)
            # into the cache: the prompt reads it back (its files' units, if the tests differ)
            load_index(repo, paths=sorted({*part, *test_paths(repo, paths, tests)}))
        except BaseException as exc:  # the prompt then chooses by itself
            if not future.done():
                future.set_exception(exc)

    threading.Thread(target=work, name="ooda-context-ahead", daemon=True).start()


def task_paths(repo: Path, paths: list[str], statement: str, tests: list[str]) -> list[str]:
    """`quick_paths` for a task, the statement's part taken from `choose_ahead` when it ran
    (the same result)."""
    with _AHEAD_LOCK:
        ahead = _AHEAD.pop((os.fspath(repo), statement), None)
    part: list[str] | None = None
    if ahead is not None:
        with contextlib.suppress(Exception):
            part = ahead.result(AHEAD_WAIT_S)
    if part is None:
        part = statement_paths(repo, paths, read_clues(statement))
    return sorted({*part, *test_paths(repo, paths, tests)})


def min_files() -> int:
    """More Python files than this are indexed in part."""
    try:
        return int(os.environ.get("OODA_CONTEXT_QUICK_FILES", QUICK_MIN_FILES))
    except ValueError:
        return QUICK_MIN_FILES


def is_large(paths: list[str]) -> bool:
    """Too many files to index whole before the first request."""
    return len(paths) > min_files()


def quick_paths(repo: Path, paths: list[str], clues: Clues, tests: list[str]) -> list[str]:
    """The files of `paths` (every Python file of `repo`) the index covers, sorted."""
    return sorted({*statement_paths(repo, paths, clues), *test_paths(repo, paths, tests)})


def statement_paths(repo: Path, paths: list[str], clues: Clues) -> list[str]:
    """The files the text names, and the QUICK_FILES that best match its words."""
    scores = _match_scores(repo, paths, clues)
    best = sorted(scores, key=lambda p: (-scores[p], p))
    return sorted({*named_files(paths, clues), *best[:QUICK_FILES]})


def test_paths(repo: Path, paths: list[str], tests: list[str]) -> list[str]:
    """The visible tests, the modules they import and the sources they are named after."""
    if not tests:
        return []
    modules = {module_name(p): p for p in paths}
    stems: dict[str, list[str]] = defaultdict(list)
    for p in paths:
        stems[p.rsplit("/", 1)[-1].removesuffix(".py")].append(p)
    chosen = set(tests)
    for test in tests:
        chosen |= set(_test_sources(repo, test, modules, stems))
    return sorted(chosen)


def named_files(paths: list[str], clues: Clues) -> list[str]:
    """The files the text names: by path (a suffix of it), by a traceback frame's file, or by a
    dotted module name (its longest prefix that is a module)."""
    found: list[str] = []
    written = [p.lstrip("./") for p in clues.paths] + [f.path.replace("\\", "/")
                                                       for f in clues.frames]
    for path in paths:
        if any(w == path or w.endswith("/" + path) or path.endswith("/" + w) for w in written):
            found.append(path)
    modules = {module_name(p): p for p in paths}
    found.extend(hit for dotted in clues.dotted
                 if (hit := file_of_module(modules, dotted)) is not None)
    return found


def _test_sources(repo: Path, test: str, modules: dict[str, str],
                  stems: dict[str, list[str]]) -> list[str]:
    """The modules a visible test imports, and the sources it is named after."""
    try:
        text = (repo / test).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return []
    found: list[str] = []
    for dotted in imports_of(text, module_name(test), test.endswith("__init__.py")):
        hit = file_of_module(modules, dotted)
        if hit is not None:
            found.append(hit)
    stem = PurePosixPath(test).stem
    name = stem.removeprefix("test_").removesuffix("_test")
    if name != stem:
        found += [p for p in stems.get(name, []) if not is_test_file(p)]
    return found


def needles(clues: Clues) -> dict[str, float]:
    """What to look for in the files, each with its weight: the quoted messages' fixed parts,
    the names the text writes as code (case as written), its other words and terms (any
    case)."""
    found: dict[str, float] = {}
    for message in clues.messages:
        found[message] = _WEIGHT_MESSAGE
    names = set(clues.code_names) | {part for d in clues.dotted for part in d.split(".")}
    for name in names:
        if len(name) >= MIN_TERM and name.lower() not in STOP:
            found.setdefault(name, _WEIGHT_NAME)
    for word in {*clues.prose_names, *clues.terms}:
        if len(word) >= MIN_TERM and word.lower() not in STOP:  # `self`, `the`: everywhere
            found.setdefault(word.lower(), _WEIGHT_WORD)
    return found


def _match_scores(repo: Path, paths: list[str], clues: Clues) -> dict[str, float]:
    """Each file's score: the weight times the rarity (log of files / files holding it) of
    every needle it holds, and of every term of the text its path holds."""
    wanted = needles(clues)
    held = _holdings(repo, paths, list(wanted))
    query = {t for t in clues.terms if len(t) >= MIN_TERM}
    for path in paths:
        low = path.lower()
        in_path = query & set(terms(path)) if any(t in low for t in query) else set()
        if in_path:
            held.setdefault(path, set()).update(f"path:{t}" for t in in_path)
    df: dict[str, int] = defaultdict(int)
    for found in held.values():
        for needle in found:
            df[needle] += 1
    total = len(paths)
    scores: dict[str, float] = {}
    for path, found in held.items():
        scores[path] = sum(
            wanted.get(n, _WEIGHT_NAME) * math.log(1 + total / df[n]) for n in found)
    return scores


def _holdings(repo: Path, paths: list[str], wanted: list[str]) -> dict[str, set[str]]:
    """path → the needles it holds (a word needle in any case, a name or message as
    written)."""
    if not wanted:
        return {}
    matches = _git_grep(repo, wanted)
    if matches is None:
        matches = _scan(repo, paths, wanted)
    known = set(paths)
    credit: dict[str, set[str]] = {}
    held: dict[str, set[str]] = {}
    lowered = [(n, n.lower(), n == n.lower()) for n in wanted]
    for path, text in matches:
        if path not in known:
            continue
        got = credit.get(text)
        if got is None:  # a match may hold other needles (`scale` in `scale_values`)
            low = text.lower()
            got = credit[text] = {n for n, n_low, any_case in lowered
                                  if (n_low in low if any_case else n in text)}
        if got:
            held.setdefault(path, set()).update(got)
    return held


def _git_grep(repo: Path, wanted: list[str]) -> list[tuple[str, str]] | None:
    """(path, matched text) of every match in the repository's Python files, tracked or not;
    None when git cannot search it (not a repository, no git)."""
    args = ["git", "-c", "grep.fallbackToNoIndex=false", "grep", "--untracked", "-I", "-i",
            "-F", "-o", "-z"]
    for needle in wanted:
        args += ["-e", needle]
    try:
        done = subprocess.run([*args, "--", "*.py"], cwd=repo, capture_output=True,
                              timeout=GREP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode not in (0, 1):  # 1: nothing matched
        return None
    found: list[tuple[str, str]] = []
    for line in set(done.stdout.split(b"\n")):  # a word repeats in a file: once is enough
        path, _, text = line.decode("utf-8", errors="replace").partition("\0")
        if text:
            found.append((path, text))
    return found


def _scan(repo: Path, paths: list[str], wanted: list[str]) -> list[tuple[str, str]]:
    """The same as `_git_grep`, in Python (a folder git does not know)."""
    pattern = re.compile("|".join(re.escape(n) for n in sorted(wanted, key=len, reverse=True)),
                         re.IGNORECASE)
    found: list[tuple[str, str]] = []
    for path in paths:
        try:
            text = (repo / path).read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
        found += [(path, m) for m in dict.fromkeys(pattern.findall(text))]
    return found

"""What a repository's own tests say about where code lives: the source a test file is named
after, the modules it imports, and the test files whose words match a task's.

Two uses. The failing tests a user names in `ooda run` point at the code they exercise
(agent/context/choose.py). And for any task, the test files of the repository as it is (the
base: never a benchmark's hidden test patch, which is not in the repository) that speak of
what the task speaks of — `test_latex.py` calling `latex(Subs(...))` for an issue about
printing Subs — point at the sources they are named after and the modules they import from
(`from sympy.printing.latex import latex`): code a statement in users' words may not name.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from ooda.agent.context.index import RepoIndex, file_of_module, is_test_file

MAX_NAMESAKES = 3
"""A test file named after more source files than this names none of them."""
TOP_TESTS = 3
"""The test files that best match a task's words, whose sources are lifted."""
IMPORTED_SHARE = 0.5
"""What a module a matching test imports gets, of what its namesake gets."""


def namesakes_of(index: RepoIndex, test: str) -> list[str]:
    """The source files a test file is named after (`tests/test_rst.py` and
    `tests/rst_test.py` → `pkg/io/rst.py`): the namesakes in the folder nearest the test's,
    when there are few of them."""
    stem = PurePosixPath(test).stem
    name = stem.removeprefix("test_").removesuffix("_test")
    if name == stem or not name or name == "__init__":
        return []
    namesakes = [p for p in _by_stem(index).get(name, []) if not is_test_file(p)]
    if not namesakes or len(namesakes) > MAX_NAMESAKES:
        return []
    folders = set(PurePosixPath(test).parent.parts)
    best = max(len(folders & set(PurePosixPath(p).parent.parts)) for p in namesakes)
    return [p for p in namesakes if len(folders & set(PurePosixPath(p).parent.parts)) == best]


def imported_sources(index: RepoIndex, test: str, *, packages: bool = True) -> list[str]:
    """The repository's source modules a test file imports from (`packages` False: a
    package's own `__init__` left out, as `import xarray as xr` says little of where)."""
    entry = index.files.get(test)  # a test file's imports are read when it is indexed
    found: list[str] = []
    for dotted in entry.imports if entry is not None else []:
        path = module_file(index, dotted)
        if (path is not None and not is_test_file(path) and path not in found
                and (packages or PurePosixPath(path).name != "__init__.py")):
            found.append(path)
    return found


def module_file(index: RepoIndex, dotted: str) -> str | None:
    """The file of the longest prefix of `dotted` that is a module of the repository."""
    return file_of_module(index.modules, dotted)


def clue_tests(index: RepoIndex, query_terms: list[str]) -> dict[str, float]:
    """Source file → how strongly the test files that best match `query_terms` point at it
    (1 for the namesake of the best matching test file)."""
    scores = index.test_scores(query_terms)
    if not scores:
        return {}
    top = sorted(scores.items(), key=lambda pair: -pair[1])[:TOP_TESTS]
    best = top[0][1]
    found: dict[str, float] = {}
    for test, score in top:
        share = score / best
        for path in namesakes_of(index, test):
            found[path] = max(found.get(path, 0.0), share)
        for path in imported_sources(index, test, packages=False):
            found[path] = max(found.get(path, 0.0), share * IMPORTED_SHARE)
    return found


def _by_stem(index: RepoIndex) -> dict[str, list[str]]:
    stems: dict[str, list[str]] = {}
    for path in index.files:
        stems.setdefault(PurePosixPath(path).stem, []).append(path)
    return stems

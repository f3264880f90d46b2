"""What must come from the image, not the workspace: pytest, its built-in plugins, the
distributions pytest requires and the image's own plugins are imported before the workspace
joins sys.path, so that no module of the repository (or of the candidate) can stand in for one
of them. A repository that *is* one of them (pytest-dev/pytest) keeps its own.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Sequence

from . import probes

WATCHED_PACKAGES = ("pytest", "_pytest", "pluggy")
_REQUIREMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_EXTRA = re.compile(r";.*\bextra\s*==")


def preload(toolchain: set[str], plugins: Sequence[str] = (), root: str = "") -> None:
    """Import pytest's built-in plugins, the `toolchain` packages and the image's `plugins` now
    (from the image: the workspace is not on sys.path yet), so that the snapshot covers them
    (a plugin that patches pytest on import is not mistaken for tampering) and no module in
    the workspace can stand in for one that pytest would only import later. Then the probes
    go in place (probes.install: passing asserts of test modules under `root` are probed)."""
    import _pytest.config

    names = [*_pytest.config.essential_plugins, *_pytest.config.default_plugins]
    for name in names:
        try:
            importlib.import_module(f"_pytest.{name}")
        except Exception:  # a plugin this pytest lacks or cannot load: pytest will say
            continue
    for name in [*sorted(toolchain), *plugins]:
        try:
            importlib.import_module(name)
        except Exception:  # an optional dependency not installed (colorama, exceptiongroup)
            continue
    import doctest  # noqa: F401  (watched too: pytest's doctest items check through it)
    import unittest  # its assertions are probed and watched like pytest's
    import unittest.mock  # noqa: F401  (its ANY is a wildcard of the tests, not the candidate's)

    probes.install(root or os.getcwd())


def image_plugins(names: Sequence[str]) -> list[str]:
    """The plugin modules among `names` that live in the image, not in the workspace (a
    repository's own plugin is candidate code: pytest loads it later, with `-p`)."""
    work = os.getcwd() + os.sep
    found = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name.split(".", 1)[0])
        except Exception:
            continue
        origin = getattr(spec, "origin", None) or ""
        locations = list(getattr(spec, "submodule_search_locations", None) or [])
        if spec is not None and not any(str(p).startswith(work) for p in [origin, *locations]):
            found.append(name)
    return found


_remembered: tuple[tuple[str, ...], frozenset[str]] | None = None
"""(sys.path, toolchain_modules()) as the warm interpreter found them before the fork."""


def remember() -> None:
    """In the warm interpreter that forks the runs (agent/sandbox/docker/zygote.py): find the
    toolchain's names once for its sys.path, which each run's sys.path extends by one folder
    in front (the launcher's)."""
    global _remembered
    _remembered = (tuple(sys.path), frozenset(_find()))


def toolchain_modules() -> set[str]:
    """Top-level module names of pytest, pluggy and the distributions pytest requires: as the
    warm interpreter found them when sys.path is its own behind a first folder that holds no
    distribution's metadata (the names then cannot differ), else looked up now."""
    known = _remembered
    if known is not None and sys.path and tuple(sys.path[1:]) == known[0]:
        if not _holds_metadata(sys.path[0]):
            return set(known[1])
    return _find()


def _holds_metadata(folder: str) -> bool:
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return not os.path.isdir(folder or ".")  # a zip or something odd: look it all up
    return any(n.endswith((".dist-info", ".egg-info", ".egg-link", ".egg")) for n in names)


def _find() -> set[str]:
    names = set(WATCHED_PACKAGES)
    if not hasattr(importlib.metadata, "packages_distributions"):
        return names  # (before Python 3.10: pytest's own packages only, as always there)
    try:
        requires = importlib.metadata.distribution("pytest").requires or []
    except Exception:
        return names
    # what pytest needs to run, not its optional extras (`setuptools; extra == "dev"`: pytest
    # never imports them, and preloading setuptools/pkg_resources cost ~0.5 s a cold run)
    wanted = {m.group(0) for r in requires if not _EXTRA.search(r) and (m := _REQUIREMENT.match(r))}
    for requirement in sorted(wanted):
        # only these distributions' files are read (packages_distributions() read every
        # installed one's: ~60 ms of a cold run in a 48-distribution environment)
        try:
            dist = importlib.metadata.distribution(requirement)
            names.update(n for n in _top_level(dist) if n.isidentifier())
        except Exception:  # not installed here (tomli on 3.11, colorama off Windows)
            continue
    return names


def _top_level(dist: importlib.metadata.Distribution) -> set[str]:
    """The top-level modules a distribution provides: its top_level.txt, else the first part
    of each file it installed (as importlib.metadata.packages_distributions reads them)."""
    declared = (dist.read_text("top_level.txt") or "").split()
    if declared:
        return set(declared)
    found = set()
    for path in dist.files or []:
        parts = path.parts
        if len(parts) > 1:
            found.add(parts[0])
        elif parts:
            found.add(inspect.getmodulename(parts[0]) or parts[0])
    return found


def repository_own(names: set[str], changed: list[str]) -> set[str]:
    """The names that the repository itself provides at its top level (cwd): the repository
    *is* that package (pluggy, pygments, or pytest itself, at the top or under src/), and its
    tests must import it, not the image's copy. Decided by what existed before the candidate
    changed anything: a package with a module the candidate did not touch (a fix to its
    `__init__.py` keeps it the repository's), a single-module one left unchanged; a package
    the candidate made whole (all its files changed) stays the image's."""
    own = set()
    untouched = {os.path.normpath(p) for p in changed}
    for name in names:
        for top in ("", "src"):
            module = os.path.join(top, f"{name}.py")
            if os.path.isfile(module) and os.path.normpath(module) not in untouched:
                own.add(name)
            package = os.path.join(top, name)
            if os.path.isfile(os.path.join(package, "__init__.py")) and _has_unchanged(
                package, untouched
            ):
                own.add(name)
    return own


def _has_unchanged(package: str, changed: set[str]) -> bool:
    """Whether a package folder holds a Python module not among `changed` (looked at a few
    hundred files deep at most)."""
    seen = 0
    for folder, dirs, files in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            seen += 1
            if seen > 500:
                return False
            if name.endswith(".py") and os.path.normpath(os.path.join(folder, name)) not in changed:
                return True
    return False

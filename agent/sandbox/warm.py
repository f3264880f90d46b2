"""Packages a sandbox's warm interpreter holds ready: imported once in its command server (the
Docker sandbox's PID 1, agent/sandbox/docker/zygote.py) before any command is forked, so that a
command running a script beside a byte-identical copy of the package does not import it again.

The layers above say which packages: one line each in REGISTERED (the pytest guard), or
`hold` at run time; the sandbox layer only carries them. The sources travel from the host at launch, in the container's
read-only control directory, and PID 1 reads them before it connects back: nothing a command
in the container can write ever reaches PID 1's interpreter. A sandbox started before a
package was held simply does without it (the command then imports its own copy).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping

Sources = Mapping[str, str]
"""A package's modules: file name (`main.py`) -> source text."""

REGISTERED: dict[str, str] = {
    # the pytest guard: about 0.07 s of every guarded test run
    "_ooda_guard": "ooda.verifiers.pytest_check.run:guard_sources",
}
"""Packages every sandbox holds warm: package name -> `module:function` returning its sources,
imported when a sandbox starts (named, not imported here: the sandbox layer imports no layer
above it, as the stage registry names the stages' modules)."""

_held: dict[str, Callable[[], Sources]] = {}
_lock = threading.Lock()


def hold(package: str, sources: Callable[[], Sources]) -> None:
    """Hold `package` warm in every sandbox started from now on; `sources` is called when a
    sandbox starts (read the files then, not at import)."""
    if not package.isidentifier():
        raise ValueError(f"not a package name: {package!r}")
    with _lock:
        _held[package] = sources


def release(package: str) -> None:
    """Stop holding `package` (sandboxes started already keep it)."""
    with _lock:
        _held.pop(package, None)


def held() -> dict[str, dict[str, str]]:
    """The packages held now (the registered ones and those held at run time), each with its
    modules' sources."""
    with _lock:
        makers = {**{name: _registered(at) for name, at in REGISTERED.items()}, **_held}
    return {name: {file: text for file, text in make().items() if _module_file(file)}
            for name, make in sorted(makers.items())}


def _module_file(name: str) -> bool:
    stem, dot, suffix = name.partition(".")
    return bool(dot) and suffix == "py" and stem.isidentifier()


def _registered(at: str) -> Callable[[], Sources]:
    """The function a REGISTERED line names (`module:function`)."""
    module, _, function = at.partition(":")
    found: Callable[[], Sources] = getattr(importlib.import_module(module), function)
    return found

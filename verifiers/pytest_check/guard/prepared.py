"""pytest's first configuration step done once in the warm interpreter, not in every run.

`pytest.main` starts with `get_config`: a plugin manager, the config with its option parser,
and pytest's built-in plugins imported and registered, each answering the historic hooks
(their options added). None of it reads the workspace (conftest files, ini files, installed
and named plugins, PYTEST_ADDOPTS come after it, in `pytest_cmdline_parse`): it is the same
for every run of a task (bench/failing_verification: 2-10 % of a failing run's container CPU).
The Docker sandbox's warm interpreter (agent/sandbox/docker/zygote.py) calls `prepare()`
through the package's `__fresh__`, before any fork and after it froze its heap (the
configuration's objects stay visible to the run's `gc.get_objects`, as a fresh one's are); a
run forked from it uses that configuration once, in place of the one `get_config` would
build, only when the inputs `get_config` reads are those it was made with: the same `-p
no:NAME` arguments (read by pytest's own parsing), the same `prog`, the same environment (but
for the variables pytest reads only after `get_config`), and the same pytest. Then it sets
the invocation's arguments, plugins and directory, as `get_config` does. Everything after it
(`pytest_cmdline_parse`: rootdir, ini files, conftest files, plugins, the arguments) runs from
scratch in every run, so a candidate that changes a conftest file, pytest's configuration or
a plugin is configured as a fresh pytest would be.

`main` runs pytest's own `main`, `_main` and `_prepareconfig` (their code objects, unchanged),
with only `get_config` resolved to `_taken`; nothing of pytest is modified. Anywhere else (a
fresh interpreter: bwrap, local; another pytest whose `get_config` differs) `main` is
`pytest.main`.
"""

from __future__ import annotations

import inspect
import os
import pathlib
import types
from typing import Any

PREPARED_ARGS = ("-p", "no:cacheprovider")
"""The arguments `get_config` reads from every guarded run's (verifiers/pytest_check/run.py
blocks pytest's cache); any other `-p no:` set gets a configuration of its own."""
PROG = "pytest.main()"
"""What pytest.main passes as `prog` (pytest 9); a pytest whose get_config takes no prog
gets none."""
AFTER_GET_CONFIG = frozenset({
    "PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS", "PYTEST_VERSION",
    "PYTEST_CURRENT_TEST",
})
"""Environment variables pytest reads only after `get_config` (or sets itself): they may
differ between the preparation and the run."""


class _Prepared:
    """A configuration `get_config` returned in the warm interpreter, and what it read."""

    def __init__(self, config: Any, blocks: tuple[str, ...], options: dict[str, Any],
                 environ: dict[str, str]) -> None:
        self.config = config
        self.blocks = blocks
        self.options = options
        self.environ = environ


_ready: _Prepared | None = None
used = False
"""Whether this process's run took the prepared configuration (for the tests)."""


class _PluginArgs:
    """Stands in for pytest's plugin manager while its own `consider_preparse` reads the
    arguments: the `-p` values it would act on, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def consider_pluginarg(self, arg: str) -> None:
        self.seen.append(arg)


def _blocks(config_module: Any, args: Any) -> tuple[str, ...] | None:
    """The `-p no:NAME` values `get_config` acts on in `args`, by pytest's own parsing (None:
    not readable so)."""
    try:
        recorder = _PluginArgs()
        config_module.PytestPluginManager.consider_preparse(recorder, args, exclude_only=True)
    except Exception:
        return None
    return tuple(recorder.seen)


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in AFTER_GET_CONFIG}


_KNOWN_SHAPE = ("Path.cwd()", "consider_preparse(", "exclude_only=True", "import_plugin(spec)")
"""What get_config's source says in every pytest from 6.2 to 9.2 (the invocation's directory is
the current one, `-p no:` read, the built-in plugins imported): the ones `_taken` stands in for."""
_shape_known: bool | None = None


def _options(get_config: Any) -> dict[str, Any] | None:
    """The keyword arguments pytest.main passes get_config (None: a get_config not known)."""
    global _shape_known
    if _shape_known is None:
        try:
            source = inspect.getsource(get_config)
        except (OSError, TypeError):
            source = ""
        _shape_known = all(part in source for part in _KNOWN_SHAPE)
    if not _shape_known:
        return None
    try:
        names = list(inspect.signature(get_config).parameters)
    except (TypeError, ValueError):
        return None
    if names == ["args", "plugins", "prog"]:
        return {"prog": PROG}
    if names == ["args", "plugins"]:
        return {}
    return None


def drop() -> None:
    """Let the prepared configuration go (before the warm interpreter freezes its heap)."""
    global _ready
    _ready = None


def prepare() -> None:
    """In the warm interpreter, before any fork: run `get_config` once for the guarded runs'
    arguments (nothing when it is done, or pytest's is not one this module knows)."""
    global _ready
    if _ready is not None:
        return
    try:
        import _pytest.config as config_module
        import pytest
    except ImportError:
        return
    if pytest.main is not config_module.main:
        return
    options = _options(config_module.get_config)
    blocks = _blocks(config_module, list(PREPARED_ARGS))
    if options is None or blocks is None:
        return
    try:
        config = config_module.get_config(list(PREPARED_ARGS), None, **options)
        params = config.invocation_params
        type(params)(args=params.args, plugins=params.plugins, dir=params.dir)
    except Exception:  # this pytest cannot be prepared: every run configures itself
        return
    _ready = _Prepared(config, blocks, options, _environ())


def main(args: list[str], plugins: list[Any]) -> Any:
    """`pytest.main(args, plugins=plugins)`, taking the prepared configuration when it fits."""
    global _ready
    ready, _ready = _ready, None  # once: a configuration serves one run
    import _pytest.config as config_module
    import pytest

    if ready is None or pytest.main is not config_module.main:
        return pytest.main(args, plugins=plugins)
    real = config_module.get_config

    def _taken(args: Any = None, plugins: Any = None, **options: Any) -> Any:
        """get_config for this run: the prepared configuration when what get_config would read
        is what it was made with, else get_config itself."""
        global used
        if (used or options != ready.options or _blocks(config_module, args or ()) != ready.blocks
                or _environ() != ready.environ):
            return real(args, plugins, **options)
        used = True
        config = ready.config
        params = type(config.invocation_params)
        config.invocation_params = params(args=args or (), plugins=plugins,
                                          dir=pathlib.Path.cwd())
        return config

    scope = dict(vars(config_module))
    for name in ("main", "_main", "_prepareconfig"):
        function = scope.get(name)
        if isinstance(function, types.FunctionType):
            copy = types.FunctionType(function.__code__, scope, function.__name__,
                                      function.__defaults__, function.__closure__)
            copy.__kwdefaults__ = function.__kwdefaults__
            scope[name] = copy
    scope["get_config"] = _taken
    return scope["main"](args, plugins=plugins)

"""The hook implementations pytest calls, by identity and time: every plugin is judged when it
is registered (the guard's `pytest_plugin_registered`, called inside the registration): it is
approved when every frame on the stack at that moment is trusted code (pytest loading a
conftest or a `-p` plugin, a conftest's `pytest_configure` registering its own); then each of
its hook implementations is recorded with the function it calls, whose code must be trusted
too. At every check, each implementation pytest would call must be one recorded that way and
still call the same function; pluggy's own dispatch (the plugin manager's `_inner_hookexec`,
each hook caller's `_hookexec`, the hook relay) must be the objects it was at configure time.

A plugin the code under test registers, by any route (`pluginmanager.register` found through
`gc`, pluggy's base `register` that skips pytest's notification, a HookImpl appended by hand,
an implementation's `function` swapped), is caught whatever file its functions claim to come
from and whatever they are (callables with no code included).
"""

from __future__ import annotations

import itertools
import operator
import os
import sys
from typing import Any

from .trust import Judge

_getframe = sys._getframe
_chain = itertools.chain.from_iterable  # bound now: the code under test may patch them later
_is = operator.is_
_impls = operator.methodcaller("get_hookimpls")
_function = operator.attrgetter("function")
_hookexec = operator.attrgetter("_hookexec")


class HookWatch:
    """Approved plugins, their recorded implementations, pluggy's dispatch objects."""

    def __init__(self, judge: Judge, guard: object) -> None:
        self.judge = judge
        self.guard = guard
        self.approved: dict[int, object] = {}
        """id(plugin) -> plugin (held, so that the id stays its own)."""
        self.impls: dict[int, tuple[Any, object]] = {}
        """id(hook implementation) -> (the implementation, the function it called)."""
        self.runner_packages: set[str] = set()
        self._pm: Any = None
        self._config: Any = None
        self._config_hook: Any = None
        self._relay: Any = None
        self._inner: object = None
        self._hookexecs: dict[str, object] = {}
        self._seen: tuple[object, ...] = ()
        """The dispatch state the last full look went over (see _unchanged)."""

    # ------------------------------------------------------------------ registration

    def registered(self, plugin: object, manager: Any) -> list[str]:
        """Judge a plugin being registered (called from within the registration); the
        problems found."""
        if plugin is self.guard:
            self._record(plugin, manager)
            return []
        provenance = self.judge.provenance
        if provenance.enabled and not self._registration_trusted(_getframe(1)):
            impls = self._impls_of(plugin, manager)
            for _name, impl in impls:
                self.impls[id(impl)] = (impl, impl.function)  # said once, here
            name = manager.get_name(plugin) if hasattr(manager, "get_name") else None
            problems = [
                f"{self.judge.where(impl.function)} registers a pytest hook ({hook}) at run "
                "time (the code under test registered its plugin)"
                for hook, impl in impls
            ]
            return problems or [f"the code under test registered a pytest plugin ({name})"]
        impls = self._record(plugin, manager)
        return [
            f"{self.judge.where(impl.function)} registers a pytest hook ({name}) at run time"
            for name, impl in impls
            if not self._runner_own(impl.function)
            and self.judge.untrusted_function(impl.function)
        ]

    def _record(self, plugin: object, manager: Any) -> list[tuple[str, Any]]:
        """Approve `plugin` and record its hook implementations (returned: one walk over the
        hook callers per registration)."""
        self.approved[id(plugin)] = plugin
        impls = self._impls_of(plugin, manager)
        for _name, impl in impls:
            self.impls[id(impl)] = (impl, impl.function)
        return impls

    @staticmethod
    def _impls_of(plugin: object, manager: Any) -> list[tuple[str, Any]]:
        found = []
        for name, caller in list(vars(manager.hook).items()):
            get = getattr(caller, "get_hookimpls", None)
            if get is None:
                continue
            found += [(name, impl) for impl in get() if impl.plugin is plugin]
        return found

    def _registration_trusted(self, frame: Any) -> bool:
        """Every frame of a registration runs trusted code; in pytest's own repository the
        runner's own files count as trusted too (there the runner is the code under test, and
        a patch to it must not make pytest's own conftest registrations the candidate's;
        docs/SECURITY.md)."""
        also = self._runner_code if self.runner_packages else None
        return self.judge.provenance.stack_trusted(frame, also)

    def _runner_code(self, code: Any) -> bool:
        return self._runner_file(code.co_filename)

    def _runner_file(self, filename: str) -> bool:
        """A file of the repository's own runner packages (src/_pytest/..., src/pytest/...)."""
        root = self.judge.root + os.sep
        path = os.path.realpath(filename)
        if not path.startswith(root):
            return False
        return any(part in self.runner_packages for part in path[len(root) :].split(os.sep)[:-1])

    def _runner_own(self, function: object) -> bool:
        """pytest's own hooks when the repository is pytest itself (the candidate's runner)."""
        module = getattr(function, "__module__", None) or ""
        return module.split(".", 1)[0] in self.runner_packages

    # ------------------------------------------------------------------ checks

    def configure(self, config: Any) -> None:
        """Remember pluggy's dispatch objects as pytest configured them."""
        self._config = config
        self._pm = config.pluginmanager
        self._relay = self._pm.hook
        self._config_hook = config.hook  # the relay itself, or pytest 8's path-aware proxy of it
        self._inner = vars(self._pm).get("_inner_hookexec")
        self._hookexecs = {}

    def check(self) -> list[str]:
        """What changed in the hooks pytest calls since they were recorded."""
        pm, relay = self._pm, self._relay
        if pm is None:
            return []
        problems: list[str] = []
        own = vars(pm)
        if (
            getattr(pm, "hook", relay) is not relay
            or getattr(self._config, "hook", None) is not self._config_hook
            or own.get("_inner_hookexec") is not self._inner
            or "_hookexec" in own
        ):
            problems.append("pluggy's hook dispatch was replaced at run time")
        if not pm.is_registered(self.guard):
            problems.append("the guard's own plugin was unregistered at run time")
        state = self._state(relay)
        if state and len(state) == len(self._seen) and all(map(_is, state, self._seen)):
            return problems  # what the loop below said last time, recorded then
        for name, caller in list(vars(relay).items()):
            get = getattr(caller, "get_hookimpls", None)
            if get is None:
                continue
            problem = self._dispatch_changed(name, caller)
            if problem:
                problems.append(problem)
            for impl in get():
                known = self.impls.get(id(impl))
                if known is not None and known[0] is impl and impl.function is known[1]:
                    continue
                if self._runner_own(impl.function):
                    continue
                if known is not None and known[0] is impl:
                    problems.append(f"the pytest hook {name} of a plugin was replaced at run time")
                else:
                    problems.append(
                        f"{self.judge.where(impl.function)} registers a pytest hook ({name}) at "
                        "run time, outside pytest's plugin loading"
                    )
        self._seen = state
        return problems

    @staticmethod
    def _state(relay: Any) -> tuple[object, ...]:
        """Everything the per-hook look of check() depends on, by identity, gathered in C
        loops: the hook callers by name, their dispatch, their implementations and the
        function each calls (empty when a caller is not pluggy's: always look then). The
        recorded implementations change only with a registration, which changes these."""
        try:
            callers = vars(relay)
            impls = tuple(_chain(map(_impls, callers.values())))
            return (*callers, *callers.values(), *map(_hookexec, callers.values()), *impls,
                    *map(_function, impls))  # fmt: skip
        except Exception:  # anything but pluggy's callers: no shortcut
            return ()

    def _dispatch_changed(self, name: str, caller: Any) -> str | None:
        hookexec = getattr(caller, "_hookexec", None)
        known = self._hookexecs.get(name)
        if known is None:
            if hookexec is not None and hookexec != getattr(self._pm, "_hookexec", hookexec):
                return f"the dispatch of the pytest hook {name} was replaced at run time"
            self._hookexecs[name] = hookexec
            return None
        return None if hookexec is known else f"the dispatch of the pytest hook {name} was replaced"

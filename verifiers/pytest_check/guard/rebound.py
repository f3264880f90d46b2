"""Who rebound a test module's name (bindings.py records what its top level bound): the
guard asks before and after each test's call (plugin.py check_code). A name rebound to the
candidate's code (code on lines its patch wrote, or made at run time), or away from the
candidate's code (any of a changed file) to anything but the tests' own code or a mock
(`operator.add` in place of the imported `add`), is the code under test's doing: its tests
would call that, not what their module imported (held-out batch 5's T6). A name rebound to
the repository's unchanged code, from a value that was not the candidate's, is the library
under test at work (freezegun puts its FakeDatetime in place of a test module's `datetime`)."""

from __future__ import annotations

import os
import sys
import types

from .bindings import recorded
from .trust import Judge, code_of, where_code

_MISSING = object()
_realpath = os.path.realpath  # saved before the code under test could replace it


class Watch:
    """Each collected test's module and what its top level bound."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self._modules: dict[int, tuple[types.ModuleType, dict[str, object]]] = {}
        self._of_item: dict[str, int] = {}
        self._said: set[tuple[int, str]] = set()

    def remember(self, nodeid: str, module: object) -> None:
        if isinstance(module, types.ModuleType):
            key = id(module)
            if key not in self._modules:
                self._modules[key] = (module, recorded(module))
            self._of_item[nodeid] = key

    def rebound(self, nodeid: str) -> list[str]:
        """What of the test's module was rebound by the code under test (said once each)."""
        key = self._of_item.get(nodeid)
        if key is None:
            return []
        module, bound = self._modules[key]
        names = vars(module)
        found = []
        for name, old in bound.items():
            new = names.get(name, _MISSING)
            if new is old or (key, name) in self._said:
                continue
            if new is _MISSING:  # deleted: the name now resolves elsewhere (a builtin planted)
                rebound = self._candidates(old)
            else:
                rebound = self._written(new) or (
                    self._candidates(old) and not self._tests_own(new))
            if rebound:
                self._said.add((key, name))
                where = os.path.relpath(getattr(module, "__file__", None) or module.__name__)
                to = "deleted" if new is _MISSING else f"rebound at run time to {_what(new)}"
                found.append(f"{name} of {where} was {to}, not by its own code: its tests "
                             "would call something else than what it imported")
        return found

    def _candidates(self, value: object) -> bool:
        if isinstance(value, type):  # (first: a class may carry a `__code__` of any function)
            return self.judge.candidate_class(value)
        code = code_of(value)
        if code is not None:
            return self.judge.candidate_code(code)
        path = getattr(value, "__file__", None) if isinstance(value, types.ModuleType) else None
        return isinstance(path, str) and _realpath(path) in self.judge.changed

    def _written(self, value: object) -> bool:
        """The candidate's code (as _candidates) on lines its patch wrote, or made at run time:
        what the repository's unchanged code of a changed file puts in a test module's place
        is the library under test at work (freezegun's FakeDatetime for `datetime`)."""
        if not self._candidates(value):
            return False
        written = self.judge.lines_written
        if isinstance(value, type):
            body = self.judge.provenance.class_bodies.get(value)
            return body is None or written(body) or any(map(written, _own_codes(value)))
        code = code_of(value)
        return code is None or written(code)

    def _tests_own(self, value: object) -> bool:
        """A mock, or code of an unchanged file of the repository (the tests' own helpers)."""
        mock = sys.modules.get("unittest.mock")
        if mock is not None and isinstance(value, mock.NonCallableMock):
            return True
        code = code_of(value)
        return (code is not None and not self.judge.candidate_code(code)
                and _realpath(code.co_filename).startswith(self.judge.root + os.sep))


def _own_codes(cls: type) -> list[types.CodeType]:
    """The code of the functions a class defines itself."""
    found = []
    for member in list(vars(cls).values()):
        code = code_of(member)
        if code is not None:
            found.append(code)
    return found


def _what(value: object) -> str:
    code = code_of(value)
    name = getattr(value, "__qualname__", None) or type(value).__name__
    return f"{name} ({where_code(code)})" if code is not None else str(name)

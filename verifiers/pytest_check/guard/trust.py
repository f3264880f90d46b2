"""Whether a piece of code, a class or a file is the candidate's: by provenance (identity and
time, provenance.py) wherever the audit hook saw it appear, and only otherwise (Python < 3.8, or
code it never saw) by the file name the code claims: a file the candidate changed, a workspace
file written since the run began, or no file at all (code compiled from a string).
"""

from __future__ import annotations

import os
import sys
import types

from . import stores
from .provenance import Provenance
from .snapshot import Owner

_realpath = os.path.realpath  # saved before the code under test could replace them
_stat = os.stat


def function_of(value: object) -> object:
    """The function behind a method, property, staticmethod or classmethod."""
    if isinstance(value, property):
        return value.fget
    if isinstance(value, (staticmethod, classmethod)):
        return value.__func__
    return getattr(value, "__func__", value)


def code_of(value: object) -> types.CodeType | None:
    code = getattr(function_of(value), "__code__", None)
    return code if isinstance(code, types.CodeType) else None


def where_code(code: types.CodeType) -> str:
    """The file a code object claims, relative when it is a path (for messages only)."""
    name = code.co_filename
    if name.startswith("<") or not os.path.isabs(name):
        return name
    relative = os.path.relpath(name)
    return name if relative.startswith("..") else relative


class Judge:
    """The candidate's or not, for code, classes and files."""

    def __init__(self, root: str, changed: set[str], started: float, provenance: Provenance):
        self.root = root
        self.changed = changed
        """Real paths of the files the candidate changed."""
        self.started = started
        self.provenance = provenance
        self._files: dict[str, bool] = {}
        self.changed_lines: dict[str, list[tuple[int, int]]] = {}
        """Real path of a changed file -> the spans of lines its patch added or changed (a
        changed file absent here: all of it)."""
        self._written: dict[int, tuple[types.CodeType, object, bool]] = {}
        """id(code) -> (code, its origin then, lines_written's answer): the answer stands
        while the code's origin is that very record (set once changed_lines is)."""

    def suspect_file(self, filename: str) -> bool:
        """The file-name rule: a changed file, a workspace file written since the start, or
        no file (a name in angle brackets)."""
        known = self._files.get(filename)
        if known is None:
            known = self._files[filename] = self._suspect_file(filename)
        return known

    def _suspect_file(self, filename: str) -> bool:
        if filename.startswith("<"):
            return True
        path = _realpath(os.path.abspath(filename))
        if path in self.changed:
            return True
        if not path.startswith(self.root + os.sep):
            return False
        try:
            return _stat(path).st_ctime >= self.started  # ctime cannot be set back
        except OSError:
            return True

    def candidate_code(self, code: types.CodeType) -> bool:
        """Code the candidate wrote or made (by provenance; else by the name it claims)."""
        trusted = self.provenance.trusted(code)
        if trusted is None:
            return self.suspect_file(code.co_filename)
        return not trusted

    def untrusted_function(self, function: object) -> bool:
        """A callable that is not known trusted code: the candidate's code, code the guard
        never saw appear, or (with provenance) a callable with no code to trace at all."""
        code = code_of(function)
        if code is None:
            return self.provenance.enabled
        trusted = self.provenance.trusted(code)
        if trusted is None:
            return self.provenance.enabled or self.suspect_file(code.co_filename)
        return not trusted

    def where(self, function: object) -> str:
        """Where a function says it comes from, for a message (never for a decision)."""
        code = code_of(function)
        if code is None:
            return f"a {type(function).__name__} with no code"
        return where_code(code)

    def suspect_replacement(self, owner: Owner, name: str, value: object) -> bool:
        """Whether a changed function or method of the watched modules may be the code under
        test's doing: anything but a function of one of the repository's own, unchanged
        conftest files (a deletion, a builtin, a callable object, another function of the
        machinery put in its place, code from any other file), or the very value the
        repository's own test code stored there (stores.py)."""
        if stores.noted and _noted(owner, name, value):
            return False
        code = code_of(value)
        if code is None:
            return True
        origin = self.provenance.origin(code)
        if origin is None:
            if self.provenance.enabled:
                return True
            filename = code.co_filename
            if os.path.basename(filename) != "conftest.py" or self.suspect_file(filename):
                return True
            return not _realpath(os.path.abspath(filename)).startswith(self.root + os.sep)
        if not origin.trusted or os.path.basename(origin.path) != "conftest.py":
            return True
        return not _realpath(origin.path).startswith(self.root + os.sep)

    def own_store(self, frame: types.FrameType, value: object) -> bool:
        """Whether a store into a watched name, just made by the code of `frame`, is the
        repository's own test code's: that code loaded from a workspace file the candidate
        did not change, every frame on the stack trusted (no code of the candidate's called
        it), and the value stored trusted code or no callable at all (a test file may store
        a value the candidate's code made: that is still the candidate's)."""
        origin = self.provenance.origin(frame.f_code)
        if origin is None or not origin.trusted or not origin.path:
            return False
        if not _realpath(origin.path).startswith(self.root + os.sep):
            return False
        if not self.provenance.stack_trusted(frame):
            return False
        code = code_of(value)
        if code is None:
            return not callable(function_of(value))
        return self.provenance.trusted(code) is True

    def candidate_class(self, kind: type) -> bool:
        """Whether a class that compares equal to anything is the candidate's: by the
        provenance of the class itself (made by the candidate's code, or by `type(...)` at
        run time); `mock.ANY`, dirty-equals and the tests' own wildcards are not."""
        if self.provenance.enabled:
            return self.provenance.class_trusted(kind) is not True
        module = sys.modules.get(getattr(kind, "__module__", ""))
        files = [getattr(module, "__file__", None)]
        for name in ("__eq__", "__ne__"):
            code = code_of(getattr(kind, name, None))
            files.append(code.co_filename if code is not None else None)
        return any(isinstance(f, str) and self.suspect_file(f) for f in files)

    def candidate_override(self, cls: type, name: str, value: object) -> bool:
        """A method on a class that is the candidate's doing: a function of the candidate's
        code on lines its patch wrote (a method of a changed file that the patch left as it
        was existed before the candidate: pydicom's `DSfloat` compares with strings by design),
        or anything with no code (a C callable) on a class the candidate made or set on any
        class at run time (`Meters.__eq__ = functools.partial(operator.is_not, None)`)."""
        code = code_of(value)
        if code is None:
            return self.candidate_class(cls) or self.provenance.set_at_run_time(cls, name, value)
        return self.candidate_code(code) and self.lines_written(code)

    def comparison_swapped(self, kind: type) -> bool:
        """Whether a class's `__eq__`/`__ne__` (its own or inherited) is the candidate's doing
        though the class is not (set on the repository's class at run time)."""
        for cls in getattr(kind, "__mro__", ()):
            own = vars(cls)
            for name in ("__eq__", "__ne__"):
                if name in own and self.provenance.set_at_run_time(cls, name, own[name]):
                    if self.candidate_override(cls, name, own[name]):
                        return True
        return False

    def lines_written(self, code: types.CodeType) -> bool:
        """Whether `code` holds a line the candidate's patch added or changed: only code the
        import machinery loaded from a changed file with known spans can be found unwritten
        (code made at run time counts as written, whatever file name it claims)."""
        origin = self.provenance.origin(code)
        known = self._written.get(id(code))
        if known is not None and known[0] is code and known[1] is origin:
            return known[2]
        if origin is not None:
            path = origin.path  # the file the import machinery loaded it from ("": made)
        else:
            path = "" if self.provenance.enabled else code.co_filename
        spans = self.changed_lines.get(_realpath(path)) if path else None
        if spans is None:
            return True
        first, last = code.co_firstlineno, code.co_firstlineno
        for _start, _end, line in _lines(code):
            if line is not None and line > last:
                last = line
        written = any(a <= last and first <= b for a, b in spans)
        self._written[id(code)] = (code, origin, written)
        return written


def _lines(code: types.CodeType) -> list[tuple[int, int, int | None]]:
    """(start, end, line) of each instruction range of `code` (Python 3.10+), else the line
    starts `dis` finds."""
    lines = getattr(code, "co_lines", None)
    if lines is not None:
        return list(lines())
    import dis

    return [(0, 0, line) for _offset, line in dis.findlinestarts(code)]


def _noted(owner: Owner, name: str, value: object) -> bool:
    """Whether `value` is what the repository's test code stored at the owner's `name`."""
    module = sys.modules.get(owner.module)
    holder = getattr(module, owner.cls, None) if owner.cls else module
    return holder is not None and stores.noted_value(holder, name, value)

"""Where each piece of running code comes from, decided by identity and time, never by the
names code carries (`co_filename`, `__module__`, `__qualname__` can be set to anything).

Before any repository code runs, an audit hook is installed (`sys.addaudithook`: it cannot be
removed, and every later `exec`, `types.FunctionType(...)` and `__code__` assignment in the
process passes through it) and every code object reachable from the modules already loaded
is recorded as the toolchain's: the standard library, pytest, pluggy, the image's plugins,
this guard, and whatever is on the stack at that moment. From then on:

- a module that the import machinery executes (the audit hook sees the `exec` come from
  importlib's or pytest's own loader, both toolchain code) is recorded with its file: trusted
  when the file is an image file, or a workspace file the candidate did not change and nothing
  wrote since the run began; the candidate's when it is a changed file, a file written during
  the run, or a file in a writable place outside the workspace (/tmp);
- any other code made at run time (`exec`, `eval`, `compile`d source run, functions built
  from code objects, a `__code__` swapped in) is trusted only when every frame on the stack at
  that moment is trusted code: code the candidate's code makes, directly or through any helper,
  is the candidate's, whatever file name it was compiled under;
- classes are recorded as they are created (`builtins.__build_class__`): a class whose body
  ran from the candidate's code is the candidate's, whatever `__module__` it claims;
- the candidate's code calling `gc.get_objects`/`get_referrers`/`get_referents`,
  `sys._current_frames` or `sys.addaudithook` itself (however it reached the function) is noted:
  that is how in-process cheats find the runner and the guard; and so is `sys._getframe` called
  by code the candidate's code made at run time (an `exec`'d string hides it from the static
  stage, not from this);
- so is the candidate's code opening one of the task's hidden test files (directly or through
  any trusted helper), or starting or forking a process, or looking up a C function through
  ctypes (their reads escape this hook): what it read could come back in the feedback (the
  host then says only which tests failed).

In the Docker sandbox the run is forked from a warm interpreter that imported the toolchain
and this guard once (agent/sandbox/docker/zygote.py, which never runs workspace code): there
`prepare()` records the toolchain before any fork, again after each later import, and each
run's `start` records only the modules new or changed since (same name, same module object,
same number of names: else walked again), plus its own stack. A change that escapes this (a
toolchain name rebound to another function of the same count, between the warm interpreter's
last import and the run) leaves that function unknown, which is judged as untrusted: it can
cost a false alarm, never a pass.

`trusted(code)` answers True (the toolchain's, or a file the candidate could not touch), False
(the candidate's) or None (never seen: Python < 3.8, where audit hooks do not exist, gets the
older rule on the file name the code claims). A candidate that rewrites `co_filename` still
runs code objects the guard saw it make.
"""

from __future__ import annotations

import builtins
import functools
import os
import sys
import tempfile
import types
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from .redecide import REPLACED

_realpath = os.path.realpath
_stat = os.stat
_getframe = sys._getframe
deciding = [0]
"""Above 0 while a comparison whose class compares by the candidate's code is made or probed
(beforehand.py): the candidate's code reading frames then is a search (_on_frame_read)."""
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
MAX_DEPTH = 400
"""Frames looked at on the stack at most (deeper stacks count as untrusted)."""


class Origin:
    """A code object's origin: trusted or the candidate's, and the file it was loaded from
    when the import machinery loaded it ("" for code made at run time)."""

    __slots__ = ("code", "trusted", "path")

    def __init__(self, code: types.CodeType, trusted: bool, path: str) -> None:
        self.code = code  # held: an id is only unique while its object lives
        self.trusted = trusted
        self.path = path


_LRU_WRAPPER = type(functools.lru_cache()(lambda: None))
_WRAPPERS = (_LRU_WRAPPER, functools.partial, functools.partialmethod, functools.cached_property)
"""Wrapper types (matched by type, never by attribute lookups on arbitrary objects) whose
wrapped function is recorded with the toolchain."""
_CODE = types.CodeType
_NOT_FUNCTIONS = frozenset({
    type(None), bool, int, float, complex, str, bytes, tuple, list, dict, set, frozenset,
    types.ModuleType, types.BuiltinFunctionType, types.MethodDescriptorType,
    types.WrapperDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType,
})  # fmt: skip
"""Types (exactly these) of namespace values that neither are nor wrap a function with code:
passed over in one set lookup by the toolchain walk, which meets tens of thousands."""


class Provenance:
    """The origin of every code object and class, recorded as it appears."""

    def __init__(self, root: str, changed: Iterable[str], started: float) -> None:
        self.root = root
        self.changed = frozenset(changed)
        """Real paths of the files the candidate changed."""
        self.started = started
        self.enabled = hasattr(sys, "addaudithook")
        known = _take_prepared()  # the forked run's one Provenance takes it over, uncopied
        self.origins: dict[int, Origin] = known.origins if known else {}
        self.classes: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
        """Class -> whether its body ran from trusted code (classes created since the start)."""
        self.slots: dict[int, dict[str, object]] = known.slots if known else {}
        """id(class) -> its own comparison, arithmetic and container methods as the class was
        when recorded (walked or created): a method set there later was set at run time (old
        classes are held alive by _old_class_refs; new ones by new_slot_refs)."""
        self.class_bodies: weakref.WeakKeyDictionary[type, types.CodeType] = (
            weakref.WeakKeyDictionary()
        )
        """class -> the code of its body, for classes made while the hook was on."""
        self.new_slot_refs: weakref.WeakKeyDictionary[type, dict[str, object]] = (
            weakref.WeakKeyDictionary()
        )
        self.old_classes: set[int] = known.old_classes if known else set()
        self._old_class_refs: list[type] = known._old_class_refs if known else []
        self._walked: dict[str, tuple[object, int]] = known._walked if known else {}
        """Module name -> (the module, its number of names) when its namespace was walked."""
        self.warm_files: dict[str, tuple[object, str]] = known.warm_files if known else {}
        """Module name -> (the module, the real path of its file, "" for none) for the modules
        the warm interpreter had loaded (prepare): none of them came from the workspace."""
        self.events: list[tuple[str, object]] = []
        """(kind, detail) of notable events, read and emptied by the Guard: ("code", function)
        for a `__code__` assigned to a toolchain function by untrusted code, ("search", event)
        for `gc.get_objects` & co. called straight from the candidate's code."""
        self._import_sites: dict[str, int] = {}
        self._writable = tuple(
            _realpath(p) + os.sep
            for p in {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"}
            if p and p != "/"
        )
        self._installed = tuple(
            _realpath(p) + os.sep
            for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
            if p and _realpath(p) != "/"
        )
        """The interpreter's own installation (where its pip installs pytest and the rest)."""
        self._files: dict[str, bool] = {}
        self._hidden: dict[tuple[int, int], str] = {}
        """(device, inode) -> relative path of the task's hidden test files (reads noted)."""
        self._cached_hidden: dict[object, bool] = {}
        self._code_files: dict[str, str] = {}
        """A code object's file name -> the hidden file it is ("": none)."""
        self.hidden_reads: list[str] = []
        self._busy = False
        """Hidden test files the candidate's code opened, as given (relative to the root)."""

    def watch_reads(self, paths: Iterable[str]) -> None:
        """Note when the candidate's code opens one of `paths` (the task's hidden tests): known
        by the file's identity (device, inode), however it is named or reached."""
        found: dict[tuple[int, int], str] = {}
        for path in paths:
            real = _realpath(os.path.join(self.root, path))
            try:
                info = _stat(real)
            except OSError:
                continue
            found[(info.st_dev, info.st_ino)] = os.path.relpath(real, self.root)
        self._hidden = found

    # ------------------------------------------------------------------ set-up

    def start(self) -> None:
        """Record the toolchain and install the hooks (call once, before the workspace is on
        sys.path)."""
        self._record_toolchain()
        self._import_sites = {name: id(code) for name, code in _import_site_codes().items()}
        if not self.enabled:
            return
        sys.addaudithook(self._audit)
        original = builtins.__build_class__

        def __build_class__(func: Any, name: str, *bases: Any, **kwds: Any) -> Any:
            __tracebackhide__ = True  # pytest leaves this frame out of its tracebacks
            cls = original(func, name, *bases, **kwds)
            try:
                origin = self.origins.get(id(func.__code__))
                self.classes[cls] = origin is not None and origin.trusted
                self.class_bodies[cls] = func.__code__
                self.new_slot_refs[cls] = _slots_of(cls)
            except Exception:  # a class that cannot be weakly referenced: never trusted
                pass
            return cls

        builtins.__build_class__ = __build_class__  # type: ignore[assignment]
        self._add(__build_class__.__code__, True, "")

    def _record_toolchain(self, stack: bool = True) -> None:
        for name, module in list(sys.modules.items()):
            try:
                namespace = vars(module)
            except TypeError:
                continue
            walked = self._walked.get(name)
            if walked is not None and walked[0] is module and walked[1] == len(namespace):
                continue  # recorded before the fork (prepare), unchanged since
            self._walked[name] = (module, len(namespace))
            for value in list(namespace.values()):
                if isinstance(value, type):
                    if id(value) not in self.old_classes:
                        self.old_classes.add(id(value))
                        self._old_class_refs.append(value)
                        self.slots[id(value)] = _slots_of(value)
                        for member in list(vars(value).values()):
                            self._add_function(member)
                else:
                    self._add_function(value)
        frame: types.FrameType | None = _getframe(0) if stack else None
        while frame is not None:  # the guard, its launcher, the zygote that forked it
            self._add(frame.f_code, True, frame.f_code.co_filename)
            frame = frame.f_back

    def _add_function(self, value: object, depth: int = 0) -> None:
        kind = type(value)
        if kind is types.FunctionType:  # (the usual case first: the checks below say the same)
            code = value.__code__  # type: ignore[attr-defined]
            if type(code) is types.CodeType:
                self._add(code, True, code.co_filename)
            return
        if kind in _NOT_FUNCTIONS:  # (a constant, a module...: exactly these types, no subclass)
            return
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            for part in (value.fget, value.fset, value.fdel):
                self._add_function(part)
            return
        if isinstance(value, _WRAPPERS) and depth < 4:
            # a function the toolchain wrapped (pytest 6's `@lru_cache` _getconftestmodules):
            # the wrapper is no function, what it wraps is the toolchain's code
            inner = value.__wrapped__ if isinstance(value, _LRU_WRAPPER) else value.func
            self._add_function(inner, depth + 1)
            return
        code = getattr(value, "__code__", None) if isinstance(value, types.FunctionType) else None
        if isinstance(code, types.CodeType):
            self._add(code, True, code.co_filename)

    def _add(self, code: types.CodeType, trusted: bool, path: str, force: bool = False) -> None:
        """Record `code` and the code objects nested in it (first record wins, unless
        `force` makes it the candidate's)."""
        stack = [code]
        while stack:
            current = stack.pop()
            known = self.origins.get(id(current))
            if known is not None and not (force and known.trusted):
                continue
            self.origins[id(current)] = Origin(current, trusted, path)
            # (a code object's type cannot be subclassed: `type(c) is` says what isinstance says)
            stack += [c for c in current.co_consts if type(c) is _CODE]

    # ------------------------------------------------------------------ queries

    def trusted(self, code: object) -> bool | None:
        origin = self.origins.get(id(code))
        if origin is None or origin.code is not code:
            return None
        return origin.trusted

    def origin(self, code: object) -> Origin | None:
        origin = self.origins.get(id(code))
        return origin if origin is not None and origin.code is code else None

    def stack_trusted(
        self,
        frame: types.FrameType | None,
        also: Callable[[types.CodeType], bool] | None = None,
    ) -> bool:
        """Whether every frame from `frame` outwards runs trusted code (or code `also`
        accepts)."""
        depth = 0
        while frame is not None:
            if depth > MAX_DEPTH:
                return False
            origin = self.origins.get(id(frame.f_code))
            if (origin is None or not origin.trusted) and not (also and also(frame.f_code)):
                return False
            frame = frame.f_back
            depth += 1
        return True

    def first_untrusted(self, frame: types.FrameType | None) -> types.FrameType | None:
        """The innermost frame from `frame` outwards that runs code not known as trusted."""
        depth = 0
        while frame is not None and depth <= MAX_DEPTH:
            if self.trusted(frame.f_code) is not True:
                return frame
            frame = frame.f_back
            depth += 1
        return None

    def class_trusted(self, cls: type) -> bool | None:
        """True for a class that existed before the start or whose body ran from trusted code,
        False for one made by the candidate's code, None when unknown (made by `type(...)`)."""
        if id(cls) in self.old_classes:
            return True
        try:
            return self.classes.get(cls)
        except TypeError:
            return None

    def set_at_run_time(self, cls: type, name: str, value: object) -> bool:
        """Whether `cls`'s own `name` is not what it was when the class was recorded (walked
        with the toolchain, or created): a method someone set on the class since. A class
        never recorded (made by `type(...)`) says nothing here."""
        try:
            known = self.new_slot_refs.get(cls)
        except TypeError:
            known = None
        if known is None:
            if id(cls) not in self.old_classes:
                return False
            known = self.slots.get(id(cls), {})
        return known.get(name, _ABSENT) is not value

    def file_trusted(self, path: str) -> bool:
        """Whether code loaded from `path` is beyond the candidate's reach: not a changed
        file, not written since the run began, not in a writable place outside the workspace."""
        known = self._files.get(path)
        if known is None:
            known = self._files[path] = self._file_trusted(path)
        return known

    def _file_trusted(self, path: str) -> bool:
        """By when the file last changed and who put it there, not by its folder: never a
        changed file or one written since the run began (ctime cannot be set back); in the
        workspace, any other file; outside it, a file of the interpreter's own installation
        (its prefixes: a virtual environment or checkout under /tmp, as `--sandbox local` has
        it) or of a place the sandbox's code cannot write (the image), not one in a shared
        writable place (/tmp, /dev/shm) that another process could have planted."""
        if not path or path.startswith("<"):
            return False
        real = _realpath(os.path.abspath(path))
        if real in self.changed:
            return False
        try:
            written = _stat(real).st_ctime >= self.started
        except OSError:
            return False
        if written:
            return False
        if real.startswith(self.root + os.sep):
            return True
        return not real.startswith(self._writable) or real.startswith(self._installed)

    # ------------------------------------------------------------------ the audit hook

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in _EVENTS:
            return
        if event == "open":
            if self._hidden and args:
                self._on_open(args[0])
        elif event in _SPAWNS:
            if self._hidden and args:
                self._on_spawn(args)
        elif event == "exec":
            code = args[0] if args else None
            if isinstance(code, types.CodeType) and id(code) not in self.origins:
                self._on_exec(code, _getframe(1))
        elif event == "function.__new__":
            code = args[0] if args else None
            if isinstance(code, types.CodeType):
                self._on_made(code, _getframe(1))
        elif event in _FRAME_EVENTS:
            self._on_frame_event(event, args)
        elif event in _SEARCHES:
            if self.trusted(_getframe(1).f_code) is not True:
                self.events.append(("search", event))
        elif event in _TRACERS:
            self._on_tracer(event, _getframe(1))
        elif len(args) == 3 and args[1] == "__code__":  # object.__setattr__
            self._on_code_set(args[0], args[2], _getframe(1))

    def _on_frame_event(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "sys._getframe":
            if not self._busy:  # our own _getframe below raises this event again
                self._on_getframe()
        elif (deciding[0] or self._hidden) and len(args) == 2 and args[1] in _FRAME_ATTRIBUTES:
            # object.__getattr__: a traceback's or a generator's frame read
            self._on_frame_read(_getframe(2), f"{args[1]} (a frame)")
        elif self._hidden and len(args) == 2 and args[1] == "__code__" and not self._busy:
            self._on_code_read(args[0])

    def _on_code_read(self, function: object) -> None:
        """A function's `__code__` read while hidden tests are watched: when the function is a
        hidden test's (its code from a hidden file) and the reader the candidate's code (or a
        trusted helper it called directly), its constants and names are the hidden test's text
        without an open (held-out batch 5's Y1b: `sys.modules[...].test_x.__code__.co_consts`):
        a read of that file. Feedback only."""
        self._busy = True
        try:
            code = getattr(function, "__code__", None)
            name = getattr(code, "co_filename", None)
            if not isinstance(name, str):
                return
            hit = self._hidden_file(name)
            reader: types.FrameType | None = _getframe(3)  # (_on_code_read, _on_frame_event,
            # _audit, then the reader)
            if hit is None or reader is None:
                return
            if self.trusted(reader.f_code) is True:
                reader = reader.f_back
            if reader is not None and self.trusted(reader.f_code) is False:
                if hit not in self.hidden_reads:
                    self.hidden_reads.append(hit)
        finally:
            self._busy = False

    def _hidden_file(self, name: str) -> str | None:
        """The hidden test file `name` is (by identity), or None."""
        known = self._code_files.get(name)
        if known is None:
            try:
                info = _stat(name)
                known = self._code_files[name] = self._hidden.get((info.st_dev, info.st_ino), "")
            except (OSError, ValueError):
                known = self._code_files[name] = ""
        return known or None

    def _on_getframe(self) -> None:
        """sys._getframe called by code the run made at run time (from no file): a search;
        or by the candidate's code while a comparison it decides is made (`deciding`), or
        while hidden tests run (_on_frame_read)."""
        self._busy = True
        try:
            caller = _getframe(3)  # (_on_frame_event, _audit, then who called sys._getframe)
            origin = self.origins.get(id(caller.f_code))
            if origin is not None and not origin.trusted and not origin.path:
                self.events.append(("search", "sys._getframe from code it made at run time"))
            elif (deciding[0] or self._hidden) and caller.f_code.co_filename != __file__:
                # (not _audit's own _getframe)
                self._on_frame_read(caller, "sys._getframe")
        finally:
            self._busy = False

    def _on_frame_read(self, caller: types.FrameType, what: str) -> None:
        """A frame read while a comparison made by the candidate's code decides (beforehand
        probing it, or the test's comparison of its value): reading who asks is how such a
        value tells the guard's probe from the test's comparison (gap G5). Counted when the
        reader is the candidate's code, or trusted code it called (`inspect.currentframe`,
        `inspect.stack`, `traceback.extract_stack`, and, while such a comparison decides, any
        depth of it: logging's caller lookup, held-out batch 5's G6c). While hidden
        tests run, such a read counts as reading them (a hidden test's code and constants are
        on the frames above the code it calls; held-out batch 4's Q4): feedback only."""
        reader: types.FrameType | None = caller
        if self.trusted(caller.f_code) is True:
            reader = caller.f_back
        if deciding[0] and reader is not None and self.trusted(reader.f_code) is True:
            # while such a comparison decides, through any depth of trusted machinery: logging's
            # caller lookup (`findCaller(stack_info=True)`) hands back the stack as text
            reader = self.first_untrusted(reader)
        if reader is None or self.trusted(reader.f_code) is not False:
            return
        if deciding[0]:
            self.events.append(
                ("search", f"{what} while a comparison its own code decides was made")
            )
        for hit in self._hidden.values():
            if hit not in self.hidden_reads:
                self.hidden_reads.append(hit)

    def _on_tracer(self, event: str, caller: types.FrameType) -> None:
        """A trace or profile function set by the candidate's code (or a trusted helper it
        called directly): it is called with each frame of the tests and can write their
        variables (`frame.f_locals` with `f_trace_opcodes`: pytest's `@py_assert` results) or
        move their line (held-out batch 5's T5). The guard's own profile hook is set by
        trusted code; a repository's tracer (coverage, a debugger) is set by unchanged code."""
        reader: types.FrameType | None = caller
        if self.trusted(caller.f_code) is True:
            reader = caller.f_back
        if reader is not None and self.trusted(reader.f_code) is False:
            self.events.append(("search", f"{event} (a tracer sees and can change the tests' frames)"))

    def _on_exec(self, code: types.CodeType, caller: types.FrameType) -> None:
        if self._is_import(caller):
            path = code.co_filename  # the loader compiled (or read) it from that file
            self._add(code, self.file_trusted(path), path)
        else:
            self._add(code, self.stack_trusted(caller), "")

    def _is_import(self, caller: types.FrameType) -> bool:
        """Whether an `exec` comes from the import machinery executing a module it loaded
        itself: pytest's assertion-rewriting loader, or importlib's exec_module (through
        `_call_with_frames_removed`) with a loader whose get_code is the toolchain's."""
        sites = self._import_sites
        if id(caller.f_code) == sites.get("rewrite"):
            return True
        loader_frame = caller.f_back
        if id(caller.f_code) != sites.get("call") or loader_frame is None:
            return False
        if id(loader_frame.f_code) != sites.get("exec_module"):
            return False
        get_code = getattr(type(loader_frame.f_locals.get("self")), "get_code", None)
        return self.trusted(getattr(get_code, "__code__", None)) is True

    def _on_open(self, path: object) -> None:
        """A hidden test file opened with the candidate's code the innermost untrusted frame
        on the stack (directly, or through pathlib, linecache, inspect...), known by identity:
        a name relative to the current directory (after a chdir), a link under another name,
        or, for a name no directory here resolves, one relative to a directory the process
        holds open (`dir_fd`, whose value the audit event does not carry)."""
        if isinstance(path, int):
            return  # an open descriptor: opened (and judged) before
        try:
            name = os.fsdecode(path)  # type: ignore[arg-type]
        except TypeError:
            return
        try:
            info = _stat(name)
            hit = self._hidden.get((info.st_dev, info.st_ino))
            if hit is None:
                return
        except (OSError, ValueError):
            if os.path.isabs(name) or not self._untrusted_caller():
                return
            hit = self._held_dirs_resolve(name)
            if hit is None:
                return
        if self._untrusted_caller() and hit not in self.hidden_reads:
            self.hidden_reads.append(hit)

    def forget_hidden_sources(self) -> None:
        """Drop the hidden test files' text from `linecache` (pytest put it there to report a
        failure of theirs): the next test's code would read it from memory, with no open."""
        if not self._hidden:
            return
        cache = getattr(sys.modules.get("linecache"), "cache", None)
        if not isinstance(cache, dict):
            return
        for name in list(cache):
            hidden = self._cached_hidden.get(name)
            if hidden is None:
                try:
                    info = _stat(name) if isinstance(name, str) else None
                except (OSError, ValueError):
                    info = None
                hidden = info is not None and (info.st_dev, info.st_ino) in self._hidden
                self._cached_hidden[name] = hidden
            if hidden:
                cache.pop(name, None)

    def _untrusted_caller(self) -> bool:
        frame = self.first_untrusted(_getframe(3))
        return frame is not None and self.trusted(frame.f_code) is False

    def _held_dirs_resolve(self, name: str) -> str | None:
        """The hidden file `name` names relative to a directory the process holds open."""
        try:
            fds = os.listdir("/proc/self/fd")
        except OSError:
            return None
        for fd in fds[:4096]:
            try:
                info = _stat(name, dir_fd=int(fd))
            except (OSError, ValueError):
                continue
            hit = self._hidden.get((info.st_dev, info.st_ino))
            if hit is not None:
                return hit
        return None

    def _on_spawn(self, args: tuple[Any, ...]) -> None:
        """A process the candidate's code starts or forks, or a C function it looks up through
        ctypes: what that reads escapes this audit hook (a child `python -I -c` listing the
        folder, libc's `open`), whatever its command names, so every hidden test file counts
        as read (held-out batch 4: the old rule, a command naming the file, missed both). What
        that costs an honest candidate is feedback (only which tests failed is said), never
        a verdict."""
        del args
        if self._untrusted_caller():
            for hit in self._hidden.values():
                if hit not in self.hidden_reads:
                    self.hidden_reads.append(hit)

    def _on_made(self, code: types.CodeType, caller: types.FrameType) -> None:
        if self.stack_trusted(caller):
            self._add(code, True, "")
        else:
            self._add(code, False, "", force=True)

    def _on_code_set(self, target: object, code: object, caller: types.FrameType) -> None:
        if not isinstance(code, types.CodeType):
            return
        old = getattr(target, "__code__", None)
        if self.trusted(old) is True and not self.stack_trusted(caller):
            self.events.append(("code", target))
        self._on_made(code, caller)


_ABSENT = object()
SLOTS = REPLACED | {"__hash__"}
"""The methods whose later replacement on a class is worth telling (redecide.py's)."""


def _slots_of(cls: type) -> dict[str, object]:
    try:
        own = vars(cls)
        return {name: own[name] for name in SLOTS if name in own}
    except Exception:  # an odd class whose namespace cannot be read
        return {}


_prepared: Provenance | None = None
"""The toolchain as `prepare` recorded it before the fork; the next Provenance (the forked
run's only one) takes it over."""


def prepare() -> None:
    """Record the toolchain loaded now, ahead of the runs a warm interpreter will fork (only
    there: one that never runs workspace code, agent/sandbox/docker/zygote.py); called again
    after each later import, it walks only the modules new or changed since. All or nothing:
    the recording is published once complete."""
    global _prepared
    recorder = Provenance("", (), 0.0)  # takes the previous record over, to extend it
    recorder._record_toolchain(stack=False)
    files = recorder.warm_files
    for name, module in list(sys.modules.items()):
        if files.get(name, (None,))[0] is not module:
            path = getattr(module, "__file__", None)
            files[name] = (module, _realpath(path) if isinstance(path, str) else "")
    _prepared = recorder


def _take_prepared() -> Provenance | None:
    """The prepared record, handed to one Provenance only (the next one starts afresh)."""
    global _prepared
    known, _prepared = _prepared, None
    return known


def _import_site_codes() -> dict[str, types.CodeType]:
    """The code objects through which the import machinery executes a module: importlib's
    `_call_with_frames_removed` called by `_LoaderBasics.exec_module`, and pytest's
    assertion-rewriting loader."""
    codes: dict[str, types.CodeType] = {}
    for key, module_names, path in (
        ("call", ("_frozen_importlib", "importlib._bootstrap"), ("_call_with_frames_removed",)),
        (
            "exec_module",
            ("_frozen_importlib_external", "importlib._bootstrap_external"),
            ("_LoaderBasics", "exec_module"),
        ),
        ("rewrite", ("_pytest.assertion.rewrite",), ("AssertionRewritingHook", "exec_module")),
    ):
        for module_name in module_names:
            value: Any = sys.modules.get(module_name)
            for name in path:
                value = getattr(value, name, None)
            code = getattr(value, "__code__", None)
            if isinstance(code, types.CodeType):
                codes[key] = code
                break
    return codes


_SEARCHES = frozenset(
    {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
     "sys.addaudithook"}
)  # fmt: skip
"""Events that, called straight from the candidate's code, can only be a search for the test
run's objects (the runner, the guard) or a hook of its own on the process."""
_SPAWNS = frozenset(
    {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
     "os.forkpty", "ctypes.dlsym"}
)  # fmt: skip
"""Events of a process started or forked from this one, or a C function looked up through
ctypes: their reads escape the audit hook."""
_FRAME_EVENTS = frozenset({"sys._getframe", "object.__getattr__"})
_TRACERS = frozenset({"sys.settrace", "sys.setprofile"})
_EVENTS = frozenset(
    {"exec", "function.__new__", "object.__setattr__", "object.__getattr__", "open",
     "sys._getframe", *_SEARCHES, *_SPAWNS, *_TRACERS}
)

"""Bytecode of the Python ooda ships into a bwrap sandbox, made once instead of in every command.

Every bwrap command is a fresh interpreter, and the ooda code it runs arrives as source: a
package held warm (agent/sandbox/warm.py: the pytest guard, ~4,000 lines, ~60 ms to compile)
beside the script that runs it, and the start-up hook every Python process runs
(fidelity.site_dir). Docker's PID 1 imports them once per container; bwrap has no such process,
so their bytecode is made once per interpreter and source version, by the sandbox's own
interpreter, and kept on the host:

- a held package's `__pycache__` ($OODA_HOME/bytecode/<key>/) is bound read-only over
  `<its folder>/__pycache__` for a command one of whose arguments is a script sitting beside a
  byte-identical copy of that package (its folder holds exactly the package's modules);
- the hook's goes into the hook's own directory, which the backends already bind read-only.

Why a candidate cannot plant one: the files live outside the workspace and are read-only in
the sandbox; they are written by the host from what a compile run printed, a run of the
sandbox's interpreter with `-I -S` (no site, no environment variables, nothing of the
workspace on sys.path) while no process of the candidate lives (bwrap ends each command by
killing every process of its uid); the host accepts that output only when the SHA-256 of every
source it compiled is the host's own. Each .pyc is a checked-hash one (PEP 552): the
interpreter takes it only for a source with the hash it was made from, so one that does not
match (another version of ooda, a changed copy) is compiled from source as before. An
interpreter older than 3.7 (no hash-based .pyc), or one whose compile fails, simply compiles
from source as before.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from ooda.agent.contracts.protocols import ExecResult
from ooda.agent.sandbox.fidelity import SITE_MOUNT
from ooda.agent.support.home import ooda_home

PYTHON = "python3"
"""The interpreter a compile run uses: the one a command's `python3` finds on the same PATH."""
SITE_HOOK = f"{SITE_MOUNT}/sitecustomize.py"
MARK = "ooda-bytecode:"
COMPILE_TIMEOUT_S = 60.0
CHECKED_HASH_FLAGS = b"\x03\x00\x00\x00"
"""A .pyc header's flags for a hash-based pyc whose source hash the interpreter checks."""
COMPILER = f"""
import base64, hashlib, importlib.util, json, marshal, sys, zlib
made = []
for path in sys.argv[1:]:
    with open(path, "rb") as handle:
        data = handle.read()
    code = compile(data, path, "exec", dont_inherit=True)
    pyc = (importlib.util.MAGIC_NUMBER + (3).to_bytes(4, "little")
           + importlib.util.source_hash(data) + marshal.dumps(code))
    made.append([path, hashlib.sha256(data).hexdigest(),
                 importlib.util.cache_from_source(path).rsplit("/", 1)[-1],
                 base64.b64encode(zlib.compress(pyc)).decode()])
print({MARK!r} + json.dumps(made))
"""
"""Run as `python3 -I -S -c COMPILER SOURCE...`: prints, for each source, its SHA-256, its
.pyc's name in `__pycache__` and the .pyc (a checked-hash one, exactly as py_compile writes it)."""

Runner = Callable[[list[str]], "ExecResult | None"]
"""Runs an argv in the sandbox (the compile run); None when the sandbox was told to stop it."""
Sources = Mapping[str, str]


def _digest(parts: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(parts)).encode()).hexdigest()[:20]


class Bytecode:
    """One sandbox's bytecode: which binds a command gets (`binds`), compiling on first need.

    `interpreter`: what identifies the sandbox's `python3` (its root filesystem, PATH), part of
    the cache key with the sources; `held`: the packages held warm (name -> modules' sources);
    `site`: the host directory of the start-up hook (its `__pycache__` gets the hook's .pyc)."""

    def __init__(self, interpreter: Sequence[str], held: Mapping[str, Sources],
                 site: Path | None, *, home: Path | None = None) -> None:
        self.interpreter = list(interpreter)
        self.held = {name: dict(files) for name, files in held.items()}
        self.site = site
        self.root = (home or ooda_home()) / "bytecode"
        self._made: dict[str, Path | None] = {}

    def binds(self, argv: Sequence[str], workspace: Path, workdir: str,
              run: Runner) -> list[tuple[Path, str]]:
        """(host directory, where it is bound read-only in the sandbox) for each held package
        beside one of argv's scripts; its bytecode is compiled first when not made yet."""
        found: list[tuple[Path, str]] = []
        for name, folder, inside in self._beside(argv, workspace, workdir):
            made = self._bytecode(name, folder, inside, run)
            if made is None or not made.is_dir():  # (a cache emptied meanwhile: bound, not
                continue                           # found, bwrap would fail the command)
            try:  # the mount point, made here: the sandbox's user may not write the folder
                (folder / "__pycache__").mkdir(mode=0o755, exist_ok=True)
            except OSError:
                continue
            found.append((made, f"{inside}/__pycache__"))
        return found

    def _beside(self, argv: Sequence[str], workspace: Path,
                workdir: str) -> list[tuple[str, Path, str]]:
        """(package, its host folder, that folder in the sandbox) for each byte-identical copy of
        a held package beside a script named in argv."""
        found: list[tuple[str, Path, str]] = []
        seen: set[str] = set()
        root = PurePosixPath(workdir)
        for word in argv:
            if not word.endswith(".py"):
                continue
            script = root / word  # an absolute word stays itself
            if root not in script.parents or ".." in script.parts:
                continue
            relative = script.parent.relative_to(root)
            for name, files in self.held.items():
                inside = str(root / relative / name)
                if inside in seen:  # (each folder looked at once: argv may name many files)
                    continue
                seen.add(inside)
                folder = workspace / relative / name
                if os.path.isdir(folder) and _holds_exactly(workspace, folder, files):
                    found.append((name, folder, inside))
        return found

    def _bytecode(self, name: str, folder: Path, inside: str, run: Runner) -> Path | None:
        """$OODA_HOME/bytecode/<key>/__pycache__ of package `name`, compiled now when missing
        (by a run reading the workspace's byte-identical copy at `inside`); None when it
        cannot be made with this interpreter."""
        files = self.held[name]
        site_source = self._site_source()
        key = _digest([*self.interpreter, name, *sorted(f"{k}\0{v}" for k, v in files.items()),
                       site_source])
        if key in self._made:
            return self._made[key]
        cache = self.root / key / "__pycache__"
        if cache.is_dir():
            self._made[key] = cache
            return cache
        if (self.root / f"{key}.failed").is_file():
            self._made[key] = None
            return None
        wanted = {f"{inside}/{module}": text for module, text in sorted(files.items())}
        if site_source:
            wanted[SITE_HOOK] = site_source
        result = run([PYTHON, "-I", "-S", "-c", COMPILER, *wanted])
        if result is None:
            return None  # stopped (the run was decided): tried again by the next command
        made = _accepted(result, wanted)
        if made is None:
            # this interpreter cannot (older than 3.7, no caching): its commands compile as
            # before, and later sandboxes do not try again (only a Python error, exit 1, is
            # held against it: not a timeout or a killed run)
            self._made[key] = None
            if result.exit_code == 1:
                with contextlib.suppress(OSError):
                    _write_one(self.root, f"{key}.failed", result.output[-2000:].encode())
            return None
        site_made = made.pop(SITE_HOOK, None)
        try:
            cache = self._store(key, {path.rsplit("/", 1)[-1]: pyc
                                      for path, pyc in made.items()})
            if site_made is not None and self.site is not None:
                _write_one(self.site / "__pycache__", *site_made)
        except OSError:  # a cache that cannot be written: this sandbox compiles as before
            self._made[key] = None
            return None
        self._made[key] = cache
        return cache

    def _site_source(self) -> str:
        if self.site is None:
            return ""
        try:
            return (self.site / "sitecustomize.py").read_text(encoding="utf-8")
        except OSError:
            return ""

    def _store(self, key: str, made: Mapping[str, tuple[str, bytes]]) -> Path:
        """Write the package's .pyc files under root/key/__pycache__ (atomically: a directory
        renamed into place; a concurrent maker's copy, identical, is kept if it won)."""
        self.root.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.root.chmod(0o755)
        staging = self.root / f".{key}.{os.getpid()}.{id(made)}"
        shutil.rmtree(staging, ignore_errors=True)
        for _source, (pyc_name, pyc) in made.items():
            _write_one(staging / "__pycache__", pyc_name, pyc)
        staging.chmod(0o755)
        try:
            staging.rename(self.root / key)
        except OSError:  # (another maker's identical copy won)
            shutil.rmtree(staging, ignore_errors=True)
        cache = self.root / key / "__pycache__"
        if not cache.is_dir():
            raise OSError(f"no bytecode directory {cache}")
        return cache


def _holds_exactly(workspace: Path, folder: Path, files: Sources) -> bool:
    """`folder` (no symbolic link on the way from the workspace) holds exactly `files`, byte for
    byte, and at most an empty `__pycache__` directory besides."""
    try:
        if folder.resolve() != workspace.resolve() / folder.relative_to(workspace):
            return False
        names = set(os.listdir(folder))
        extra = names - set(files)
        if extra - {"__pycache__"} or set(files) - names:
            return False
        if extra:
            cache = folder / "__pycache__"
            if cache.is_symlink() or not cache.is_dir() or os.listdir(cache):
                return False
        for module, text in files.items():
            path = folder / module
            if path.is_symlink() or not path.is_file():
                return False
            if path.read_bytes() != text.encode("utf-8"):
                return False
    except (OSError, ValueError):
        return False
    return True


def _accepted(result: ExecResult, wanted: Mapping[str, str]) -> dict[str, tuple[str, bytes]] | None:
    """source path -> (.pyc name, .pyc) from a compile run's output, or None unless it compiled
    every wanted source, each one's SHA-256 being the host's text's, into a checked-hash pyc
    named `<module>.<tag>.pyc` with one tag for all."""
    if result.exit_code != 0 or result.timed_out:
        return None
    lines = [line for line in result.output.splitlines() if line.startswith(MARK)]
    try:
        entries = json.loads(lines[-1][len(MARK):]) if lines else None
        if not isinstance(entries, list) or len(entries) != len(wanted):
            return None
        made: dict[str, tuple[str, bytes]] = {}
        tags: set[str] = set()
        for path, sha, pyc_name, packed in entries:
            text = wanted.get(path)
            if text is None or hashlib.sha256(text.encode("utf-8")).hexdigest() != sha:
                return None
            stem = path.rsplit("/", 1)[-1].removesuffix(".py")
            named = re.fullmatch(rf"{re.escape(stem)}\.([A-Za-z0-9_-]+)\.pyc", str(pyc_name))
            pyc = zlib.decompress(base64.b64decode(packed, validate=True))
            if named is None or len(pyc) < 16 or pyc[4:8] != CHECKED_HASH_FLAGS:
                return None
            tags.add(named.group(1))
            made[path] = (str(pyc_name), pyc)
    except (ValueError, TypeError, zlib.error):
        return None
    return made if len(tags) == 1 and set(made) == set(wanted) else None


def _write_one(directory: Path, name: str, data: bytes) -> None:
    """`directory/name` written atomically, world-readable (the sandbox's uid reads it)."""
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    staged = directory / f".{name}.{os.getpid()}"
    staged.write_bytes(data)
    staged.chmod(0o644)
    staged.replace(directory / name)

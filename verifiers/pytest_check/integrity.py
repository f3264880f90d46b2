"""Was a test run tampered with? Host-side checks around each verification pytest run.

Two sources, both independent of what pytest's JUnit report says:

- the workspace: the files that decide how tests run (conftest.py, test modules and the test
  files its own pytest configuration collects (agent/support/collected.py), tool
  configuration, `.pth` files, bytecode, packaging metadata, test support files such as
  `pkg/testing.py`, modules named like pytest or the standard library at the top level) are fingerprinted before and after the run; the code
  under test creating, changing or deleting any of them is tampering (and would otherwise
  reach a later run in the same workspace);
- the guard's record (verifiers/pytest_check/guard/): what pytest really observed per test,
  the tampering the guard saw in the process, and the exit code pytest.main returned; it is
  cross-checked with the JUnit report and the process's exit code.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pathspec

from ooda.agent.contracts.policy import (
    CONFIG_NAMES,
    RESERVED_DIRS,
    SHADOWED,
    TEST_DIRS,
    TEST_FILE_PATTERNS,
)
from ooda.agent.support import fstree
from ooda.agent.support.collected import collected
from ooda.agent.support.testsupport import is_test_support

MAX_ENTRIES = 200_000
"""Most directory entries walked; a workspace that grew past it counts as tampered."""
MAX_HASHED_BYTES = 64 * 1024 * 1024
MAX_LISTED = 5
BYTECODE_SUFFIXES = (".pyc", ".pyo", ".pth")
METADATA_SUFFIXES = (".egg-info", ".dist-info", ".egg-link")
TOO_MANY = "\0too-many"

Manifest = dict[str, str]
"""Repo-relative path -> fingerprint of a file that decides how tests run."""


def run_relevant(path: str, collected: pathspec.GitIgnoreSpec | None = None) -> bool:
    """True for a repo-relative POSIX path whose content changes how pytest runs (`collected`:
    the test files the repository's own pytest configuration collects)."""
    parts = path.split("/")
    if collected is not None and collected.match_file(path):
        return True
    name = parts[-1]
    if len(parts) >= 2 and parts[-2] == "__pycache__" and name.endswith((".pyc", ".pyo")):
        # bytecode stands for its source: a library module's is as much the candidate's to
        # change as the module (pytest's own tests write src/_pytest's in a subprocess)
        return run_relevant("/".join([*parts[:-2], name.split(".", 1)[0] + ".py"]))
    if "__pycache__" in parts or name.endswith(BYTECODE_SUFFIXES):
        return True
    if any(part.endswith(METADATA_SUFFIXES) for part in parts):
        return True
    if name == "conftest.py" or name in CONFIG_NAMES:
        return True
    if name.endswith(".py") and (
        any(part in TEST_DIRS for part in parts[:-1])
        or any(fnmatch.fnmatchcase(name, pattern) for pattern in TEST_FILE_PATTERNS)
    ):
        return True
    if not name.endswith((".py", ".so")):
        return False
    if is_test_support(path):  # assertion helpers the tests import (agent/support/testsupport.py)
        return True
    module = name.split(".", 1)[0] if len(parts) == 1 else parts[0]
    return module in SHADOWED  # shadows pytest or the standard library for the next run


def manifest(workspace: Path, known_files: Sequence[str] = ()) -> Manifest:
    """Fingerprints of the run-relevant files under `workspace` (symbolic links never
    followed; the verifiers' own .ooda/ left out), with the test files its pytest
    configuration collects and `known_files` (the required ids' files)."""
    tests = collected(workspace, (), known_files)
    spec = pathspec.GitIgnoreSpec.from_lines([*tests.patterns, *tests.doctest_globs])
    found: Manifest = {}
    entries = 0
    root = str(workspace)
    for dirpath, dirnames, filenames in fstree.walk(root):  # iterative: any depth
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        if not rel_dir:
            dirnames[:] = [d for d in dirnames if d not in RESERVED_DIRS]
        entries += len(dirnames) + len(filenames)
        if entries > MAX_ENTRIES:
            return {TOO_MANY: str(entries)}
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            rel = rel_dir + name
            if run_relevant(rel, spec):
                found[rel] = _fingerprint(os.path.join(dirpath, name))
    return found


def _fingerprint(path: str) -> str:
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            return "link:" + os.readlink(path)
        if not stat.S_ISREG(info.st_mode):
            return f"special:{stat.S_IFMT(info.st_mode)}"
        if info.st_size > MAX_HASHED_BYTES:
            return f"big:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"
        digest = hashlib.sha256()
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError as exc:
        return f"unreadable:{exc.errno}"


def changed_files(before: Manifest, after: Manifest) -> list[str]:
    """What the run did to the run-relevant files, one phrase each ('conftest.py (created)')."""
    if TOO_MANY in after and TOO_MANY not in before:
        return [f"the workspace grew to more than {MAX_ENTRIES} files"]
    found = []
    for path in sorted(before.keys() | after.keys()):
        if path not in after:
            found.append(f"{path} (deleted)")
        elif path not in before:
            found.append(f"{path} (created)")
        elif before[path] != after[path]:
            found.append(f"{path} (changed)")
    return found


def describe_files(changes: list[str]) -> str:
    shown = ", ".join(changes[:MAX_LISTED])
    more = f" and {len(changes) - MAX_LISTED} more" if len(changes) > MAX_LISTED else ""
    return (
        f"the code under test changed files that decide how tests run, while they ran: "
        f"{shown}{more}"
    )


# --------------------------------------------------------------------------- the guard record


def parse_record(data: bytes | None, key: bytes) -> dict[str, Any] | None:
    """The guard's record, or None when it is missing, not what the guard writes, or not
    signed with `key` (the run's own: a record written by anything else, a daemon the code
    under test left behind included, does not count)."""
    if data is None:
        return None
    mac, _, body = data.partition(b"\n")
    expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode("ascii")
    if not hmac.compare_digest(mac, expected):
        return None
    try:
        record = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("exit_code"), int)
        or not isinstance(record.get("problems"), list)
        or not isinstance(record.get("tests"), list)
    ):
        return None
    return record


def cross_check(
    record: dict[str, Any] | None,
    cases: Mapping[tuple[str, str], str],
    exit_code: int | None,
) -> list[str]:
    """Why the JUnit report (`cases`: (classname, name) -> outcome) and the exit code cannot
    be trusted, given the guard's record; empty when they agree."""
    if record is None:
        return [
            "the test process ended before pytest finished (os._exit or a crash in the code "
            "under test?): its own record of the run is missing (or not signed by the guard)"
        ]
    problems = [str(p) for p in record["problems"]]
    if record["exit_code"] != exit_code:
        problems.append(
            f"pytest finished with exit code {record['exit_code']} but the test process "
            f"exited with {exit_code}"
        )
    good: dict[tuple[str, str], bool] = {}
    for test in record["tests"]:
        if not isinstance(test, dict):
            continue
        key = (str(test.get("classname", "")), str(test.get("name", "")))
        good[key] = good.get(key, True) and test.get("good") is True
    lies = []
    for key, outcome in cases.items():
        if outcome != "passed":
            continue
        shown = ".".join(p for p in key if p)
        if key not in good:
            lies.append(f"{shown} is reported passed but never ran")
        elif not good[key]:
            lies.append(f"{shown} is reported passed but it failed, raised or was skipped")
    if lies:
        more = f" (and {len(lies) - MAX_LISTED} more)" if len(lies) > MAX_LISTED else ""
        problems.append(
            "the JUnit report disagrees with pytest: " + "; ".join(lies[:MAX_LISTED]) + more
        )
    return problems

"""What the base check found, kept per base: the second run on the same unpatched code reads
its facts instead of running the tests again (agent/verify/prepare.py).

An entry is found by a key that hashes everything the facts can depend on:
- the repository as a workspace copies it (every file's bytes and permission bits, links;
  agent/support/fstree.tree_digest with the workspace's exclusions);
- the plan as drafted: the tests (ids, command, the hidden test patch's text), the runner
  and its command, the pre-test commands, the environment's table (an environment image is
  named by the hash of its spec), the requirements file's bytes, the test timeout;
- the sandbox backend and, for the ones that run the host's own Python (bwrap, local), that
  interpreter and its pytest and pluggy versions;
- ooda's own code (every file of the package, by path, size and modification time: a changed
  guard, runner or sandbox image recipe makes new keys).
Only complete runs are kept (no timeout, no run that left no report). OODA_BASE_CACHE=0 turns
the cache off; entries live in $OODA_HOME/base-facts (one small JSON file each).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ooda.agent.support.fstree import tree_digest
from ooda.agent.support.home import ooda_home
from ooda.agent.verify.plan import BaseFacts, TaskPlan, Uncollectable
from ooda.agent.verify.workspace import COPY_EXCLUDES

FORMAT = 2
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agent", "verifiers", "tasks")
HOST_PYTHON_BACKENDS = frozenset({"bwrap", "local"})


def enabled() -> bool:
    return os.environ.get("OODA_BASE_CACHE", "").strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    return ooda_home() / "base-facts"


def base_key(plan: TaskPlan, backend: str | None) -> str | None:
    """The key of `plan`'s base facts on `backend` (None: not cacheable here)."""
    task = plan.task
    if not enabled() or not task.repo.is_dir():
        return None
    try:
        repo = tree_digest(task.repo, ignore=COPY_EXCLUDES.__contains__)
        requirements = (hashlib.sha256(task.requirements.read_bytes()).hexdigest()
                        if task.requirements is not None else None)
    except OSError:
        return None
    tests = plan.tests
    parts: dict[str, Any] = {
        "format": FORMAT,
        "ooda": _own_code(),
        "repo": repo,
        "requirements": requirements,
        "environment": plan.environment_table,
        "runner": [plan.runner.kind, plan.runner_cmd, list(plan.pre_test)],
        "tests": [list(tests.fail_to_pass), list(tests.pass_to_pass), tests.test_cmd,
                  tests.whole_files, tests.hidden_patch],
        "timeout_s": plan.stages.base_run_timeout_s,
        "backend": backend,
        "host": _host_python() if backend in HOST_PYTHON_BACKENDS else None,
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load(key: str) -> BaseFacts | None:
    """The facts kept under `key`, or None (none kept, or unreadable: the check runs)."""
    try:
        data = json.loads((cache_dir() / f"{key}.json").read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            return None
        facts = data["facts"]
        return BaseFacts(
            outcomes=dict(facts["outcomes"]),
            timed_out=bool(facts["timed_out"]),
            error=facts["error"],
            messages=dict(facts["messages"]),
            uncollectable=tuple(Uncollectable(**u) for u in facts["uncollectable"]),
            fail_to_pass_passing=tuple(facts["fail_to_pass_passing"]),
            pass_to_pass_passing=tuple(facts["pass_to_pass_passing"]),
            duration_s=float(facts["duration_s"]),
            environmental=dict(facts["environmental"]),
            skipped=tuple(facts["skipped"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store(key: str, facts: BaseFacts) -> None:
    """Keep `facts` under `key` when the run was complete (best effort: a full disk only
    costs the next run its shortcut)."""
    if facts.timed_out or facts.error is not None:
        return
    data = {"format": FORMAT, "facts": dataclasses.asdict(facts)}
    with contextlib.suppress(OSError, TypeError, ValueError):
        directory = cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".facts-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
            os.replace(tmp, directory / f"{key}.json")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


@functools.lru_cache(maxsize=1)
def _own_code() -> str:
    """ooda's files by path, size and modification time (a changed file makes new keys)."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        for directory, dirs, files in os.walk(PACKAGE_ROOT / package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                path = os.path.join(directory, name)
                with contextlib.suppress(OSError):
                    info = os.stat(path)
                    digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()


def _host_python() -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    versions = [sys.executable, sys.version]
    for name in ("pytest", "pluggy"):
        try:
            versions.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            versions.append(f"{name} -")
    return versions

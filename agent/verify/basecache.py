"""What the base check found, kept per base: the second run on the same unpatched code reads
its facts instead of running the tests again (agent/verify/prepare.py).

An entry is found by a key that hashes everything the facts can depend on that ooda can see:
- the repository as a workspace copies it (every file's bytes and permission bits, links;
  agent/support/fstree.tree_digest with the workspace's exclusions);
- the plan as drafted: the tests (ids, command, the hidden test patch's text), the runner
  and its command, the pre-test commands, the environment's table, the requirements file's
  bytes, the test timeout, the sandbox's limits (memory, processes, /tmp, /dev/shm, disk);
- what the tests run on (`runtime`): the Docker image's id (ooda's image, the one with the
  requirements baked in, or the task's environment image: a rebuild under the same tag is a
  new id), a root filesystem's directory and ready-marker stamps (bwrap: a rebuilt one is a
  new directory), or, for `--sandbox local`, the host's interpreter and its site-packages
  (every installed distribution's name and version, each directory's modification time);
  a backend ooda cannot name this way (none of these) is never cached;
- ooda's own code, the guard's with it (every file of the agent, verifiers and tasks
  packages, by path, size and modification time: a changed guard, runner or image recipe
  makes new keys).
Only complete runs are kept (no timeout, no run that left no report). A run whose facts come
from here says so (BaseFacts.kept_from, the plan line). OODA_BASE_CACHE=0 turns the cache off;
entries live in the user's cache directory, $OODA_HOME/base-facts (~/.cache/ooda by default;
one small JSON file each), never in the repository.

What the key cannot see, so a kept entry is wrong after it changes (OODA_BASE_CACHE=0, or
removing the directory, checks again): what a test reads outside the repository and its
image or interpreter (the clock and date, with `--sandbox local` the host's files,
environment variables and network); a flaky test (its first outcome is kept); a file changed
in place inside an image's filesystem, a root filesystem or site-packages without a new id,
marker or distribution version; ooda's own file edited to the same size and modification
time; the machine itself (CPU count, kernel, Docker's configuration).
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
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ooda.agent.contracts.protocols import SandboxBackend
from ooda.agent.sandbox import image
from ooda.agent.sandbox.bwrap import BwrapBackend
from ooda.agent.sandbox.docker.backend import DockerBackend
from ooda.agent.sandbox.limits import configured
from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.support.fstree import tree_digest
from ooda.agent.support.home import ooda_home
from ooda.agent.verify.environment import EnvironmentBackend
from ooda.agent.verify.plan import BaseFacts, TaskPlan, Uncollectable
from ooda.agent.verify.workspace import COPY_EXCLUDES

FORMAT = 3
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agent", "verifiers", "tasks")


def enabled() -> bool:
    return os.environ.get("OODA_BASE_CACHE", "").strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    return ooda_home() / "base-facts"


def base_digest(plan: TaskPlan, backend: str | None) -> str | None:
    """The hash of what `plan`'s base facts depend on short of the runtime (`key` adds it);
    None when not cacheable (the cache is off, no repository, an unreadable file)."""
    task = plan.task
    if not enabled() or not task.repo.is_dir():
        return None
    try:
        repo = tree_digest(task.repo, ignore=COPY_EXCLUDES.__contains__)
        requirements = (hashlib.sha256(task.requirements.read_bytes()).hexdigest()
                        if task.requirements is not None else None)
        limits = dataclasses.astuple(configured())
    except (OSError, ValueError):  # a limit that is not a number: the run says so itself
        return None
    tests = plan.tests
    parts: dict[str, Any] = {
        "format": FORMAT,
        "ooda": own_code(),
        "repo": repo,
        "requirements": requirements,
        "environment": plan.environment_table,
        "runner": [plan.runner.kind, plan.runner_cmd, list(plan.pre_test)],
        "tests": [list(tests.fail_to_pass), list(tests.pass_to_pass), tests.test_cmd,
                  tests.whole_files, tests.hidden_patch],
        "timeout_s": plan.stages.base_run_timeout_s,
        "limits": limits,
        "backend": backend,
    }
    return _hash(parts)


def key(digest: str | None, runtime: Sequence[str] | None) -> str | None:
    """The entry's key: the base's digest and what the tests run on (None: not cacheable)."""
    if digest is None or runtime is None:
        return None
    return _hash({"base": digest, "runtime": list(runtime)})


def runtime(backend: SandboxBackend, requirements: Path | None) -> list[str] | None:
    """What `backend`'s sandboxes run the tests on, named so that a rebuild changes the name;
    None when it cannot be named (an image not built yet, a backend of another kind: the
    classes are matched exactly, since a subclass may run the tests elsewhere)."""
    if type(backend) is EnvironmentBackend:
        inner = backend.inner
        if isinstance(inner, DockerBackend):
            return _docker_image(inner, backend.tag)
        if isinstance(inner, BwrapBackend) and backend.rootfs is not None:
            return _directory(backend.rootfs)
        return None
    if type(backend) is DockerBackend:
        tag = backend.image if requirements is None else image.requirements_tag(requirements)
        return _docker_image(backend, tag)
    if type(backend) is BwrapBackend:
        found = _directory(backend.rootfs)
        if found is not None and requirements is not None:
            site = _directory(image.requirements_site_path(requirements))
            return None if site is None else found + site
        return found
    if type(backend) is LocalBackend:
        return _host_python()
    return None


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
            kept_from=str(data["checked_at"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store(key: str, facts: BaseFacts) -> None:
    """Keep `facts` under `key` when the run was complete (best effort: a full disk only
    costs the next run its shortcut)."""
    if facts.timed_out or facts.error is not None:
        return
    data = {"format": FORMAT, "checked_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "facts": dataclasses.asdict(dataclasses.replace(facts, kept_from=None))}
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
def own_code() -> str:
    """ooda's files by path, size and modification time (a changed file makes new keys). Kept
    per process: the daemon (agent/startup/daemon.py) works it out before it forks its
    workers; it serves no command once a .py file of ooda changed (its key), and the data
    files that decide a verdict (environment overrides) reach the key through the plan."""
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


def _hash(parts: dict[str, Any]) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _docker_image(backend: DockerBackend, tag: str) -> list[str] | None:
    """The image's id (content-addressed: a rebuild under the same tag is another id)."""
    import docker.errors

    try:
        return ["docker", tag, str(backend.client.api.inspect_image(tag)["Id"])]
    except (docker.errors.DockerException, KeyError, OSError):
        return None


def _directory(path: Path) -> list[str] | None:
    """A root filesystem or site directory, built into a temporary directory then renamed
    into place with its ready marker: its inode and the marker's stamps change when rebuilt."""
    try:
        top = os.stat(path)
        marker = os.stat(path / image.MARKER)
    except OSError:
        return None
    return ["directory", str(path), f"{top.st_ino}:{top.st_mtime_ns}",
            f"{marker.st_ino}:{marker.st_mtime_ns}:{marker.st_size}"]


def _host_python() -> list[str]:
    """The host's interpreter (`--sandbox local` runs the tests with it) and what is
    installed for it: every distribution's name and version, every import directory's
    modification time (a module added or removed at its top)."""
    from importlib.metadata import distributions

    names = sorted(f"{d.metadata['Name']}=={d.version}" for d in distributions())
    stamps = []
    for entry in filter(None, sys.path):  # not "": the working directory
        with contextlib.suppress(OSError):
            stamps.append(f"{entry}:{os.stat(entry).st_mtime_ns}")
    return ["host", sys.executable, sys.version, *names, *stamps]

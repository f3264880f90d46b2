"""An environment described as data: what a task's tests need installed, and the hash that
names the image built from it (`ooda-env:<hash>`).

A spec is plain values (so it can come from task.toml, the SWE-bench table or detection) and
says: the Python wanted (hence the Debian release, see releases.py), Debian packages, pinned
pip packages, commands run before the install, how the repository installs itself, and the
test runner's own packages (the task's pytest and plugins, installed last so their pins win).
The hash covers the spec (but the runner's pre-test commands, run at test time), the build
recipe's version, the base image's recipe (so the release)
and the repository's install-relevant files (setup.py, pyproject.toml, requirements files...),
so an unchanged project reuses its image and a changed pin or dependency list gets a new one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import UsageError
from ooda.agent.sandbox.environments import releases
from ooda.agent.sandbox.environments.base import base_tag

RECIPE_VERSION = "2"
"""Bump when the build steps change in a way that changes what an image holds."""
OPTIONAL_RECIPE = "2"
"""The same, for the steps only a spec with optional packages has (environments/optional.py):
bumped there alone, so the other images keep their hash."""
IMAGE_REPO = "ooda-env"
DEFAULT_INSTALL = "python3 -m pip install -e ."
INSTALL_FILES = (
    "setup.py", "setup.cfg", "pyproject.toml", "requirements*.txt", "requirements/*.txt",
    "requirements/*.in", "*requirements*.txt", "tests/requirements*.txt",
    "test/requirements*.txt", "testing/requirements*.txt", "tests/requirements/*.txt",
)
"""Globs (relative to the repository) whose content changes what the install produces."""


@dataclass(frozen=True)
class RunnerSpec:
    """The task's own test runner: what to install for it and how it is invoked."""

    kind: str = "pytest"
    """pytest | django | sympy: a kind of verifiers/runners/ (its table, `runners()`)."""
    packages: tuple[str, ...] = ()
    """pip specs installed last, e.g. ("pytest==7.4.4", "pytest-httpbin==1.0.0")."""
    plugins: tuple[str, ...] = ()
    """Plugin module names loaded explicitly with `-p` (autoload stays off)."""
    test_cmd: str | None = None
    """The runner's command line, when it is not plain pytest."""
    pre_test: tuple[str, ...] = ()
    """Shell commands run before every test run at verification, in the shell that then runs
    the tests (exports, a service started in the background: verifiers/pretest.py). They
    change nothing in the image, so they are not hashed: a command that changes the system
    belongs in `pre_install`."""


@dataclass(frozen=True)
class EnvSpec:
    """Everything that goes into one environment image (all fields hashed)."""

    python: str = "3.11"
    """The Python the task wants ("3.9"); picks the Debian release unless `release` is set."""
    release: str | None = None
    """A Debian release named outright (overrides the Python table)."""
    apt: tuple[str, ...] = ()
    """Debian packages (build tools, C libraries) installed first."""
    pip: tuple[str, ...] = ()
    """pip requirement specs with pins, installed before the repository."""
    optional: tuple[str, ...] = ()
    """pip specs installed after `pip` (whose pins constrain them), each allowed to fail: a
    repository's optional test dependencies (a conda environment file's), whose absence only
    makes their tests skip."""
    pre_install: tuple[str, ...] = ()
    """Shell commands run (as root, in the repository) after the pip packages, before the
    repository's install (as SWE-bench orders them)."""
    requirements: tuple[str, ...] = ()
    """Requirements files of the repository; the first that exists is installed (pip -r)."""
    install: str | None = DEFAULT_INSTALL
    """How the repository installs itself, run in it; None: it is not installed."""
    runner: RunnerSpec = field(default_factory=RunnerSpec)
    build_env: tuple[tuple[str, str], ...] = ()
    """Environment variables for the build only (e.g. SETUPTOOLS_SCM_PRETEND_VERSION)."""
    tools: tuple[str, ...] = ()
    """ooda's own tools for this Python (e.g. mypy, ruff pins), kept apart in /opt/ooda-tools."""

    @property
    def debian(self) -> releases.Release:
        """The Debian release this spec builds on."""
        if self.release is not None:
            return releases.release(self.release)
        return releases.for_python(self.python)

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready data (the inverse of from_dict)."""
        data = asdict(self)
        data["build_env"] = dict(self.build_env)
        if not self.optional:
            del data["optional"]  # specs without it keep the hash they had before it existed
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "environment") -> EnvSpec:
        """A spec from a table (task.toml's [environment], the SWE-bench data); UsageError
        naming `where` on an unknown key or a wrong type."""
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; known: "
                             f"{', '.join(sorted(known))}")
        runner = data.get("runner", {})
        if not isinstance(runner, Mapping):
            raise UsageError(f"{where}: 'runner' must be a table")
        runner_known = set(RunnerSpec.__dataclass_fields__)
        if set(runner) - runner_known:
            raise UsageError(f"{where}.runner: unknown key(s) "
                             f"{', '.join(sorted(set(runner) - runner_known))}")
        build_env = data.get("build_env", {})
        if not isinstance(build_env, Mapping):
            raise UsageError(f"{where}: 'build_env' must be a table of strings")
        spec = cls(
            python=_str(data, "python", "3.11", where),
            release=_opt_str(data, "release", where),
            apt=_strs(data, "apt", where),
            pip=_strs(data, "pip", where),
            optional=_strs(data, "optional", where),
            pre_install=_strs(data, "pre_install", where),
            requirements=_strs(data, "requirements", where),
            install=_opt_str(data, "install", where) if "install" in data else DEFAULT_INSTALL,
            runner=RunnerSpec(
                kind=_str(runner, "kind", "pytest", f"{where}.runner"),
                packages=_strs(runner, "packages", f"{where}.runner"),
                plugins=_strs(runner, "plugins", f"{where}.runner"),
                test_cmd=_opt_str(runner, "test_cmd", f"{where}.runner"),
                pre_test=_strs(runner, "pre_test", f"{where}.runner"),
            ),
            build_env=tuple(sorted((str(k), str(v)) for k, v in build_env.items())),
            tools=_strs(data, "tools", where),
        )
        spec.debian  # noqa: B018 -- an unknown release or Python is bad input, said now
        return spec


def _str(data: Mapping[str, Any], key: str, default: str, where: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}: {key!r} must be a non-empty string")
    return value


def _opt_str(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise UsageError(f"{where}: {key!r} must be a string")
    return value


def _strs(data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where}: {key!r} must be a list of strings")
    return tuple(value)


def install_files(repo: Path, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """sha256 of each install-relevant file of `repo` (INSTALL_FILES and `extra`), by path."""
    found: dict[str, str] = {}
    for pattern in (*INSTALL_FILES, *extra):
        for path in sorted(repo.glob(pattern)):
            if path.is_file() and not path.is_symlink():
                rel = path.relative_to(repo).as_posix()
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return dict(sorted(found.items()))


def spec_hash(spec: EnvSpec, repo: Path | None = None) -> str:
    """A stable 16-hex-digit hash of the spec, the recipe and (when the spec installs it and
    `repo` is given) the repository's install-relevant files."""
    payload: dict[str, Any] = {
        "recipe": RECIPE_VERSION,
        "base": base_tag(spec.debian),
        "spec": spec.to_dict(),
    }
    payload["spec"]["runner"]["pre_test"] = []  # run at test time, not part of the image
    if spec.optional:
        payload["optional_recipe"] = OPTIONAL_RECIPE
    if repo is not None and spec.install is not None:
        payload["repo_files"] = install_files(repo, spec.requirements)
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def image_tag(spec: EnvSpec, repo: Path | None = None) -> str:
    """`ooda-env:<hash>`, the Docker image built from `spec` (and `repo`)."""
    return f"{IMAGE_REPO}:{spec_hash(spec, repo)}"

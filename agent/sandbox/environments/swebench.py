"""SWE-bench's environments as ooda specs: (repository, version) -> EnvSpec, from the data in
swebench_specs.json (values transcribed from the SWE-bench harness's published specs) and ooda's
own changes to them, one file per repository in swebench_overrides/ (OWNER__NAME.toml, a table
per version and "*" for all, each entry with a `note` saying why).

Translations, each because ooda's verification differs from the harness's conda setup:
- conda `packages` are installed with pip (the same names on PyPI for these repositories);
- `requirements` installs the first of the repository's requirements files that exists;
- a non-editable `pip install .` becomes `pip install -e .`: the candidate's code is the
  workspace mounted at /work, so the install must point there, not at a copy;
- the test command decides the runner kind (pytest, django's runtests.py, sympy's bin/test);
- the repository is built from an export without .git, so projects versioned by
  setuptools_scm get SETUPTOOLS_SCM_PRETEND_VERSION (the instance's version) for the build;
- the harness runs `eval_commands` before the tests, as root, in its writable image; ooda's
  verification runs unprivileged on an image it never changes, so only the commands that set
  the shell's environment (`export NAME=VALUE`) stay at test time (the runner's `pre_test`);
  every other one changes the system (django's `sed ... /etc/locale.gen && locale-gen`) and
  runs once in the build, after `pre_install` (with Debian's `locales` package, which the
  harness's base image has and ooda's has not, when it runs locale-gen). An override's own
  `pre_test` (a list of shell commands) is run at test time as it is;
- the harness's base image carries build tools (a compiler, libffi/libtiff headers, git) and
  conda's Python its headers: every environment gets them (`ooda_defaults.apt`), so C
  extensions (astropy) and pins without a wheel for their Python build as there;
- unpinned dependencies resolve as of `ooda_defaults.pip_uploaded_prior_to` (pip's
  PIP_UPLOADED_PRIOR_TO), not as of today: the harness's specs were validated then.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import UsageError
from ooda.agent.sandbox.environments.spec import EnvSpec, RunnerSpec

DATA = Path(__file__).with_name("swebench_specs.json")
OVERRIDES = Path(__file__).with_name("swebench_overrides")
_EXPORT = re.compile(r"^export [A-Za-z_][A-Za-z0-9_]*=\S*$")
_NON_EDITABLE = re.compile(r"^(python3? -m pip install)((?: -\S+)*) \.(?=\s|$|\[)")


@functools.cache
def _data() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return loaded


HARNESS_APT: tuple[str, ...] = tuple(_data().get("ooda_defaults", {}).get("apt", ()))
"""Debian packages every SWE-bench environment gets (the harness image's build tools)."""


def repos() -> list[str]:
    """The repositories (`owner/name`) the data covers."""
    return sorted(_data()["repos"])


def versions(repo: str) -> list[str]:
    """The versions the data has for `repo` (empty when the repository is unknown)."""
    return list(_data()["repos"].get(repo, {}).get("versions", {}))


def runner_kind(test_cmd: str) -> str:
    """pytest | django | sympy, from the harness's test command."""
    if "runtests.py" in test_cmd:
        return "django"
    if "bin/test" in test_cmd:
        return "sympy"
    if "pytest" in test_cmd or test_cmd.startswith("tox"):
        return "pytest"
    raise UsageError(f"unknown test runner in {test_cmd!r}")


def editable(install: str) -> str:
    """`python -m pip install [opts] .` -> the same with -e (see the module docstring)."""
    match = _NON_EDITABLE.match(install)
    if match is None or " -e" in (match.group(2) or ""):
        return install
    return f"{match.group(1)}{match.group(2)} -e .{install[match.end():]}"


def raw(repo: str, version: str) -> dict[str, Any]:
    """The data for (repo, version), ooda overrides applied; UsageError when there is none."""
    entry = _data()["repos"].get(repo)
    if entry is None:
        raise UsageError(f"no SWE-bench environment for {repo}; known: {', '.join(repos())}")
    found = entry["versions"].get(version)
    if found is None:
        raise UsageError(f"no SWE-bench environment for {repo} version {version}; known: "
                         f"{', '.join(versions(repo))}")
    overrides = _overrides(repo)
    merged: dict[str, Any] = {**found, **overrides.get("*", {}), **overrides.get(version, {})}
    return merged


@functools.cache
def _overrides(repo: str) -> dict[str, Any]:
    """ooda's changes for `repo` by version (empty when it has none)."""
    path = OVERRIDES / f"{repo.replace('/', '__')}.toml"
    if not path.is_file():
        return {}
    return tomllib.loads(path.read_text(encoding="utf-8"))


def conda_env_files(repo: str, version: str) -> tuple[str, ...]:
    """The conda environment files (first that exists) whose packages the harness installs
    for `repo` at `version`; () when its spec names none."""
    if not raw(repo, version).get("conda_env"):
        return ()
    return tuple(_data()["repos"][repo].get("conda_env_files", ()))


def split_eval_commands(commands: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the commands that change the system: run in the build, those that only export a
    variable: run before the tests), in their order (see the module docstring)."""
    build = tuple(c for c in commands if not _EXPORT.match(c.strip()))
    return build, tuple(c.strip() for c in commands if _EXPORT.match(c.strip()))


def spec_for(repo: str, version: str) -> EnvSpec:
    """The environment a SWE-bench instance of `repo` at `version` runs in."""
    data = raw(repo, version)
    build, pre_test = split_eval_commands(list(data.get("eval_commands", ())))
    apt = _unique((*HARNESS_APT, *data.get("apt", ())))
    if any("locale-gen" in c for c in build) and "locales" not in apt:
        apt += ("locales",)
    test_cmd = str(data.get("test_cmd", "pytest -rA"))
    requirements: tuple[str, ...] = ()
    if data.get("requirements"):
        requirements = tuple(_data()["repos"][repo].get("requirements_files", ()))
    install = data.get("install")
    return EnvSpec(
        python=str(data["python"]),
        release=data.get("release"),
        apt=apt,
        pip=(*data.get("packages", ()), *data.get("pip_packages", ())),
        pre_install=(*data.get("pre_install", ()), *build),
        requirements=requirements,
        install=editable(str(install)) if install else None,
        runner=RunnerSpec(kind=runner_kind(test_cmd), test_cmd=test_cmd,
                          pre_test=(*pre_test, *data.get("pre_test", ()))),
        build_env=tuple(sorted(_build_env(version).items())),
    )


def _unique(items: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _build_env(version: str) -> dict[str, str]:
    env = {"SETUPTOOLS_SCM_PRETEND_VERSION": scm_version(version)}
    cutoff = _data().get("ooda_defaults", {}).get("pip_uploaded_prior_to")
    if cutoff:
        env["PIP_UPLOADED_PRIOR_TO"] = str(cutoff)
    return env


def scm_version(version: str) -> str:
    """A PEP 440 version for setuptools_scm from SWE-bench's "4.5" (-> "4.5.0")."""
    return version if version.count(".") >= 2 else f"{version}.0"

"""agent/environments: specs and their hashes, the SWE-bench data, failure causes, and (real
Docker, slow) an environment built from a small local repository on bullseye: a src layout
installed editable, the repository's own old pytest with a plugin, a Python-3.9-only
dependency; verification containers from it have no network and run the repo's pytest.

The base images are cached in $OODA_HOME like the sandbox image, so only the first run on a
machine pays for debootstrap; the environment build itself is cached by its hash too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from env_demo import DEMO_PYPROJECT as PYPROJECT
from sandbox_helpers import REQUIRED

from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.sandbox.environments import (
    base,
    builder,
    causes,
    container,
    hostconfig,
    releases,
    swebench,
)
from ooda.agent.sandbox.environments.spec import EnvSpec, RunnerSpec, image_tag, spec_hash

# --------------------------------------------------------------------------- data, fast


def test_python_versions_map_to_debian_releases() -> None:
    assert releases.for_python("3.9").name == "bullseye"
    assert releases.for_python("3.11.7").name == "bookworm"
    assert releases.for_python("3.13").name == "trixie"
    assert EnvSpec(python="3.9", release="trixie").debian.name == "trixie"
    with pytest.raises(UsageError, match="no Debian release serves Python 2.7"):
        releases.for_python("2.7")


def test_spec_hash_is_stable_and_covers_pins_and_install_files(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    spec = EnvSpec(python="3.9", pip=("six==1.16.0",))
    assert spec_hash(spec, tmp_path) == spec_hash(EnvSpec(python="3.9", pip=("six==1.16.0",)),
                                                  tmp_path)
    assert image_tag(spec, tmp_path) == f"ooda-env:{spec_hash(spec, tmp_path)}"
    assert spec_hash(spec, tmp_path) != spec_hash(EnvSpec(python="3.9", pip=("six==1.15.0",)),
                                                  tmp_path)
    assert spec_hash(spec, tmp_path) != spec_hash(
        EnvSpec(python="3.9", pip=("six==1.16.0",), runner=RunnerSpec(packages=("pytest",))),
        tmp_path)
    before = spec_hash(spec, tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'y'\n")
    assert spec_hash(spec, tmp_path) != before
    (tmp_path / "README.md").write_text("not install-relevant\n")
    assert spec_hash(spec, tmp_path) == spec_hash(spec, tmp_path)


def test_spec_from_a_table_and_bad_tables() -> None:
    spec = EnvSpec.from_dict({"python": "3.9", "pip": ["six==1.16.0"], "install": None,
                              "runner": {"packages": ["pytest==7.4.4"], "plugins": ["xdist"]}})
    assert spec.install is None and spec.runner.packages == ("pytest==7.4.4",)
    assert EnvSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(UsageError, match="unknown key"):
        EnvSpec.from_dict({"pyton": "3.9"})
    with pytest.raises(UsageError, match="no Debian release serves"):
        EnvSpec.from_dict({"python": "2.7"})


def test_every_swebench_spec_resolves_to_a_release_and_a_runner() -> None:
    wanted = {"sqlfluff/sqlfluff", "pvlib/pvlib-python", "pylint-dev/astroid", "pydicom/pydicom",
              "marshmallow-code/marshmallow", "pyvista/pyvista", "sympy/sympy",
              "pytest-dev/pytest", "sphinx-doc/sphinx", "astropy/astropy", "psf/requests",
              "pylint-dev/pylint", "pydata/xarray", "mwaskom/seaborn", "pallets/flask",
              "django/django", "matplotlib/matplotlib", "scikit-learn/scikit-learn"}
    assert wanted <= set(swebench.repos())
    for repo in wanted:
        for version in swebench.versions(repo):
            spec = swebench.spec_for(repo, version)
            assert spec.debian.name in ("buster", "bullseye", "bookworm", "trixie")
            assert spec.runner.kind in ("pytest", "django", "sympy")
    requests = swebench.spec_for("psf/requests", "2.4")
    assert requests.install == "python -m pip install -e ." and "pytest" in requests.pip
    assert swebench.spec_for("django/django", "3.0").runner.kind == "django"
    assert swebench.spec_for("sympy/sympy", "1.1").runner.kind == "sympy"
    assert swebench.spec_for("pallets/flask", "2.3").requirements == ("requirements/dev.txt",)
    assert swebench.spec_for("pydata/xarray", "0.12").debian.name == "bullseye"
    with pytest.raises(UsageError, match="no SWE-bench environment for psf/requests version 9"):
        swebench.spec_for("psf/requests", "9")


@pytest.mark.parametrize(("log", "expected"), [
    ("Collecting x\nERROR: Could not find a version that satisfies the requirement "
     "MarkupSafe==2.1.1 (from versions: 2.1.3)\nERROR: No matching distribution found for "
     "MarkupSafe==2.1.1\n", "No matching distribution found for MarkupSafe==2.1.1"),
    ("Reading package lists...\nE: Unable to locate package libfoo-dev\n",
     "Unable to locate package libfoo-dev"),
    ("  File \"setup.py\", line 3\nModuleNotFoundError: No module named 'numpy'\n",
     "ModuleNotFoundError: No module named 'numpy'"),
    ("  File \"x.py\", line 1\n      raise LookupError(error_msg)\n  LookupError: setuptools-scm "
     "was unable to detect version for /work.\nerror: metadata-generation-failed\n\u00d7 "
     "Encountered error while generating package metadata.\n",
     "LookupError: setuptools-scm was unable to detect version for /work"),
    ("", "the build exited with status 2"),
])
def test_the_cause_of_a_failed_build_is_one_line(log: str, expected: str) -> None:
    assert causes.cause(log, 2) == expected


def test_host_config_carries_the_ca_bundle_and_local_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    index = tmp_path / "mirror" / "simple"
    index.mkdir(parents=True)
    monkeypatch.setenv("PIP_CERT", str(bundle))
    monkeypatch.setenv("PIP_INDEX_URL", f"file://{index}")
    config = hostconfig.host_config()
    assert config.binds[str(bundle)] == hostconfig.CA_IN_CONTAINER
    assert config.env["PIP_CERT"] == hostconfig.CA_IN_CONTAINER
    assert config.env["PIP_INDEX_URL"] == f"file://{index}"
    assert config.binds[str(index.parent)] == str(index.parent)  # the index's files beside it


# --------------------------------------------------------------------------- real Docker

TEST_DEMO = """\
import sys

import markupsafe
import pytest

from demo import greet


def test_greet(mocker):
    assert greet() == "hello"
    assert sys.version_info[:2] == (3, 9)
    assert pytest.__version__ == "7.4.4"
    assert markupsafe.__version__ == "2.0.1"
    assert mocker is not None  # the plugin the task names, loaded with -p
"""
SPEC = EnvSpec(python="3.9", runner=RunnerSpec(packages=("pytest==7.4.4", "pytest-mock==3.12.0"),
                                               plugins=("pytest_mock",)))
"""A src layout installed with `pip install -e .`, the repo's own pytest 7.4.4 and
pytest-mock, and a dependency pinned to a version with wheels for Python 3.9 only."""


def _docker() -> Any:
    from ooda.agent.sandbox.docker.launch import connect

    try:
        return connect(timeout_s=3600)
    except InfraError as exc:
        if REQUIRED:
            pytest.fail(f"OODA_REQUIRE_SANDBOXES=1 but Docker is unavailable: {exc}")
        pytest.skip(str(exc))


def _make_repo(root: Path) -> Path:
    repo = root / "demo"
    (repo / "src" / "demo").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "src" / "demo" / "__init__.py").write_text('def greet():\n    return "hello"\n')
    (repo / "tests" / "test_demo.py").write_text(TEST_DEMO)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "demo"], check=True)
    return repo


@pytest.fixture(scope="module")
def docker_client() -> Iterator[Any]:
    client = _docker()
    yield client
    client.close()


@pytest.fixture(scope="module")
def demo_env(docker_client: Any, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[Path, builder.BuiltEnv]:
    repo = _make_repo(tmp_path_factory.mktemp("envrepo"))
    return repo, builder.ensure_env(docker_client, SPEC, repo, log=lambda _msg: None)


def _run(client: Any, tag: str, workspace: Path, argv: list[str]) -> tuple[int, str]:
    """A verification-like container: no network, read-only root, the workspace at /work."""
    box = client.containers.run(
        tag, argv, detach=True, network_mode="none", read_only=True,
        tmpfs={"/tmp": "size=64m"}, volumes={str(workspace): {"bind": "/work", "mode": "rw"}},
        environment={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "HOME": "/tmp"},
        labels={"ooda": "1"}, user="0:0")
    try:
        code = int(box.wait(timeout=300)["StatusCode"])
        return code, box.logs().decode(errors="replace")
    finally:
        box.remove(force=True)


@pytest.mark.docker
@pytest.mark.slow
def test_an_environment_is_built_once_and_runs_the_repos_own_pytest_offline(
    docker_client: Any, demo_env: tuple[Path, builder.BuiltEnv], tmp_path: Path
) -> None:
    repo, env = demo_env
    assert env.tag == image_tag(SPEC, repo) and env.release == "bullseye"
    again = builder.ensure_env(docker_client, SPEC, repo, log=lambda _msg: None)
    assert not again.built and again.tag == env.tag

    workspace = tmp_path / "work"
    subprocess.run(["cp", "-a", str(repo), str(workspace)], check=True)
    code, out = _run(docker_client, env.tag, workspace,
                     ["python3", "-m", "pytest", "-p", "pytest_mock", "-q", "tests"])
    assert code == 0, out
    assert "1 passed" in out

    # the editable install imports the workspace (the candidate's code), not a copy
    (workspace / "src" / "demo" / "__init__.py").write_text('def greet():\n    return "bye"\n')
    code, out = _run(docker_client, env.tag, workspace,
                     ["python3", "-m", "pytest", "-p", "pytest_mock", "-q", "tests"])
    assert code == 1 and "1 failed" in out, out

    # no network at verification
    probe = ("import socket\ntry:\n    socket.create_connection(('pypi.org', 443), timeout=5)\n"
             "except OSError as e:\n    print('offline', type(e).__name__)\nelse:\n    print('ONLINE')")
    code, out = _run(docker_client, env.tag, workspace, ["python3", "-c", probe])
    assert "offline" in out and "ONLINE" not in out


@pytest.mark.docker
@pytest.mark.slow
def test_a_failed_build_says_why_in_one_line_and_is_not_redone(
    docker_client: Any, demo_env: tuple[Path, builder.BuiltEnv],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _ = demo_env
    spec = EnvSpec(python="3.9", install=None, pip=("MarkupSafe==0.0.999",),
                   build_env=(("OODA_TEST_RUN", uuid.uuid4().hex),))  # a fresh hash each run
    with pytest.raises(builder.EnvBuildError) as first:
        builder.ensure_env(docker_client, spec, repo, log=lambda _msg: None)
    assert first.value.cause == "No matching distribution found for MarkupSafe==0.0.999"
    assert "\n" not in str(first.value)

    def no_second_build(*_args: object, **_kwargs: object) -> container.Outcome:
        raise AssertionError("a failed environment was built again")

    monkeypatch.setattr(container, "run_script", no_second_build)
    with pytest.raises(builder.EnvBuildError, match="MarkupSafe==0.0.999"):
        builder.ensure_env(docker_client, spec, repo, log=lambda _msg: None)
    with pytest.raises(AssertionError, match="built again"):
        builder.ensure_env(docker_client, spec, repo, force=True, log=lambda _msg: None)
    shutil.rmtree(builder.env_dir(first.value.spec_hash), ignore_errors=True)


@pytest.mark.docker
@pytest.mark.slow
def test_a_build_container_reaches_the_registries_with_the_hosts_settings(
    docker_client: Any, demo_env: tuple[Path, builder.BuiltEnv]
) -> None:
    base_image = base.ensure_base_image(docker_client, releases.release("bullseye"))
    script = ("python3 -c \"import urllib.request; print(urllib.request.urlopen("
              "'https://pypi.org/simple/six/', timeout=60).status)\"\n"
              "python3 -c \"import json, os; print(json.dumps(sorted(os.environ)))\"")
    outcome = container.run_script(docker_client, base_image, script, hostconfig.host_config())
    assert outcome.exit_code == 0, outcome.log
    lines = outcome.log.strip().splitlines()
    assert lines[-2] == "200"
    if hostconfig.ca_bundle() is not None:
        assert "SSL_CERT_FILE" in json.loads(lines[-1])


@pytest.mark.skipif(os.geteuid() != 0, reason="exporting a root filesystem needs root")
@pytest.mark.docker
@pytest.mark.slow
def test_bwrap_can_use_the_same_root_filesystem(
    docker_client: Any, demo_env: tuple[Path, builder.BuiltEnv], tmp_path: Path
) -> None:
    from ooda.agent.sandbox.environments.rootfs import export_rootfs

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    repo, env = demo_env
    root = export_rootfs(docker_client, env.tag, env.spec_hash)
    workspace = tmp_path / "work"
    subprocess.run(["cp", "-a", str(repo), str(workspace)], check=True)
    done = subprocess.run(
        ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", str(root), "/",
         "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", str(workspace),
         "/work", "--chdir", "/work", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin",
         "--setenv", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1", "--setenv", "HOME", "/tmp",
         "python3", "-m", "pytest", "-p", "pytest_mock", "-q", "-p", "no:cacheprovider",
         "tests"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout

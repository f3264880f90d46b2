"""A task's own environment for its verification: built once, then every sandbox opens on it.

When a task names an environment (task.toml's [environment], an EnvSpec), the TaskVerifier
calls `prepare_environment` once: it builds (or finds) the image `ooda-env:<hash>` under the
builder's lock (so parallel tasks and candidates of one task build it once; a failure is
recorded and raised again, EnvBuildError, an InfraError), and makes the base every workspace
is copied from: the repository plus the files the build's install added to it (egg-info,
generated version files, compiled extensions), as trusted base. `EnvironmentBackend` wraps the
task's backend so that the warm pool's sandboxes open on that image (Docker) or on its
filesystem exported as a directory (bwrap; Docker still builds it).
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.protocols import Sandbox, SandboxBackend
from ooda.agent.sandbox.bwrap import BwrapBackend
from ooda.agent.sandbox.docker.backend import DockerBackend
from ooda.agent.sandbox.docker.launch import connect
from ooda.agent.sandbox.environments.builder import BuiltEnv, ensure_env, env_dir
from ooda.agent.sandbox.environments.rootfs import export_rootfs
from ooda.agent.sandbox.environments.spec import EnvSpec, spec_hash
from ooda.agent.sandbox.image import stderr_log
from ooda.agent.support import fstree

PLUGINS_VAR = "OODA_PYTEST_PLUGINS"
"""The container's variable naming the pytest plugins the guard loads with `-p`
(the guard, verifiers/pytest_check/guard/, reads it before any repository code runs)."""


@dataclass(frozen=True)
class PreparedEnv:
    """A built environment and the base repository its workspaces are copied from."""

    built: BuiltEnv
    base_repo: Path
    plugins: tuple[str, ...]
    """pytest plugins the task's runner names and those installed in the image, loaded with
    `-p` (autoload stays off)."""
    rootfs: Path | None = None
    """The image's filesystem as a directory, for the bwrap backend."""
    pre_test: tuple[str, ...] = ()
    """Shell commands run before every test run, in its shell (`runner.pre_test`)."""


def prepare_environment(
    spec: EnvSpec, repo: Path, backend: SandboxBackend, work_root: Path, *,
    retry_failed: bool = False,
) -> PreparedEnv:
    """Build (or reuse) the image of `spec` (the plan's environment, parsed once) for `repo`
    and lay out repo + overlay under work_root; UsageError for a backend without images."""
    if backend.name not in ("docker", "bwrap"):
        raise UsageError(
            f"this task names its own environment ([environment]), which needs the docker or "
            f"bwrap sandbox (not {backend.name}): pass --sandbox docker"
        )
    # Docker builds the image for bwrap too
    client = backend.client if isinstance(backend, DockerBackend) else connect()
    if retry_failed:
        _forget_failure(spec_hash(spec, repo))
    built = ensure_env(client, spec, repo, log=stderr_log)
    rootfs = export_rootfs(client, built.tag, built.spec_hash) if backend.name == "bwrap" else None
    base = work_root / "env-base"
    fstree.remove_tree(base)
    shutil.copytree(repo, base, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    if built.overlay.is_dir():
        shutil.copytree(built.overlay, base, symlinks=True, dirs_exist_ok=True)
    plugins = tuple(dict.fromkeys((*spec.runner.plugins, *built.plugins)))
    return PreparedEnv(built, base, plugins, rootfs, spec.runner.pre_test)


_retried: set[str] = set()
_retried_lock = threading.Lock()


def _forget_failure(digest: str) -> None:
    """Let a failed build be tried again, once per hash in this process (the other tasks of
    an `ooda eval --retry-errors` that share it then see that retry's outcome)."""
    with _retried_lock:
        if digest in _retried:
            return
        _retried.add(digest)
        (env_dir(digest) / "failure.txt").unlink(missing_ok=True)


class EnvironmentBackend:
    """The task's backend, opening every sandbox on the environment's image."""

    def __init__(self, inner: SandboxBackend, prepared: PreparedEnv) -> None:
        self.inner = inner
        self.tag = prepared.built.tag
        self.rootfs = prepared.rootfs
        self.plugins = prepared.plugins
        self.name = inner.name
        self.reusable = inner.reusable
        self.workspace_owner: tuple[int, int] | None = getattr(inner, "workspace_owner", None)

    def open(self, workspace: Path, *, requirements: Path | None = None) -> Sandbox:
        env = {PLUGINS_VAR: ",".join(self.plugins)} if self.plugins else None
        inner = self.inner
        if isinstance(inner, BwrapBackend) and self.rootfs is not None:
            return inner.open_rootfs(workspace, self.rootfs, env)  # the image's filesystem
        if isinstance(inner, DockerBackend):
            return inner.open_image(workspace, self.tag, env)
        raise UsageError(f"a task's own environment needs the docker or bwrap sandbox, not "
                         f"{inner.name}")

    def adopt(self, launched: object, *, requirements: Path | None = None) -> Sandbox | None:
        """A container started ahead of need is on ooda's image, never this one."""
        return None

    def close(self) -> None:
        """The inner backend belongs to the caller."""

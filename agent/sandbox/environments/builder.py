"""Build an environment image from its spec, once per hash, and remember failures.

Steps: the release's base image (base.py) with the spec's Debian packages as a layer shared by
every environment that asks for the same ones (aptlayer.py), then one build container with the
network (container.py) that copies the repository to /work and runs, as root: the repository's
requirements file, pinned pip packages (so their pins win), optional test dependencies
(optional.py), pre-install commands, the repository's own install, the test runner's packages
(so the task's pytest wins), the optional packages that break on import left out again, ooda's
tools into /opt/ooda-tools. Files the
install created inside the repository (egg-info, compiled extensions, generated version files)
are kept as /opt/ooda-env/overlay.tar and on the host under envs/<hash>/overlay, because the
workspace mounted at /work at verification time hides the build's /work; an editable install
points at /work, so it imports the candidate's code. The container is committed as
`ooda-env:<hash>` and runs, like every sandbox, with no network.

The pytest plugins installed in the image (its `pytest11` entry points: pytest-mock, pytest-xdist,
the task's own...) are listed once per image (envs/<hash>/plugins.txt): verification loads them
with `-p`, as pytest's autoload would, while autoload itself stays off (it would also load entry
points a candidate adds).

A failed build is recorded (envs/<hash>/failure.txt: one line, the real cause; build.log: the
whole output) and raised again for the same hash without building, until `force`.
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors

from ooda.agent.contracts.errors import InfraError
from ooda.agent.sandbox import image
from ooda.agent.sandbox.docker import image as docker_image
from ooda.agent.sandbox.environments import aptlayer, base, causes, container, hostconfig
from ooda.agent.sandbox.environments.optional import check_script, optional_script
from ooda.agent.sandbox.environments.spec import EnvSpec, image_tag, spec_hash
from ooda.agent.sandbox.image import locked
from ooda.agent.support.env_numbers import positive_from_env
from ooda.agent.support.tarsafe import extract_all

ENV_DIR_IN_IMAGE = "/opt/ooda-env"
TOOLS_DIR = "/opt/ooda-tools"
OVERLAY_SCRIPT = r"""
import os, sys, tarfile
before = set(open(sys.argv[1]).read().split("\0"))
with tarfile.open(sys.argv[2], "w") as out:
    for top, dirs, files in os.walk("/work"):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", ".git")]
        for name in dirs + files:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, "/work")
            if rel not in before and (name in files or os.path.islink(path)):
                out.add(path, arcname=rel, recursive=False)
"""
"""Runs in the build container: tar the files the install added to /work."""
PLUGINS_SCRIPT = r"""
import importlib.metadata as m
eps = m.entry_points()
for ep in eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", []):
    print(ep.value.split(":")[0].strip())
"""
"""Runs in the image: the module of each installed pytest plugin (pytest11 entry point)."""


class EnvBuildError(InfraError):
    """An environment that could not be built; `cause` is the one line that says why."""

    def __init__(self, spec_hash: str, cause: str, log_path: Path) -> None:
        super().__init__(f"environment {spec_hash} could not be built: {cause} (log: {log_path})")
        self.spec_hash = spec_hash
        self.cause = cause
        self.log_path = log_path


@dataclass(frozen=True)
class BuiltEnv:
    """A ready environment image."""

    tag: str
    spec_hash: str
    release: str
    overlay: Path
    """Host directory of the files the install added to the repository (maybe empty)."""
    built: bool
    """True when this call built it (False: it was there already)."""
    seconds: float
    plugins: tuple[str, ...] = ()
    """Modules of the pytest plugins installed in the image (loaded with `-p`)."""


def env_dir(digest: str) -> Path:
    """$OODA_HOME/envs/<hash>: the failure record, build log and overlay of one environment."""
    return image.ooda_home() / "envs" / digest


VCS_LINES_OUT = (
    "find . -path ./.git -prune -o -type f -name '*.txt' -path '*requirements*' -print0 | "
    "xargs -0 -r sed -i -E "
    "'s@^[[:space:]]*(-e[[:space:]]+)?(git|hg|svn|bzr)\\+[a-z]+://.*@# ooda: left out: &@'"
)
"""Run before a requirements file is installed: its lines that install from a version-control
URL (flask 2.0's `git+https://github.com/sphinx-doc/sphinx.git@96dbe5e3`, for its docs) are
commented out. Such a URL is no package registry (this machine reaches none but PyPI's and
Debian's), names no release, and installs documentation tooling, not what tests import. The
build's copy of the repository is edited, never the workspace."""


def build_script(spec: EnvSpec, host: hostconfig.HostConfig, with_repo: bool,
                 apt_done: bool = False) -> str:
    """The shell script the build container runs (sh -e, as root, in /work); `apt_done`:
    it starts from an image that has the spec's Debian packages (aptlayer.py)."""
    q = shlex.quote
    pip = "python3 -m pip install -q"
    lines = [f"mkdir -p {ENV_DIR_IN_IMAGE} {TOOLS_DIR}"]
    lines.append(f"find /work -mindepth 1 -printf '%P\\0' > {ENV_DIR_IN_IMAGE}/input.lst")
    if spec.apt and not apt_done:
        lines.append(aptlayer.apt_script(spec.apt, host).rstrip("\n"))
    if with_repo and spec.requirements:
        lines.append(VCS_LINES_OUT)
        tests = " elif ".join(f"[ -f {q(f)} ]; then {pip} -r {q(f)}; " for f in spec.requirements)
        lines.append(f"if {tests}fi")
    if spec.pip:
        lines.append(f"{pip} " + " ".join(q(p) for p in spec.pip))
    if spec.optional:
        lines.append(optional_script(spec))
    lines += [_checked(step) for step in spec.pre_install]
    if with_repo and spec.install:
        lines.append(_checked(spec.install))
    if spec.runner.packages:
        lines.append(f"{pip} " + " ".join(q(p) for p in spec.runner.packages))
    if spec.optional:
        lines.append(check_script(spec))  # the repository installed: imports resolve as in tests
    if spec.tools:
        lines.append(f"{pip} --target {TOOLS_DIR} --no-warn-script-location "
                     + " ".join(q(p) for p in spec.tools))
    lines.append(f"python3 -c {q(OVERLAY_SCRIPT)} {ENV_DIR_IN_IMAGE}/input.lst "
                 f"{ENV_DIR_IN_IMAGE}/overlay.tar")
    lines.append("find /work -mindepth 1 -delete")
    lines.append("python3 -m pip freeze > /opt/ooda-env/freeze.txt")
    lines.append("python3 -m compileall -q /usr/local/lib/python3*/dist-packages "
                 "/usr/lib/python3/dist-packages >/dev/null 2>&1 || true")
    lines.append("apt-get clean; rm -rf /var/lib/apt/lists/* /root/.cache /tmp/*")
    lines.append(f"chmod -R a+rX /usr/local {ENV_DIR_IN_IMAGE} {TOOLS_DIR}")
    return "\n".join(lines) + "\n"


def _checked(step: str) -> str:
    """A step of the spec that fails the build when it fails: `sh -e` does not stop on a
    failing command inside an `a && b` list (pylint-7080's `sed ... pyproject.toml && pip
    install ...` skipped the install and the build 'succeeded' without pytest)."""
    return f"{{ {step}\n}} || {{ echo 'ooda: this build step failed'; exit 1; }}"


def _record_failure(directory: Path, cause: str, log: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "build.log").write_text(log, encoding="utf-8")
    (directory / "failure.txt").write_text(cause + "\n", encoding="utf-8")


def _extract_overlay(client: Any, tag: str, dest: Path) -> None:
    """Copy /opt/ooda-env/overlay.tar out of the image and unpack it into `dest`."""
    created = client.api.create_container(
        tag, command=["true"], labels={"ooda": "1", **docker_image.owner_labels()})
    try:
        stream, _ = client.api.get_archive(created["Id"], f"{ENV_DIR_IN_IMAGE}/overlay.tar")
        outer = io.BytesIO(b"".join(stream))
    finally:
        client.api.remove_container(created["Id"], force=True)
    tmp = dest.with_name(dest.name + ".tmp")
    image._remove_tree(tmp)
    tmp.mkdir(parents=True)
    with tarfile.open(fileobj=outer) as wrapper:
        member = wrapper.extractfile("overlay.tar")
        if member is not None:
            with tarfile.open(fileobj=io.BytesIO(member.read())) as inner:
                extract_all(inner, tmp)
    image._remove_tree(dest)
    tmp.rename(dest)


def installed_plugins(client: Any, tag: str, directory: Path) -> tuple[str, ...]:
    """The pytest plugin modules installed in image `tag`, asked once and kept in
    `directory`/plugins.txt (an image never changes under its tag)."""
    kept = directory / "plugins.txt"
    if kept.is_file():
        return tuple(kept.read_text(encoding="utf-8").split())
    try:
        output = client.containers.run(
            tag, ["python3", "-I", "-c", PLUGINS_SCRIPT], remove=True, network_disabled=True,
            labels={"ooda": "1", **docker_image.owner_labels()}, working_dir="/",
        )
    except docker.errors.ContainerError:  # no usable metadata: none named, asked again later
        return ()
    found = tuple(dict.fromkeys(
        name for name in output.decode("utf-8", "replace").split() if name.isascii()
        and all(part.isidentifier() for part in name.split("."))))
    directory.mkdir(parents=True, exist_ok=True)
    kept.write_text("".join(f"{name}\n" for name in found), encoding="utf-8")
    return found


def ensure_env(
    client: Any,
    spec: EnvSpec,
    repo: Path | None = None,
    *,
    force: bool = False,
    log: image.Log = image.stderr_log,
    timeout_s: float | None = None,
) -> BuiltEnv:
    """The image for `spec` (installing `repo` when the spec says so), built when missing
    within `timeout_s` (default OODA_ENV_BUILD_TIMEOUT, else 3600 s: astropy 1.3's numpy built
    from its sdist outlives an hour on a loaded 2-core machine).

    Raises EnvBuildError (the recorded cause) when this hash failed before, unless `force`."""
    started = time.monotonic()
    if timeout_s is None:
        timeout_s = positive_from_env("OODA_ENV_BUILD_TIMEOUT", 3600.0, float,
                                      "the seconds an environment build may take")
    digest = spec_hash(spec, repo)
    tag = image_tag(spec, repo)
    directory = env_dir(digest)
    release = spec.debian

    def ready() -> BuiltEnv | None:
        if force or not docker_image.image_exists(client, tag):
            return None
        if not (directory / "overlay").is_dir():
            return None
        return BuiltEnv(tag, digest, release.name, directory / "overlay", False,
                        time.monotonic() - started, installed_plugins(client, tag, directory))

    def failed() -> None:
        failure = directory / "failure.txt"
        if not force and failure.is_file():
            raise EnvBuildError(digest, failure.read_text().strip(), directory / "build.log")

    found = ready()
    if found is not None:
        return found
    failed()
    with locked(f"env-{digest}"):
        found = ready()
        if found is not None:
            return found
        failed()
        (directory / "failure.txt").unlink(missing_ok=True)
        base_image = base.ensure_base_image(client, release, log)
        if spec.apt:
            try:
                base_image = aptlayer.ensure_apt_layer(client, base_image, spec.apt, log)
            except aptlayer.AptFailed as exc:
                _record_failure(directory, str(exc), str(exc))
                raise EnvBuildError(digest, str(exc), directory / "build.log") from exc
        host = hostconfig.host_config(
            remote_only=any(k == "PIP_UPLOADED_PRIOR_TO" for k, _ in spec.build_env))
        with_repo = repo is not None and spec.install is not None
        upload = ("/work", container.tar_of(repo)) if with_repo and repo is not None else None
        log(f"building environment {tag} on {release.name} (Python {release.python})")
        outcome = container.run_script(
            client, base_image, build_script(spec, host, with_repo, apt_done=bool(spec.apt)),
            host,
            env=dict(spec.build_env), upload=upload,
            commit=container.Commit(tag, {"ooda.env": digest}), timeout_s=timeout_s,
        )
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "spec.json").write_text(json.dumps(spec.to_dict(), indent=2) + "\n")
        if outcome.exit_code != 0:
            cause = causes.cause(outcome.log, outcome.exit_code)
            _record_failure(directory, cause, outcome.log)
            raise EnvBuildError(digest, cause, directory / "build.log")
        (directory / "build.log").write_text(outcome.log, encoding="utf-8")
        _extract_overlay(client, tag, directory / "overlay")
        (directory / "plugins.txt").unlink(missing_ok=True)
        plugins = installed_plugins(client, tag, directory)
        seconds = time.monotonic() - started
        (directory / "build.json").write_text(json.dumps({"seconds": round(seconds, 1)}) + "\n")
        log(f"environment {tag} built in {seconds:.0f} s")
        return BuiltEnv(tag, digest, release.name, directory / "overlay", True, seconds, plugins)

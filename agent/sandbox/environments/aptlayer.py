"""The Debian packages of an environment as an image layer of their own, built once per
(base image, package set) and shared by every environment that asks for the same set.

Every SWE-bench environment installs the harness image's build tools (~100 MB of packages and
the release's package lists); built into each environment, that download was most of a build
(2-3 minutes here for a sympy environment that otherwise installs a few wheels). As a layer it
is fetched once per release and package set, and each environment starts from it.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from typing import Any

from ooda.agent.contracts.errors import InfraError
from ooda.agent.sandbox import image
from ooda.agent.sandbox.docker import image as docker_image
from ooda.agent.sandbox.environments import causes, container, hostconfig
from ooda.agent.sandbox.image import locked

LAYER_REPO = "ooda-env-apt"


class AptFailed(InfraError):
    """apt itself could not install the packages (the environment cannot be built); a Docker
    failure on the way is a plain InfraError, never remembered as the environment's."""


def layer_tag(base_image: str, packages: Sequence[str]) -> str:
    """`ooda-env-apt:<hash>`: the base image with `packages` installed."""
    text = "\n".join([base_image, *sorted(set(packages))])
    return f"{LAYER_REPO}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def apt_script(packages: Sequence[str], host: hostconfig.HostConfig) -> str:
    """Install `packages` (no recommends) and leave no package lists behind."""
    q = shlex.quote
    opts = " ".join(f"-o {q(o)}" for o in host.apt_options)
    return "\n".join([
        f"apt-get {opts} update -q",
        f"apt-get {opts} install -q -y --no-install-recommends "
        + " ".join(q(p) for p in sorted(set(packages))),
        "apt-get clean; rm -rf /var/lib/apt/lists/* /root/.cache /tmp/*",
    ]) + "\n"


def ensure_apt_layer(client: Any, base_image: str, packages: Sequence[str],
                     log: image.Log = image.stderr_log) -> str:
    """The tag of `base_image` + `packages`, built when missing; AptFailed (the one line that
    says why) when apt cannot install them, InfraError when Docker failed."""
    tag = layer_tag(base_image, packages)
    if docker_image.image_exists(client, tag):
        return tag
    with locked(f"apt-layer-{tag.split(':')[1]}"):
        if docker_image.image_exists(client, tag):
            return tag
        host = hostconfig.host_config()
        log(f"building {tag}: {' '.join(sorted(set(packages)))}")
        outcome = container.run_script(client, base_image, apt_script(packages, host), host,
                                       commit=container.Commit(tag, {"ooda.env.apt": "1"}))
        if outcome.exit_code != 0:
            raise AptFailed(f"Debian packages for the environment: "
                             f"{causes.cause(outcome.log, outcome.exit_code)}")
        return tag

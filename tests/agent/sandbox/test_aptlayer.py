"""agent/sandbox/environments/aptlayer.py: an environment's Debian packages become one image
layer per base image and package set, which the environment's own build then skips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ooda.agent.contracts.errors import InfraError
from ooda.agent.sandbox.environments import aptlayer, builder, hostconfig
from ooda.agent.sandbox.environments.spec import EnvSpec


def test_one_layer_per_base_and_package_set_whatever_the_order() -> None:
    one = aptlayer.layer_tag("ooda-env-base:bullseye-1", ["gcc", "git", "gcc"])
    assert one == aptlayer.layer_tag("ooda-env-base:bullseye-1", ["git", "gcc"])
    assert one.startswith("ooda-env-apt:")
    assert one != aptlayer.layer_tag("ooda-env-base:bookworm-1", ["gcc", "git"])
    assert one != aptlayer.layer_tag("ooda-env-base:bullseye-1", ["gcc"])


def test_the_environment_build_installs_the_packages_only_without_the_layer() -> None:
    host = hostconfig.HostConfig()
    spec = EnvSpec(python="3.9", apt=("build-essential", "git"), pip=("six",))
    with_layer = builder.build_script(spec, host, with_repo=False, apt_done=True)
    alone = builder.build_script(spec, host, with_repo=False)
    assert "install -q -y --no-install-recommends" not in with_layer
    assert "--no-install-recommends build-essential git" in alone
    assert "rm -rf /var/lib/apt/lists/*" in aptlayer.apt_script(spec.apt, host)


def test_only_apt_failing_is_the_environments_failure(monkeypatch: Any, tmp_path: Path) -> None:
    """apt refusing a package is remembered as the environment's failure (AptFailed); Docker
    failing under the build (its container removed) is a plain InfraError, retried later."""
    from ooda.agent.sandbox.environments import container

    monkeypatch.setenv("OODA_HOME", str(tmp_path))
    monkeypatch.setattr(aptlayer.docker_image, "image_exists", lambda _c, _t: False)
    monkeypatch.setattr(container, "run_script", lambda *_a, **_k: container.Outcome(
        100, "E: Unable to locate package nosuch\n"))
    with pytest.raises(aptlayer.AptFailed, match="nosuch"):
        aptlayer.ensure_apt_layer(None, "base:1", ["nosuch"], log=lambda _m: None)

    def vanished(*_a: Any, **_k: Any) -> Any:
        raise InfraError("the build container from base:1 failed: 409 Conflict")

    monkeypatch.setattr(container, "run_script", vanished)
    with pytest.raises(InfraError) as info:
        aptlayer.ensure_apt_layer(None, "base:1", ["gcc"], log=lambda _m: None)
    assert not isinstance(info.value, aptlayer.AptFailed)

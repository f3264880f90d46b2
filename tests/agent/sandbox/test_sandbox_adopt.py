"""SandboxBackend.adopt: a container started ahead of need (as agent/startup/prestart.py does)
becomes a sandbox of the Docker backend when it fits (same image, no requirements); bwrap and
local never take one. One real container; the mismatches are refused before it is touched."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sandbox_helpers import backend_or_skip

from ooda.agent.sandbox.docker.launch import launch_on_last_image
from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.support.fstree import remove_workspace


def test_docker_backend_adopts_a_prestarted_container_that_fits(tmp_path: Path) -> None:
    backend = backend_or_skip("docker")
    assert LocalBackend().adopt(object()) is None
    assert backend.adopt(object()) is None
    started = launch_on_last_image(backend.engine, "ooda-test-adopt-")  # type: ignore[attr-defined]
    assert started is not None  # the backend remembered its image on opening
    work, launched = started
    try:
        requirements = tmp_path / "requirements.txt"
        assert backend.adopt(launched, requirements=requirements) is None
        assert backend.adopt(dataclasses.replace(launched, tag="ooda-sandbox:other")) is None
        box = backend.adopt(launched)
        assert box is not None
        try:
            result = box.run(["sh", "-c", "echo adopted > note; cat note"], timeout_s=30)
            assert (result.exit_code, result.output) == (0, "adopted\n")
            assert (launched.workspace / "note").read_text() == "adopted\n"
        finally:
            box.close()
    finally:
        launched.release()
        remove_workspace(work)


def test_connect_remembers_the_engines_api_version_and_asks_again_when_it_fails() -> None:
    """A later client (a daemon's worker) skips asking the engine its API version; a
    remembered version the engine refuses is dropped and the engine asked again."""
    from ooda.agent.sandbox.docker import launch

    backend_or_skip("docker")
    launch.connect().close()
    host, known = next(iter(launch._api_versions.items()))
    launch._api_versions[host] = "1.999"  # newer than any engine: refused
    try:
        client = launch.connect()
        assert client.api.api_version == known == launch._api_versions[host]
        client.close()
    finally:
        launch._api_versions[host] = known

"""Sandbox backends do what the `Sandbox` protocol promises (real Docker, real bubblewrap).

Isolation properties are in test_sandbox_isolation.py; here: the toolchain, cwd, exit codes,
environment, workspace round trip and ownership, timeouts, requirements, image caching,
backend selection and leftover cleanup.
"""

from __future__ import annotations

import contextlib
import http.server
import importlib.metadata
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import backend_or_skip, open_sandbox, py

from ooda.agent.app.doctor import _key_check, diagnose
from ooda.agent.contracts.errors import (
    InfraError,
    SandboxBroken,
    UsageError,
    VerificationStopped,
)
from ooda.agent.contracts.protocols import Sandbox
from ooda.agent.sandbox import image
from ooda.agent.sandbox.docker.image import owner_labels
from ooda.agent.sandbox.registry import build_image, cleanup_leftovers, get_backend
from ooda.agent.verify.watched import Watched

ISOLATED = ["docker", "bwrap"]
ALL = ["docker", "bwrap", "local"]


@pytest.fixture(params=ALL)
def any_box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sandbox]:
    yield from open_sandbox(request.param, tmp_path / "ws")


@pytest.fixture(params=ISOLATED)
def box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sandbox]:
    yield from open_sandbox(request.param, tmp_path / "ws")


def test_toolchain_runs_with_the_hosts_versions(box: Sandbox) -> None:
    (box.workspace / "mod.py").write_text("def double(x: int) -> int:\n    return 2 * x\n")
    (box.workspace / "test_mod.py").write_text(
        "from mod import double\n\n\ndef test_double() -> None:\n    assert double(2) == 4\n"
    )
    for tool in ("pytest", "ruff", "mypy"):
        result = box.run(["python3", "-m", tool, "--version"], timeout_s=60)
        assert result.exit_code == 0, result.output
        assert importlib.metadata.version(tool) in result.output
    checks = [
        ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mod.py"],
        ["python3", "-m", "ruff", "check", "--no-cache", "mod.py"],
        ["python3", "-m", "mypy", "--strict", "mod.py"],
    ]
    for argv in checks:
        result = box.run(argv, timeout_s=60)
        assert result.exit_code == 0, (argv, result.output)
    assert "Python 3.11" in box.run(["python3", "--version"], timeout_s=30).output


def test_cwd_exit_code_merged_output_and_env(any_box: Sandbox) -> None:
    result = any_box.run(
        ["python3", "-u", "-c", "import os, sys; print(os.getcwd()); print(os.environ['ODA_X']);"
         "print('to stderr', file=sys.stderr); sys.exit(3)"],
        timeout_s=30, env={"ODA_X": "passed in"},
    )
    assert result.exit_code == 3 and not result.timed_out
    lines = result.output.splitlines()
    assert lines[0] in (any_box.workdir, str(Path(any_box.workdir).resolve()))
    assert lines[1:] == ["passed in", "to stderr"]


def test_workspace_round_trip_and_ownership_restored(any_box: Sandbox) -> None:
    ws = any_box.workspace
    owner = ws.parent.stat().st_uid  # who made the workspace (open() lends it to the sandbox)
    (ws / "given.txt").write_text("from host\n")
    result = py(any_box, "import os; print(open('given.txt').read().strip());"
                "os.makedirs('pkg', exist_ok=True); open('pkg/made.txt', 'w').write('from box')")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "from host"
    assert (ws / "pkg" / "made.txt").read_text() == "from box"
    any_box.close()
    assert {p.stat().st_uid for p in [ws, *ws.rglob("*")]} == {owner}


def test_timeout_gives_timed_out_result(any_box: Sandbox) -> None:
    started = time.monotonic()
    result = any_box.run(["sh", "-c", "echo before; sleep 30"], timeout_s=1)
    assert result.timed_out and result.exit_code is None
    assert "before" in result.output
    assert time.monotonic() - started < 8
    after = any_box.run(["sh", "-c", "echo again"], timeout_s=30)  # the sandbox stays usable
    assert after.exit_code == 0 and after.output == "again\n"
    if hasattr(any_box, "interrupt"):  # a decided run stops a verification under way
        stop = threading.Event()
        threading.Timer(0.3, stop.set).start()
        started = time.monotonic()
        with pytest.raises(VerificationStopped):
            Watched(any_box, stop).run(["sleep", "30"], timeout_s=30)
        assert time.monotonic() - started < 8
        again = any_box.run(["sh", "-c", "echo again"], timeout_s=30)
        assert again.exit_code == 0 and again.output == "again\n" and again.limit is None


def test_close_ends_a_running_command(box: Sandbox) -> None:
    closer = threading.Timer(1.0, box.close)
    closer.start()
    started = time.monotonic()
    result = box.run(["sleep", "30"], timeout_s=30)
    closer.join()
    assert time.monotonic() - started < 10
    assert result.exit_code != 0
    assert box.run(["true"], timeout_s=10).exit_code == 125  # closed sandboxes refuse


@pytest.mark.parametrize("name", ISOLATED)
def test_requirements_are_installed_offline(name: str, tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("six==1.17.0\n")
    for box in open_sandbox(name, tmp_path / "ws", requirements):
        result = py(box, "import six; print(six.__version__, six.__file__)")
        assert result.exit_code == 0, result.output
        assert result.output.startswith("1.17.0 /opt/ooda-reqs/")
        assert py(box, "import socket; socket.create_connection(('1.1.1.1', 53), 2)").exit_code


def test_get_backend_names() -> None:
    with pytest.raises(UsageError):
        get_backend("nope")
    assert get_backend("local").name == "local"
    backend_or_skip("docker")
    auto = get_backend()  # Docker answers here, so auto picks it
    assert auto.name == "docker"
    auto.close()


def test_auto_falls_back_to_bwrap_without_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    backend_or_skip("bwrap")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(InfraError, match="Docker engine not answering"):
        get_backend("docker")
    assert get_backend("auto").name == "bwrap"


def test_build_image_is_cached() -> None:
    backend_or_skip("docker")
    lines: list[str] = []
    started = time.monotonic()
    tag = build_image(log=lines.append)
    assert tag == image.image_tag() and tag.startswith("ooda-sandbox:")
    assert time.monotonic() - started < 15, lines
    assert image.rootfs_ready()
    assert not any("debootstrap" in line or "importing" in line for line in lines), lines


def test_cleanup_leftovers_removes_containers_of_dead_owners(tmp_path: Path) -> None:
    backend = backend_or_skip("docker")
    client = backend.client  # type: ignore[attr-defined]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    labels = {"ooda": "1", **owner_labels()}
    orphan = client.api.create_container(
        image.image_tag(), ["true"], labels={**labels, "ooda.owner_pid": str(dead.pid)}
    )["Id"]
    mine = client.api.create_container(image.image_tag(), ["true"], labels=labels)["Id"]
    try:
        assert cleanup_leftovers() >= 1
        ids = {c["Id"] for c in client.api.containers(all=True, filters={"label": "ooda=1"})}
        assert orphan not in ids and mine in ids
    finally:
        for container in (orphan, mine):
            with contextlib.suppress(Exception):
                client.api.remove_container(container, force=True)


def test_docker_close_survives_a_dead_container(tmp_path: Path) -> None:
    for box in open_sandbox("docker", tmp_path / "ws"):
        api = backend_or_skip("docker").client.api  # type: ignore[attr-defined]
        api.kill(box.container_id)  # type: ignore[attr-defined]
        with pytest.raises(SandboxBroken, match="the docker sandbox broke while verifying"):
            box.run(["echo", "hi"], timeout_s=10)
        box.close()
        box.close()


def test_doctor_reports_every_check(monkeypatch: pytest.MonkeyPatch) -> None:
    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = json.dumps({"data": [{"id": "tiny-coder"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        checks = {check.name: check for check in diagnose()}
        assert list(checks) == ["docker engine", "sandbox image", "bubblewrap",
                                "sandbox rootfs", "model endpoint", "model stream", "api key"]
        assert checks["model endpoint"].ok and "tiny-coder" in checks["model endpoint"].detail
        assert checks["api key"].ok
        # this endpoint answers no chat request: the test stream says so
        assert not checks["model stream"].ok and "tiny-coder" in checks["model stream"].detail
        assert all(check.ok or check.fix for check in checks.values())
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        monkeypatch.delenv("OPENAI_API_KEY")
        checks = {check.name: check for check in diagnose()}
        assert not checks["model endpoint"].ok and "unreachable" in checks["model endpoint"].detail
        assert "model stream" not in checks  # nothing to stream from
        assert checks["api key"].ok and "not needed" in checks["api key"].detail  # loopback
        remote = _key_check(True, "https://api.example.com/v1")
        assert not remote.ok and remote.fix
    finally:
        server.shutdown()
        server.server_close()


def test_the_image_recipe_is_read_once_until_something_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The toolchain's versions (each distribution's metadata parsed) are read once per
    process; a distribution installed or removed in an import directory changes its mtime,
    and they are read again."""
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site)])
    pins = iter([["pytest==8.0"], ["pytest==8.1"]])
    monkeypatch.setattr(image, "toolchain_pins", lambda: next(pins))
    image._recipe_hash.cache_clear()
    try:
        first = image.recipe_hash()
        assert image.recipe_hash() == first and image.image_tag() == f"ooda-sandbox:{first}"
        (site / "pytest-8.1.dist-info").mkdir()
        os.utime(site, ns=(1, 1))  # (the same second as before on a coarse filesystem)
        assert image.recipe_hash() != first
    finally:
        image._recipe_hash.cache_clear()  # the real pins for the tests after this one

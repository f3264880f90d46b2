"""`ooda doctor`: check this machine and say what to do about each problem (pure reporting).

Checks: the Docker engine answers, the sandbox image is there, bubblewrap works, the rootfs
is built, the model endpoint answers GET {base}/models, one short streaming request and two at
once come back whole (agent/app/doctor_stream.py), an API key is set. Nothing here changes the
machine; the CLI prints the list.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass

from ooda.agent.contracts.errors import InfraError
from ooda.agent.models.endpoint import LOCAL_API_KEY, is_loopback
from ooda.agent.sandbox import image
from ooda.agent.sandbox.bwrap import bwrap_problem
from ooda.agent.sandbox.docker.image import image_exists
from ooda.agent.sandbox.docker.launch import connect

ENDPOINT_TIMEOUT_S = 3.0


@dataclass
class Check:
    """One line of the doctor's report."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    optional: bool = False
    """Not needed for every use (an endpoint, for the offline --model replay/gold): a failing
    optional check is a note, not a failure."""


def _docker_fix(problem: str) -> str:
    """What to do about an engine that does not answer: a user not (yet) in the docker group
    of this session needs a new login, not an engine."""
    if "Permission denied" in problem:
        import grp

        try:
            members = grp.getgrnam("docker").gr_mem
        except KeyError:
            members = []
        user = os.environ.get("USER") or os.environ.get("LOGNAME") or ""
        if user and user in members:
            return ("you are in the docker group, this session is not yet: log in again (or "
                    "`newgrp docker`); until then ooda uses bubblewrap")
        return ("join the docker group (`sudo usermod -aG docker $USER`, then log in again), "
                "or use --sandbox bwrap; scripts/setup.sh does the first")
    return ("apt-get install docker.io and start it (`systemctl start docker` or "
            "`dockerd &`), or use --sandbox bwrap; scripts/setup.sh does both")


def _engine_address() -> str:
    """Where the Docker SDK looks for the engine: DOCKER_HOST, named as such, else the
    default socket."""
    host = os.environ.get("DOCKER_HOST")
    return f"DOCKER_HOST={host}" if host else \
        "unix:///var/run/docker.sock (the default: DOCKER_HOST is not set)"


def _docker_checks() -> list[Check]:
    tag = image.image_tag()
    where = _engine_address()
    try:
        client = connect(timeout_s=5)
    except InfraError as exc:
        fix = _docker_fix(str(exc))
        if os.environ.get("DOCKER_HOST"):
            fix = (f"DOCKER_HOST={os.environ['DOCKER_HOST']} names no answering engine: unset "
                   "it to use the default socket, or point it at a running engine; "
                   "or use --sandbox bwrap")
        return [
            Check("docker engine", False,
                  f"none answers at {where}: {str(exc).split('; start it')[0][:300]}", fix),
            Check("sandbox image", False, f"{tag}: no Docker engine to hold it",
                  "start Docker, then `ooda sandbox build`"),
        ]
    try:
        version = client.version().get("Version", "?")
        present = image_exists(client, tag)
    finally:
        client.close()
    return [
        Check("docker engine", True, f"answering at {where} (engine {version})"),
        Check("sandbox image", present, f"{tag} {'present' if present else 'missing'}",
              "" if present else "`ooda sandbox build` (or let the first run build it)"),
    ]


def _bwrap_checks() -> list[Check]:
    problem = bwrap_problem()
    root = image.rootfs_path()
    ready = image.rootfs_ready()
    return [
        Check("bubblewrap", problem is None, problem or "usable (namespaces, rlimits)",
              "" if problem is None else "apt-get install bubblewrap; allow unprivileged "
              "user namespaces (sysctl kernel.unprivileged_userns_clone=1)"),
        Check("sandbox rootfs", ready, f"{root} {'present' if ready else 'missing'}",
              "" if ready else "`ooda sandbox build` as root (needs debootstrap)"),
    ]


def _endpoint_check(base_url: str | None = None) -> tuple[Check, list[str]]:
    base = (base_url or os.environ.get("OPENAI_BASE_URL", "")).rstrip("/")
    if not base:
        return Check("model endpoint", False, "none given (OPENAI_BASE_URL is not set): "
                     "needed only for a real model; --model replay and --model gold run "
                     "offline",
                     "export OPENAI_BASE_URL=http://HOST:PORT/v1 (or `ooda doctor --base-url "
                     "URL`) to check one", optional=True), []
    request = urllib.request.Request(f"{base}/models")
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=ENDPOINT_TIMEOUT_S) as response:
            body = response.read(1 << 20)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return Check("model endpoint", False, f"{base} rejected the key (HTTP {exc.code})",
                         "check OPENAI_API_KEY"), []
        return Check("model endpoint", exc.code < 500, f"{base}/models answered HTTP {exc.code}",
                     "" if exc.code < 500 else "the server is failing: check its logs"), []
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Check("model endpoint", False, f"{base} unreachable: {reason}",
                     "start the server, or fix OPENAI_BASE_URL (or doctor's --base-url)"), []
    try:
        models = [m.get("id", "?") for m in json.loads(body).get("data", [])]
    except (ValueError, AttributeError):
        models = []
    listed = f"; models: {', '.join(map(str, models[:5]))}" if models else ""
    return Check("model endpoint", True, f"{base} answers{listed}"), [str(m) for m in models]


def _key_check(endpoint_given: bool, base_url: str | None = None) -> Check:
    if os.environ.get("OPENAI_API_KEY"):
        return Check("api key", True, "OPENAI_API_KEY is set")
    base = base_url or os.environ.get("OPENAI_BASE_URL")
    if base and is_loopback(base):
        return Check("api key", True, "not needed: the endpoint is on this machine (ooda sends "
                     f"{LOCAL_API_KEY!r}; set OPENAI_API_KEY if the server wants its own)")
    return Check("api key", False, "OPENAI_API_KEY is not set",
                 "export OPENAI_API_KEY=... (any value for a local server that ignores it)",
                 optional=not endpoint_given)


def diagnose(base_url: str | None = None, model: str | None = None, *,
             stream: bool = True) -> list[Check]:
    """Every check, in the order the CLI prints them (`base_url`: the endpoint to check,
    default $OPENAI_BASE_URL; `model`: the model to stream from, default the first listed;
    `stream`: send the streaming requests when the endpoint answers)."""
    given = bool(base_url or os.environ.get("OPENAI_BASE_URL"))
    endpoint, listed = _endpoint_check(base_url)
    streams: list[Check] = []
    if stream and endpoint.ok and given:
        from ooda.agent.app.doctor_stream import stream_checks  # talks to the model

        base = (base_url or os.environ.get("OPENAI_BASE_URL", "")).rstrip("/")
        streams = stream_checks(base, model, listed)
    return [*_docker_checks(), *_bwrap_checks(), endpoint, *streams,
            _key_check(given, base_url)]

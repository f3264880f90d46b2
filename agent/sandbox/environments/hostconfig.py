"""The host's own way of reaching package registries, handed to a build container.

A build container sits on Docker's default bridge, so it reaches the network as the host
does, but not with the host's settings: a TLS-intercepting proxy's CA certificate, a private
index (PIP_INDEX_URL, pip.conf), local wheel directories, an apt proxy. This module reads
those settings (pip's own `pip config list` merges its files and PIP_* variables the way pip
itself does) and turns them into the container's environment and read-only bind mounts.
Nothing is copied into the image: the CA bundle and local indexes are mounted for the build
only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

CA_IN_CONTAINER = "/run/ooda-build/host-ca.pem"
DEFAULT_CA_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/ssl/cert.pem",  # Alpine, macOS
)
PIP_KEYS = ("index-url", "extra-index-url", "find-links", "trusted-host", "default-timeout",
            "retries", "proxy")
"""pip settings that decide where and how packages are fetched (carried over as PIP_*)."""
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


@dataclass
class HostConfig:
    """What a build container needs to fetch packages the way the host does."""

    env: dict[str, str] = field(default_factory=dict)
    binds: dict[str, str] = field(default_factory=dict)
    """host path -> container path, mounted read-only."""
    apt_options: list[str] = field(default_factory=list)
    """`-o Key=value` options for apt-get."""


def _pip_config() -> dict[str, str]:
    """pip's merged configuration (files and PIP_* variables): key -> value, last one wins."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
            timeout=60, check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    values: dict[str, str] = {}
    for line in out.splitlines():
        match = re.match(r"^[^.]*\.([a-z-]+)='(.*)'$", line.strip())
        if match:
            values[match.group(1)] = match.group(2)
    for key in (*PIP_KEYS, "cert"):
        env = os.environ.get("PIP_" + key.upper().replace("-", "_"))
        if env:
            values[key] = env
    return values


def ca_bundle(pip_values: dict[str, str] | None = None) -> Path | None:
    """The CA bundle the host trusts: pip's `cert`, else SSL_CERT_FILE, else the system's."""
    values = _pip_config() if pip_values is None else pip_values
    for candidate in (values.get("cert"), os.environ.get("SSL_CERT_FILE"),
                      os.environ.get("REQUESTS_CA_BUNDLE"), *DEFAULT_CA_BUNDLES):
        if candidate and Path(candidate).is_file():
            return Path(candidate).resolve()
    return None


def _local_paths(value: str) -> list[str]:
    """Local directories named by an index or find-links value (file:// URLs or paths)."""
    paths = []
    for item in value.split():
        path = item[len("file://"):] if item.startswith("file://") else item
        if "://" not in path and Path(path).exists():
            resolved = Path(path).resolve()
            # a PEP 503 index's pages link to files beside it (../files/...): mount its parent
            paths.append(str(resolved.parent if resolved.name == "simple" else resolved))
    return paths


def _apt_proxy() -> list[str]:
    """apt's proxy settings on the host (`apt-config dump`), as apt-get -o options."""
    try:
        out = subprocess.run(["apt-config", "dump"], capture_output=True, text=True,
                             timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    options = []
    for line in out.splitlines():
        match = re.match(r'^(Acquire::https?::Proxy(?:::[^ ]+)?) "(.*)";$', line.strip())
        if match and match.group(2):
            options.append(f"{match.group(1)}={match.group(2)}")
    return options


def _remote_only(value: str) -> str:
    return " ".join(item for item in value.split() if "://" in item and
                    not item.startswith("file://"))


def host_config(*, remote_only: bool = False) -> HostConfig:
    """The build container's environment, mounts and apt options, read from this host.

    `remote_only`: leave out local wheel directories and file:// indexes (a build that asks
    for packages as of a date needs upload times, which only a remote index gives)."""
    values = _pip_config()
    if remote_only:
        values = {k: _remote_only(v) if k in ("index-url", "extra-index-url", "find-links")
                  else v for k, v in values.items()}
        values = {k: v for k, v in values.items() if v}
    config = HostConfig()
    bundle = ca_bundle(values)
    if bundle is not None:
        config.binds[str(bundle)] = CA_IN_CONTAINER
        for var in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                    "GIT_SSL_CAINFO"):
            config.env[var] = CA_IN_CONTAINER
        config.apt_options.append(f"Acquire::https::CAInfo={CA_IN_CONTAINER}")
    for key in PIP_KEYS:
        if key in values:
            config.env["PIP_" + key.upper().replace("-", "_")] = values[key]
            if key in ("index-url", "extra-index-url", "find-links"):
                for path in _local_paths(values[key]):
                    config.binds[path] = path
    for var in PROXY_VARS:
        if os.environ.get(var):
            config.env[var] = os.environ[var]
    config.apt_options += _apt_proxy()
    return config

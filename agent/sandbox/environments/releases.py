"""Which Debian release an environment is built on, read from releases.toml (data, so a new
release or a substitute Python is one table entry, not a code change)."""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ooda.agent.contracts.errors import UsageError

DATA = Path(__file__).with_name("releases.toml")


@dataclass(frozen=True)
class Release:
    """A Debian release a base root filesystem is debootstrapped from."""

    name: str
    python: str
    """Its own python3 ("3.9" for bullseye)."""
    mirror: str | None = None
    """A mirror to debootstrap it from instead of the host's (archived releases)."""


@functools.cache
def _table() -> tuple[dict[str, Release], dict[str, str]]:
    data = tomllib.loads(DATA.read_text(encoding="utf-8"))
    releases = {
        name: Release(name, str(entry["python"]), entry.get("mirror"))
        for name, entry in data["releases"].items()
    }
    wanted = {str(k): str(v) for k, v in data["python"].items()}
    for version, name in wanted.items():
        if name not in releases:
            raise ValueError(f"{DATA}: python {version} maps to unknown release {name!r}")
    return releases, wanted


def release(name: str) -> Release:
    """The release called `name`; UsageError naming the known ones when there is none."""
    releases, _ = _table()
    if name not in releases:
        raise UsageError(f"unknown Debian release {name!r}; known: {', '.join(releases)}")
    return releases[name]


def for_python(version: str) -> Release:
    """The release to build on for a wanted Python ("3.9" or "3.9.18": minor counts)."""
    _, wanted = _table()
    minor = ".".join(version.strip().split(".")[:2])
    if minor not in wanted:
        raise UsageError(
            f"no Debian release serves Python {version}; known: {', '.join(wanted)} "
            f"(add it to {DATA.name})"
        )
    return release(wanted[minor])


def pythons() -> tuple[set[str], set[str]]:
    """(the Pythons the releases ship, the Pythons the table maps to a release), as "3.9"."""
    releases, wanted = _table()
    return {r.python for r in releases.values()}, set(wanted)

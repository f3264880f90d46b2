"""Reading task.toml fields: the TOML file, unknown keys, typed values and paths that must stay
inside the task directory, each failure one UsageError line naming the file and the key."""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

from ooda.agent.contracts.errors import UsageError


def read_toml(toml_path: Path) -> dict[str, Any]:
    try:
        text = toml_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{toml_path}: cannot read: {exc}") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{toml_path}: TOML syntax error: {exc}") from exc


def check_keys(table: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = [k for k in table if k not in known]
    if not unknown:
        return
    parts = []
    for key in unknown:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        parts.append(f"{key!r}{hint}")
    noun = "key" if len(unknown) == 1 else "keys"
    raise UsageError(f"{where}: unknown {noun} {', '.join(parts)}; known: {', '.join(known)}")


def type_error(key: str, expected: str, value: object, where: str) -> UsageError:
    return UsageError(f"{where}: {key!r} must be {expected}, not {type(value).__name__}")


def opt_str(data: dict[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise type_error(key, "a string", value, where)
    return value


def str_list(data: dict[str, Any], key: str, where: str) -> list[str]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise type_error(key, "a list of strings", value, where)
    for item in value:
        if not isinstance(item, str):
            raise type_error(key, "a list of strings", item, where)
        check_test_id(item, key, where)
    return list(value)


def inside(rel: str, key: str, where: str) -> Path:
    """The relative path `rel` from task.toml, checked not to leave the task directory."""
    if not rel.strip():
        raise UsageError(f"{where}: {key!r} is empty")
    posix = PurePosixPath(rel.replace("\\", "/"))
    if posix.is_absolute() or Path(rel).is_absolute() or re.match(r"^[A-Za-z]:", rel):
        raise UsageError(f"{where}: {key!r} must be relative to the task directory, not {rel!r}")
    depth = 0
    for part in posix.parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            raise UsageError(f"{where}: {key!r} = {rel!r} points outside the task directory")
    return Path(*posix.parts) if posix.parts else Path(".")


def read_text(path: Path, key: str, where: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: {key!r} file {path.name} is not UTF-8 text") from exc
    except OSError as exc:
        raise UsageError(f"{where}: cannot read {key!r} file {path}: {exc.strerror}") from exc


def check_test_id(item: str, key: str, where: str) -> None:
    if not item.strip():
        raise UsageError(f"{where}: {key!r} holds an empty test id")
    if item.startswith("-"):
        raise UsageError(f"{where}: {key!r} holds {item!r}, which looks like an option")

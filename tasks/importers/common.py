"""Shared helpers for the benchmark importers: unified diffs, task.toml text, writing task dirs."""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ooda.agent.contracts.errors import UsageError

PYTEST_INI = (
    "[pytest]\n"
    "# Lets tests/ import the modules at the repo root under any pytest runner.\n"
    "pythonpath = .\n"
)
"""pytest.ini written into every imported repo."""


@dataclass
class TaskFiles:
    """Everything one imported task directory holds, ready to be written."""

    name: str
    """Directory name (also the task id)."""
    statement: str
    """Written to ISSUE.md."""
    repo: dict[str, str]
    """Repo-relative POSIX path → file text, the code in its broken state."""
    gold_patch: str
    """Unified diff relative to repo/."""
    fail_to_pass: list[str]
    """pytest node ids or files."""
    pass_to_pass: list[str] = field(default_factory=list)
    """pytest node ids or files that must keep passing."""
    timeout_s: float = 30.0
    """Per-verifier wall-clock limit."""
    ruff: bool = True
    """Run the ruff verifier (off when the reference fix itself adds ruff findings)."""
    comment: str = ""
    """Comment lines put at the top of task.toml (provenance)."""


def ensure_newline(text: str) -> str:
    """`text` ending in exactly one newline (empty stays empty)."""
    return text.rstrip("\n") + "\n" if text else text


def split_lines(text: str) -> list[str]:
    """Lines of `text` with their "\\n", split on "\\n" only (as git and patch do)."""
    parts = text.split("\n")
    tail = [parts[-1]] if parts[-1] else []
    return [line + "\n" for line in parts[:-1]] + tail


def unified_diff(path: str, old: str, new: str) -> str:
    """A `git apply`-able unified diff turning `old` into `new` for repo-relative `path`."""
    if not old.endswith("\n") or not new.endswith("\n"):
        raise ValueError("diff inputs must end with a newline")
    lines = difflib.unified_diff(
        split_lines(old),
        split_lines(new),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
        n=3,
    )
    body = "".join(lines)
    if not body:
        raise ValueError(f"no difference in {path}")
    return f"diff --git a/{path} b/{path}\n{body}"


def toml_str(value: str) -> str:
    """`value` as a TOML basic string (JSON string escapes are valid TOML)."""
    return json.dumps(value, ensure_ascii=False)


def toml_list(values: Sequence[str]) -> str:
    """A TOML array of strings."""
    return "[" + ", ".join(toml_str(v) for v in values) + "]"


def task_toml(files: TaskFiles) -> str:
    """The task.toml text for an imported task."""
    head = "".join(f"# {line}\n".replace("# \n", "#\n") for line in files.comment.splitlines())
    timeout = int(files.timeout_s) if files.timeout_s == int(files.timeout_s) else files.timeout_s
    return (
        f"{head}"
        f"id = {toml_str(files.name)}\n"
        'statement_file = "ISSUE.md"\n'
        'repo = "repo"\n'
        f"fail_to_pass = {toml_list(files.fail_to_pass)}\n"
        f"pass_to_pass = {toml_list(files.pass_to_pass)}\n"
        'gold_patch = "gold.diff"\n'
        "\n"
        "[verifiers]\n"
        f"ruff = {'true' if files.ruff else 'false'}\n"
        "mypy = true\n"
        f"timeout_s = {timeout}\n"
    )


def check_dest(dest: Path, names: Sequence[str], overwrite: bool) -> None:
    """Refuse (UsageError) when a task dir to write already exists non-empty, unless overwrite."""
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{dest}: exists and is not a directory")
    if overwrite:
        return
    taken = [n for n in names if _occupied(dest / n)]
    if taken:
        more = f" and {len(taken) - 1} more" if len(taken) > 1 else ""
        raise UsageError(
            f"{dest / taken[0]}{more}: task directory exists and is not empty "
            "(remove it or import with overwrite)"
        )


def _occupied(path: Path) -> bool:
    if path.is_dir():
        return any(path.iterdir())
    return path.exists() or path.is_symlink()


def write_task(dest: Path, files: TaskFiles) -> Path:
    """Write one task directory under `dest` (replacing an old one) and return its path."""
    root = dest / files.name
    if root.is_dir():
        shutil.rmtree(root)
    elif root.exists():
        root.unlink()
    write_files(root / "repo", files.repo)
    write_files(
        root,
        {
            "task.toml": task_toml(files),
            "ISSUE.md": ensure_newline(files.statement),
            "gold.diff": files.gold_patch,
        },
    )
    return root


def write_files(root: Path, texts: Mapping[str, str]) -> None:
    """Write each POSIX-relative path → text under `root`, in sorted order, UTF-8, LF endings."""
    for rel in sorted(texts):
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8", newline="\n") as handle:
            handle.write(texts[rel])


def select(available: Sequence[str], only: Sequence[str] | None, what: str) -> list[str]:
    """The names in `only` (all of `available` when None), each checked to exist; sorted."""
    if only is None:
        return sorted(available)
    missing = [name for name in only if name not in available]
    if missing:
        close = difflib.get_close_matches(missing[0], available, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(f"unknown {what} {missing[0]!r}{hint}")
    return sorted(set(only))


def ruff_codes(sources: dict[str, str]) -> dict[str, Counter[str]]:
    """Ruff rule codes found in each named Python source, with the verifier's pinned rules.

    One ruff run over a temporary directory; used to spot reference fixes that add findings."""
    from ooda.verifiers.ruff_check import RULES

    with tempfile.TemporaryDirectory(prefix="ooda-import-") as tmp:
        names = {}
        for i, (name, text) in enumerate(sources.items()):
            path = Path(tmp) / f"f{i}.py"
            path.write_text(text, encoding="utf-8")
            names[str(path)] = name
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "ruff",
                "check",
                "--isolated",
                "--no-cache",
                "--select",
                RULES,
                "--output-format",
                "json",
                tmp,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    found: dict[str, Counter[str]] = {name: Counter() for name in sources}
    for item in json.loads(proc.stdout or "[]"):
        found[names[item["filename"]]][item["code"] or "syntax"] += 1
    return found


def reference_adds_ruff_findings(pairs: dict[str, tuple[str, str]]) -> set[str]:
    """Names whose (buggy, fixed) pair has ruff findings in the fix that the bug had not."""
    codes = ruff_codes(
        {f"{n}\0old": old for n, (old, _) in pairs.items()}
        | {f"{n}\0new": new for n, (_, new) in pairs.items()}
    )
    return {n for n in pairs if codes[f"{n}\0new"] - codes[f"{n}\0old"]}

"""The edit corpus (tests/edit_corpus/): each answer, written as chat models write them,
must produce its patch or be rejected for its reason (see tests/edit_corpus/README.md)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ooda.agent.edits import EditError, parse_edits

CORPUS = Path(__file__).parent / "edit_corpus"


@dataclass
class Case:
    name: str
    headers: dict[str, str] = field(default_factory=dict)
    sections: dict[str, list[str]] = field(default_factory=dict)
    error_kind: str | None = None

    @property
    def answer(self) -> str:
        text = "\n".join(self.sections["answer"]).rstrip("\n") + "\n"
        if self.headers.get("crlf") == "yes":
            text = text.replace("\n", "\r\n")
        if self.headers.get("surrogate") == "yes":
            text = text.replace("SURROGATE", "\ud800")
        if self.headers.get("nul") == "yes":
            text = text.replace("NULCHAR", "\x00")
        return text

    @property
    def patch(self) -> str:
        lines = self.sections.get("patch", [])
        while lines and not lines[-1]:
            lines = lines[:-1]
        return "\n".join(lines) + "\n" if lines else ""


def load_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(CORPUS.glob("*.txt")):
        case: Case | None = None
        section: list[str] | None = None
        for line in path.read_text(encoding="utf-8").split("\n"):
            if line.startswith("#### case "):
                case = Case(line.removeprefix("#### case ").strip())
                cases.append(case)
                section = None
            elif case is None:
                continue
            elif line.startswith("@@@@ "):
                kind, _, arg = line[5:].partition(" ")
                if kind == "error":
                    case.error_kind = arg.strip()
                section = case.sections.setdefault(kind, [])
            elif section is None:
                key, _, value = line.partition(":")
                if key.strip():
                    case.headers[key.strip()] = value.strip()
            else:
                section.append(line)
    return cases


def repo_files(name: str) -> dict[str, str]:
    root = CORPUS / "repos" / name
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*.in")):
        rel = path.relative_to(root).as_posix().removesuffix(".in")
        text = path.read_text(encoding="utf-8")
        if rel.endswith(".crlf"):
            rel, text = rel.removesuffix(".crlf"), text.replace("\n", "\r\n")
        files[rel] = text
    return files


CASES = load_cases()


def test_the_corpus_is_large_and_varied() -> None:
    assert len(CASES) >= 60
    formats = {c.headers.get("format") for c in CASES if c.error_kind is None}
    assert {"search_replace", "udiff", "whole_file", "definitions"} <= formats
    assert len({c.name for c in CASES}) == len(CASES)
    assert all(c.patch or c.error_kind for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_case(case: Case, tmp_path: Path) -> None:
    files = repo_files(case.headers["repo"])
    if case.error_kind is not None:
        with pytest.raises(EditError) as info:
            parse_edits(case.answer, files.get, lambda: list(files))
        assert info.value.kind == case.error_kind, str(info.value)
        for needle in case.sections["error"]:
            if needle.strip():
                assert needle.strip() in str(info.value)
        return
    parsed = parse_edits(case.answer, files.get, lambda: list(files))
    assert parsed.edit_format == case.headers["format"]
    assert parsed.patch.replace("\r\n", "\n") == case.patch  # the corpus is stored with \n
    for rel, text in parsed.files.items():
        if "\r\n" in (files.get(rel) or ""):
            assert text.count("\n") == text.count("\r\n"), "the file's CRLF ends are kept"
    if shutil.which("git"):
        for rel, text in files.items():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_bytes(text.encode())
        (tmp_path / "p.diff").write_bytes(parsed.patch.encode())
        subprocess.run(["git", "apply", "--whitespace=nowarn", "p.diff"], cwd=tmp_path,
                       check=True, capture_output=True)
        for rel, text in parsed.files.items():
            assert (tmp_path / rel).read_bytes().decode() == text

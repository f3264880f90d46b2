"""Issue 40 #4: a PEP 263 latin-1 source file was read as missing, so the model was told it
"does not exist" and invited to create it anew (over the real one). It is now said to be
uneditable, naming the encoding Python's own reader (tokenize.detect_encoding) finds."""

from __future__ import annotations

from pathlib import Path

import pytest

from ooda.agent import edits
from ooda.agent.core.repo_view import RepoView

LATIN1 = "# -*- coding: latin-1 -*-\nNAME = 'café'\n\n\ndef greet():\n    return NAME\n"


@pytest.fixture
def repo(tmp_path: Path) -> RepoView:
    (tmp_path / "legacy.py").write_bytes(LATIN1.encode("latin-1"))
    (tmp_path / "blob.py").write_bytes(b"X = '\xff\xfe'\n")
    (tmp_path / "ok.py").write_text("Y = 1\n")
    return RepoView(tmp_path)


def block(path: str, search: str, replace: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_an_edit_to_a_latin1_file_says_it_cannot_be_edited(repo: RepoView) -> None:
    answer = block("legacy.py", "    return NAME\n", "    return NAME.upper()\n")
    with pytest.raises(edits.EditError) as err:
        edits.parse_edits(answer, repo.read_base)
    assert err.value.kind == "not_utf8"
    assert str(err.value) == (
        "legacy.py cannot be edited: it is encoded in iso-8859-1 (its PEP 263 coding "
        "declaration); ooda edits UTF-8 files only. Leave it as it is and make the fix "
        "elsewhere")
    assert "does not exist" not in str(err.value)


def test_it_is_never_created_anew_over_the_real_one(repo: RepoView) -> None:
    answer = block("legacy.py", "", "NAME = 'new'\n")
    with pytest.raises(edits.EditError, match="cannot be edited") as err:
        edits.parse_edits(answer, repo.read_base)
    assert err.value.kind == "not_utf8"
    with pytest.raises(edits.EditError, match="blob.py cannot be edited: it is not UTF-8 text"):
        edits.parse_edits(block("blob.py", "", "X = 1\n"), repo.read_base)
    assert edits.partial_answer_is_hopeless(answer, repo.read_base) is not None


def test_utf8_files_and_missing_ones_read_as_before(repo: RepoView) -> None:
    assert repo.read_base("ok.py") == "Y = 1\n"
    assert repo.read_base("nope.py") is None
    made = edits.parse_edits(block("ok.py", "Y = 1\n", "Y = 2\n"), repo.read_base)
    assert "+Y = 2" in made.patch

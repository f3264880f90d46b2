"""`ooda eval --predictions` applies every patch the SWE-bench harness applies: the same
prediction, cut in each way real systems cut patches, goes through the harness's own sequence
(`git apply -v`, then `patch --batch --fuzz=5 -p1`) in one checkout and through
harness_apply.apply_prediction in another; whatever the harness applies ooda applies, to the
same bytes. (Four of 20 MiniMax-M2.5 predictions on Verified, all with a last hunk shorter than
its header, were refused as "not a valid unified diff" before.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ooda.agent.verify.harness_apply import apply_prediction, header_paths
from ooda.agent.verify.workspace import PatchError

SOURCE = (
    "import os\n\n\n"
    "def add(a, b):\n"
    '    """Add."""\n'
    "    return a - b\n\n\n"
    "def sub(a, b):\n"
    "    return a - b\n\n\n"
    "def mul(a, b):\n"
    "    return a * b\n"
)
FIXED = SOURCE.replace("    return a - b\n\n\ndef sub", "    return a + b\n\n\ndef sub")
FULL = (
    "diff --git a/calc.py b/calc.py\n"
    "index 1111111..2222222 100644\n"
    "--- a/calc.py\n+++ b/calc.py\n"
    "@@ -4,6 +4,6 @@ import os\n"
    " def add(a, b):\n"
    '     """Add."""\n'
    "-    return a - b\n"
    "+    return a + b\n"
    " \n"
    " \n"
    " def sub(a, b):\n"
)


def _cuts() -> dict[str, str]:
    """The prediction as real systems hand it over."""
    no_git = FULL.split("--- a/calc.py", 1)[1]
    return {
        "whole": FULL,
        "no final newline": FULL.rstrip("\n"),
        "stripped: last context line gone": FULL[: FULL.rindex(" def sub")].rstrip("\n"),
        "stripped: trailing blank context lines gone": FULL.replace(" \n \n def sub(a, b):\n", ""),
        "spaces of blank context lines trimmed": FULL.replace(" \n", "\n"),
        "CRLF line ends": FULL.replace("\n", "\r\n"),
        "no git header, timestamps": "--- a/calc.py\t2024-01-01 00:00:00\n+++ b/calc.py\t2024-01-01"
        " 00:00:01" + no_git.split("+++ b/calc.py", 1)[1],
        "text after the diff": FULL + "\nThis fixes add().\n",
        "wrong hunk counts": FULL.replace("@@ -4,6 +4,6 @@", "@@ -4,9 +4,9 @@"),
        "context off by lines": FULL.replace("@@ -4,6 +4,6 @@", "@@ -1,6 +1,6 @@"),
    }


def _checkout(root: Path) -> Path:
    root.mkdir()
    (root / "calc.py").write_text(SOURCE)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def _harness(root: Path, patch: str) -> bool:
    """The harness's sequence: git apply, else patch --batch --fuzz=5 -p1."""
    data = patch.encode()
    if subprocess.run(["git", "apply", "-v", "-"], cwd=root, input=data,
                      capture_output=True, check=False).returncode == 0:
        return True
    return subprocess.run(["patch", "--batch", "--fuzz=5", "-p1", "--no-backup-if-mismatch"],
                          cwd=root, input=data, capture_output=True,
                          check=False).returncode == 0


@pytest.mark.parametrize("cut", sorted(_cuts()))
def test_ooda_applies_what_the_harness_applies(cut: str, tmp_path: Path) -> None:
    patch = _cuts()[cut]
    harness = _checkout(tmp_path / "harness")
    ours = _checkout(tmp_path / "ours")
    applied_by_harness = _harness(harness, patch)
    try:
        apply_prediction(ours, patch)
        applied_by_ooda = True
    except PatchError:
        applied_by_ooda = False
    if applied_by_harness:
        assert applied_by_ooda, cut
        assert (ours / "calc.py").read_bytes() == (harness / "calc.py").read_bytes(), cut
    if cut in ("whole", "no final newline", "stripped: last context line gone",
               "no git header, timestamps"):
        assert applied_by_harness and (ours / "calc.py").read_text() == FIXED, cut


def test_header_paths_ignore_removed_lines_that_look_like_headers() -> None:
    patch = ("--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,1 @@\n"
             "--- not a header\n select 1\n")
    assert header_paths(patch) == (["q.sql"], 1)
    assert header_paths("--- old.py\t2024\n+++ new.py\n@@ -1 +1 @@\n-a\n+b") == (
        ["old.py", "new.py"], 0)

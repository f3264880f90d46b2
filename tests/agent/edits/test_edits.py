"""Edit parsing: SEARCH/REPLACE blocks, unified diffs, their mix, and every rejection."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ooda.agent.edits import (
    EditError,
    ParsedEdits,
    make_patch,
    parse_edits,
    partial_answer_is_hopeless,
)

GCD = """\
def gcd(a, b):
    while b:
        a, b = b, a % b
    return a


def lcm(a, b):
    return a * b // gcd(a, b)
"""


def reader(files: dict[str, str]):  # type: ignore[no-untyped-def]
    return lambda path: files.get(path)


def parse(answer: str, files: dict[str, str] | None = None) -> ParsedEdits:
    return parse_edits(answer, reader(files if files is not None else {"m.py": GCD}))


def error(answer: str, files: dict[str, str] | None = None) -> str:
    with pytest.raises(EditError) as info:
        parse(answer, files)
    return str(info.value)


def git_apply(tmp_path: Path, files: dict[str, str], patch: str) -> dict[str, str]:
    """Apply `patch` with git to a directory holding `files`; the resulting contents."""
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    for name, content in files.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode())
    (tmp_path / "p.diff").write_bytes(patch.encode())
    subprocess.run(
        ["git", "apply", "--whitespace=nowarn", "p.diff"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    (tmp_path / "p.diff").unlink()
    return {
        str(p.relative_to(tmp_path)): p.read_bytes().decode()
        for p in tmp_path.rglob("*")
        if p.is_file()
    }


# --------------------------------------------------------------------------- SEARCH/REPLACE

SR = """\
Here is the fix.

m.py
<<<<<<< SEARCH
    return a * b // gcd(a, b)
=======
    return abs(a * b) // gcd(a, b)
>>>>>>> REPLACE
"""


def test_search_replace_basic(tmp_path: Path) -> None:
    result = parse(SR)
    assert result.files == {"m.py": GCD.replace("a * b //", "abs(a * b) //")}
    assert result.patch.startswith("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@")
    assert "-    return a * b // gcd(a, b)\n+    return abs(a * b) // gcd(a, b)\n" in result.patch
    assert git_apply(tmp_path, {"m.py": GCD}, result.patch)["m.py"] == result.files["m.py"]


@pytest.mark.parametrize(
    "before",
    [
        "m.py\n```python\n",
        "```python\nm.py\n",
        "`m.py`\n```python\n",
        "**m.py**\n```\n",
        "m.py:\n\n```python\n",
        "### m.py\n```python\n",
        "```python m.py\n",
    ],
)
def test_path_line_variants(before: str) -> None:
    answer = before + SR.split("m.py\n", 1)[1] + "```\n"
    assert parse(answer).files["m.py"].count("abs(") == 1


def test_path_in_subdirectory_and_dot_slash() -> None:
    files = {"pkg/m.py": GCD}
    answer = SR.replace("m.py\n<<<", "./pkg/m.py\n<<<")
    assert list(parse(answer, files).files) == ["pkg/m.py"]


def test_block_without_path_reuses_previous_path() -> None:
    answer = SR + (
        "<<<<<<< SEARCH\ndef gcd(a, b):\n=======\ndef gcd(a: int, b: int) -> int:\n"
        ">>>>>>> REPLACE\n"
    )
    new = parse(answer).files["m.py"]
    assert "def gcd(a: int, b: int) -> int:" in new and "abs(a * b)" in new


def test_first_block_without_path_is_an_error() -> None:
    msg = error("Change this:\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n")
    assert "block 1" in msg and "no file path" in msg


def test_multiple_blocks_apply_in_order_against_evolving_content() -> None:
    answer = (
        "m.py\n<<<<<<< SEARCH\n    return a\n=======\n    return abs(a)\n>>>>>>> REPLACE\n"
        "m.py\n<<<<<<< SEARCH\n    return abs(a)\n=======\n    return int(abs(a))\n"
        ">>>>>>> REPLACE\n"
    )
    assert "    return int(abs(a))\n" in parse(answer).files["m.py"]


def test_multiple_files(tmp_path: Path) -> None:
    files = {"m.py": GCD, "n.py": "X = 1\n"}
    answer = SR + "\nn.py\n<<<<<<< SEARCH\nX = 1\n=======\nX = 2\n>>>>>>> REPLACE\n"
    result = parse(answer, files)
    assert result.files["n.py"] == "X = 2\n"
    assert git_apply(tmp_path, files, result.patch) == {**files, **result.files}


def test_create_file_with_empty_search(tmp_path: Path) -> None:
    answer = "pkg/new.py\n```python\n<<<<<<< SEARCH\n=======\nVALUE = 3\n>>>>>>> REPLACE\n```\n"
    result = parse(answer)
    assert result.files == {"pkg/new.py": "VALUE = 3\n"}
    assert "new file mode 100644\n--- /dev/null\n+++ b/pkg/new.py\n" in result.patch
    assert git_apply(tmp_path, {"m.py": GCD}, result.patch)["pkg/new.py"] == "VALUE = 3\n"


def test_create_then_edit_same_file() -> None:
    answer = (
        "new.py\n<<<<<<< SEARCH\n=======\nA = 1\nB = 2\n>>>>>>> REPLACE\n"
        "new.py\n<<<<<<< SEARCH\nB = 2\n=======\nB = 3\n>>>>>>> REPLACE\n"
    )
    assert parse(answer).files == {"new.py": "A = 1\nB = 3\n"}


def test_empty_search_on_existing_file_is_an_error() -> None:
    msg = error("m.py\n<<<<<<< SEARCH\n=======\nX = 1\n>>>>>>> REPLACE\n")
    assert "m.py" in msg and "empty" in msg


def test_search_on_missing_file_is_an_error() -> None:
    msg = error("nope.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n")
    assert "nope.py does not exist" in msg


def test_trailing_whitespace_fallback() -> None:
    files = {"m.py": "a = 1   \nb = 2\n"}
    answer = "m.py\n<<<<<<< SEARCH\na = 1\nb = 2\n=======\na = 1\nb = 3\n>>>>>>> REPLACE\n"
    assert parse(answer, files).files["m.py"] == "a = 1\nb = 3\n"


def test_no_match_names_path_block_lines_and_closest() -> None:
    answer = SR + (
        "m.py\n<<<<<<< SEARCH\n    while b != 0:\n        a, b = b, a % b\n=======\n"
        "    while b:\n>>>>>>> REPLACE\n"
    )
    msg = error(answer)
    assert "SEARCH/REPLACE block 2 (m.py)" in msg
    assert "not found" in msg and "while b != 0:" in msg
    assert "closest lines in the file (line 2)" in msg and "    while b:" in msg


def test_search_with_other_indentation_is_found_and_replace_reindented() -> None:
    answer = "m.py\n<<<<<<< SEARCH\nreturn a\n=======\nreturn b\n>>>>>>> REPLACE\n"
    assert parse(answer).files["m.py"] == GCD.replace("    return a\n", "    return b\n")


def test_ambiguous_match_is_an_error() -> None:
    files = {"m.py": "x = 1\ny = 2\nx = 1\n"}
    msg = error("m.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 3\n>>>>>>> REPLACE\n", files)
    assert "m.py" in msg and "2 times" in msg and "lines 1, 3" in msg


def test_unterminated_blocks() -> None:
    assert "missing `=======`" in error("m.py\n<<<<<<< SEARCH\n    return a\n")
    msg = error("m.py\n<<<<<<< SEARCH\n    return a\n=======\n    return b\n")
    assert "missing `>>>>>>> REPLACE`" in msg and "cut off" in msg


def test_crlf_file_keeps_crlf(tmp_path: Path) -> None:
    files = {"w.py": "a = 1\r\nb = 2\r\nc = 3\r\n"}
    answer = "w.py\n<<<<<<< SEARCH\nb = 2\n=======\nb = 20\nb2 = 21\n>>>>>>> REPLACE\n"
    result = parse(answer, files)
    assert result.files["w.py"] == "a = 1\r\nb = 20\r\nb2 = 21\r\nc = 3\r\n"
    assert git_apply(tmp_path, files, result.patch)["w.py"] == result.files["w.py"]


def test_crlf_answer_is_normalised() -> None:
    answer = SR.replace("\n", "\r\n")
    assert "abs(a * b)" in parse(answer).files["m.py"]


def test_missing_final_newline_is_preserved(tmp_path: Path) -> None:
    files = {"m.py": "a = 1\nb = 2"}
    answer = "m.py\n<<<<<<< SEARCH\nb = 2\n=======\nb = 3\nc = 4\n>>>>>>> REPLACE\n"
    result = parse(answer, files)
    assert result.files["m.py"] == "a = 1\nb = 3\nc = 4"
    assert "\\ No newline at end of file" in result.patch
    assert git_apply(tmp_path, files, result.patch)["m.py"] == "a = 1\nb = 3\nc = 4"


def test_replace_containing_markdown_fences() -> None:
    files = {"README.md": "# T\n\nold\n"}
    answer = (
        "README.md\n<<<<<<< SEARCH\nold\n=======\n```python\nprint(1)\n```\n>>>>>>> REPLACE\n"
    )
    assert parse(answer, files).files["README.md"] == "# T\n\n```python\nprint(1)\n```\n"


def test_deleting_lines() -> None:
    answer = "m.py\n<<<<<<< SEARCH\n\n\ndef lcm(a, b):\n    return a * b // gcd(a, b)\n=======\n"
    answer += ">>>>>>> REPLACE\n"
    assert parse(answer).files["m.py"] == GCD.split("\n\n\n")[0] + "\n"


# --------------------------------------------------------------------------- rejections


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/etc/passwd", "absolute"),
        ("../outside.py", "'..'"),
        ("pkg/../../x.py", "'..'"),
        (".git/config", ".git/"),
        ("sub/.git/hooks/pre-commit", ".git/"),
    ],
)
def test_unsafe_paths(path: str, reason: str) -> None:
    msg = error(f"{path}\n<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE\n")
    assert reason in msg and path in msg
    diff = f"```diff\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n```\n"
    assert reason in error(diff)


def test_no_edits() -> None:
    msg = error("I think the bug is in gcd, but I am not sure.")
    assert msg.startswith("no edits found") and "SEARCH/REPLACE" in msg
    assert error("```python\nprint(1)\n```\n").startswith("no edits found")


def test_no_op_edit_is_rejected() -> None:
    answer = "m.py\n<<<<<<< SEARCH\n    return a\n=======\n    return a\n>>>>>>> REPLACE\n"
    assert "change nothing" in error(answer)


def test_edit_and_revert_is_a_no_op() -> None:
    answer = (
        "m.py\n<<<<<<< SEARCH\n    return a\n=======\n    return b\n>>>>>>> REPLACE\n"
        "m.py\n<<<<<<< SEARCH\n    return b\n=======\n    return a\n>>>>>>> REPLACE\n"
    )
    assert "change nothing" in error(answer)


# --------------------------------------------------------------------------- unified diffs

DIFF = (
    "```diff\n"
    "--- a/m.py\n"
    "+++ b/m.py\n"
    "@@ -6,2 +6,2 @@\n"
    " \n"
    " def lcm(a, b):\n"
    "-    return a * b // gcd(a, b)\n"
    "+    return abs(a * b) // gcd(a, b)\n"
    "```\n"
)


def test_diff_basic(tmp_path: Path) -> None:
    result = parse(DIFF)
    assert result.files == {"m.py": GCD.replace("a * b //", "abs(a * b) //")}
    assert git_apply(tmp_path, {"m.py": GCD}, result.patch)["m.py"] == result.files["m.py"]


def test_diff_with_git_headers_and_no_prefixes() -> None:
    git_header = "diff --git a/m.py b/m.py\nindex 1234567..89abcde 100644\n"
    git = DIFF.replace("```diff\n", "```diff\n" + git_header)
    assert "abs(a * b)" in parse(git).files["m.py"]
    bare = DIFF.replace("--- a/m.py", "--- m.py").replace("+++ b/m.py", "+++ m.py")
    assert "abs(a * b)" in parse(bare).files["m.py"]


def test_diff_in_plain_fence_is_recognised() -> None:
    assert "abs(a * b)" in parse(DIFF.replace("```diff", "```")).files["m.py"]


def test_diff_with_wrong_line_numbers() -> None:
    for header in ("@@ -1,4 +1,4 @@", "@@ -40,4 +40,4 @@", "@@ ... @@", "@@"):
        answer = DIFF.replace("@@ -6,2 +6,2 @@", header)
        assert "abs(a * b)" in parse(answer).files["m.py"], header


def test_diff_with_miscounted_hunk_lengths() -> None:
    # too long (unidiff raises) and too short (unidiff would silently drop the `+` line)
    for header in ("@@ -6,9 +6,9 @@", "@@ -6,1 +6,1 @@"):
        result = parse(DIFF.replace("@@ -6,2 +6,2 @@", header))
        assert result.files["m.py"] == GCD.replace("a * b //", "abs(a * b) //"), header


def test_diff_blank_context_line_without_space() -> None:
    answer = DIFF.replace("@@ -6,2 +6,2 @@\n \n", "@@ -6,2 +6,2 @@\n\n")
    assert "abs(a * b)" in parse(answer).files["m.py"]


def test_diff_context_must_match() -> None:
    answer = DIFF.replace(" def lcm(a, b):", " def lcm(x, y):")
    msg = error(answer)
    assert "diff block 1, hunk 1 (m.py)" in msg and "not found" in msg and "lcm(x, y)" in msg


def test_diff_ambiguous_hunk_uses_stated_line_then_fails_without_it() -> None:
    files = {"m.py": "x = 1\n" + "pass\n" * 30 + "x = 1\n"}
    hunk = "```diff\n--- a/m.py\n+++ b/m.py\n@@ -32,1 +32,1 @@\n-x = 1\n+x = 2\n```\n"
    assert parse(hunk, files).files["m.py"].endswith("pass\nx = 2\n")
    msg = error(hunk.replace("@@ -32,1 +32,1 @@", "@@ ... @@"), files)
    assert "2 times" in msg and "m.py" in msg


def test_diff_several_hunks_with_offsets() -> None:
    files = {"m.py": "".join(f"line{i}\n" for i in range(1, 41))}
    answer = (
        "```diff\n--- a/m.py\n+++ b/m.py\n"
        "@@ -3,1 +3,3 @@\n-line3\n+line3a\n+line3b\n+line3c\n"
        "@@ -30,1 +32,1 @@\n-line30\n+LINE30\n"
        "```\n"
    )
    new = parse(answer, files).files["m.py"].splitlines()
    assert new[2:5] == ["line3a", "line3b", "line3c"] and new[31] == "LINE30"


def test_diff_pure_insertion() -> None:
    files = {"m.py": "a\nb\nc\n"}
    answer = "```diff\n--- a/m.py\n+++ b/m.py\n@@ -1,0 +2,1 @@\n+inserted\n```\n"
    assert parse(answer, files).files["m.py"] == "a\ninserted\nb\nc\n"


def test_diff_creates_file(tmp_path: Path) -> None:
    answer = "```diff\n--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1,2 @@\n+A = 1\n+B = 2\n```\n"
    result = parse(answer)
    assert result.files == {"pkg/new.py": "A = 1\nB = 2\n"}
    assert git_apply(tmp_path, {"m.py": GCD}, result.patch)["pkg/new.py"] == "A = 1\nB = 2\n"


def test_diff_errors() -> None:
    create_existing = "```diff\n--- /dev/null\n+++ b/m.py\n@@ -0,0 +1 @@\n+A = 1\n```\n"
    assert "already exists" in error(create_existing)
    delete = "```diff\n--- a/m.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-def gcd(a, b):\n```\n"
    assert "deleting files" in error(delete)
    rename = "```diff\n--- a/m.py\n+++ b/n.py\n@@ -1 +1 @@\n-def gcd(a, b):\n+x\n```\n"
    assert "renaming" in error(rename)
    missing = "```diff\n--- a/zz.py\n+++ b/zz.py\n@@ -1 +1 @@\n-a\n+b\n```\n"
    assert "zz.py does not exist" in error(missing)
    assert "no hunks" in error("```diff\n--- a/m.py\n+++ b/m.py\n```\n")


def test_diff_touching_two_files(tmp_path: Path) -> None:
    files = {"m.py": GCD, "n.py": "X = 1\n"}
    second = "--- a/n.py\n+++ b/n.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n```\n"
    answer = DIFF.replace("```\n", "") + second
    result = parse(answer, files)
    assert result.files["n.py"] == "X = 2\n" and "abs(" in result.files["m.py"]
    assert git_apply(tmp_path, files, result.patch) == {**files, **result.files}


# --------------------------------------------------------------------------- mixes


def test_mix_of_diff_and_search_replace_in_order(tmp_path: Path) -> None:
    answer = DIFF + (
        "\nAnd also:\n\nm.py\n<<<<<<< SEARCH\n    return abs(a * b) // gcd(a, b)\n=======\n"
        "    return abs(a * b) // gcd(a, b) if a and b else 0\n>>>>>>> REPLACE\n"
        "\nnew.txt\n<<<<<<< SEARCH\n=======\nhello\n>>>>>>> REPLACE\n"
    )
    result = parse(answer)
    assert "if a and b else 0" in result.files["m.py"]
    assert result.files["new.txt"] == "hello\n"
    assert git_apply(tmp_path, {"m.py": GCD}, result.patch) == {"m.py": GCD, **result.files}


def test_search_replace_inside_diff_fence_is_read_as_block() -> None:
    answer = "```diff\n" + SR.split("\n", 2)[2] + "```\n"
    assert "abs(a * b)" in parse(answer).files["m.py"]


# --------------------------------------------------------------------------- streaming check


def test_partial_answer_is_hopeless() -> None:
    read = reader({"m.py": GCD})
    bad = "m.py\n<<<<<<< SEARCH\n    return a * c\n=======\n    return 0\n>>>>>>> REPLACE\n"
    assert partial_answer_is_hopeless("", read) is None
    assert partial_answer_is_hopeless(bad[:40], read) is None
    assert partial_answer_is_hopeless(bad[:-1], read) is None  # REPLACE line not finished
    reason = partial_answer_is_hopeless(bad + "more text\nm.py\n<<<<<<< SEA", read)
    assert reason is not None and "not found" in reason and "m.py" in reason
    assert partial_answer_is_hopeless(SR + "\nm.py\n<<<<<<< SEARCH\n", read) is None
    assert partial_answer_is_hopeless("../x\n" + bad.split("\n", 1)[1], read) is not None


def test_diff_with_correct_counts_goes_through_unidiff() -> None:
    answer = DIFF.replace("@@ -6,2 +6,2 @@", "@@ -6,3 +6,3 @@")
    assert parse(answer).files["m.py"] == GCD.replace("a * b //", "abs(a * b) //")


def test_create_empty_file(tmp_path: Path) -> None:
    result = parse("pkg/__init__.py\n<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE\n")
    assert result.files == {"pkg/__init__.py": ""}
    assert git_apply(tmp_path, {"m.py": GCD}, result.patch)["pkg/__init__.py"] == ""


def test_diff_with_a_path_header_and_zero_hunk_creates_a_missing_file() -> None:
    answer = "```diff\n--- a/new.py\n+++ b/new.py\n@@ -0,0 +1,1 @@\n+A = 1\n```\n"
    result = parse(answer)
    assert result.files == {"new.py": "A = 1\n"} and "--- /dev/null" in result.patch


def test_make_patch_from_full_contents(tmp_path: Path) -> None:
    base = {"m.py": GCD, "same.py": "S = 1\n"}
    files = {"m.py": GCD.replace("a % b", "a % b  # step"), "same.py": "S = 1\n", "n.py": "N\n"}
    patch = make_patch(files, base.get)
    assert "same.py" not in patch and "new file mode" in patch
    assert git_apply(tmp_path, base, patch) == {**base, **files}
    assert make_patch({"m.py": GCD}, base.get) == ""


# --------------------------------------------------------------------------- hostile text


def test_fence_line_with_many_spaces_is_no_edit() -> None:
    """The old fence regex backtracked cubically on this answer (8,000 spaces: 442 s)."""
    msg = error("```" + " " * 8_000 + "`")
    assert msg.startswith("no edits found")


@pytest.mark.parametrize("bad", ["\ud800", "\udfff", "\x00"])
def test_text_no_file_can_hold_is_an_invalid_edit(bad: str) -> None:
    answer = SR.replace("abs(a * b)", f"abs(a * b){bad}")
    with pytest.raises(EditError) as info:
        parse(answer)
    assert info.value.kind == "invalid_text"
    assert partial_answer_is_hopeless(answer, reader({"m.py": GCD})) == str(info.value)


def test_parse_result_records_the_format() -> None:
    assert parse(SR).edit_format == "search_replace"
    assert parse(DIFF).edit_format == "udiff"
    assert parse(DIFF + "\n" + SR.replace("abs(a * b)", "abs(a) * abs(b)").replace(
        "    return a * b // gcd(a, b)\n=", "    return abs(a * b) // gcd(a, b)\n=")
    ).edit_format == "udiff+search_replace"

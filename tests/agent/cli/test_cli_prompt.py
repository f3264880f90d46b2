"""`ooda prompt`: the first request of a run, printed without calling a model."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import MEDIAN, ooda


def test_prompt_json_of_an_example_shows_its_files_whole(tmp_path: Path) -> None:
    done = ooda("prompt", str(MEDIAN), "--json", env={"OODA_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [m["role"] for m in report["messages"]] == ["system", "user"]
    assert report["context"] == [{"path": "median.py", "lines": [[1, 14]]},
                                 {"path": "tests/test_median.py", "lines": [[1, 32]]}]
    user = report["messages"][1]["content"]
    assert user.count("tests/test_median.py\n```python") == 1
    assert 0 < report["tokens"] < 2000


def test_prompt_text_and_a_plain_repository_within_a_small_budget(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for k in range(30):
        body = "\n\n".join(f"def f{k}_{j}(x):\n    return x + {j}\n" for j in range(40))
        (repo / f"mod{k}.py").write_text(body)
    (repo / "target.py").write_text("def frobnicate(x):\n    return x - 1\n")
    done = ooda("prompt", str(repo), "--statement", "frobnicate() is off by one",
                "--test-cmd", "pytest", "--context-tokens", "1500", "--json",
                env={"OODA_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["tokens"] <= 1500
    assert report["context"][0]["path"] == "target.py"
    text = ooda("prompt", str(repo), "--statement", "frobnicate() is off by one",
                "--test-cmd", "pytest", "--context-tokens", "1500",
                env={"OODA_HOME": str(tmp_path / "home")})
    assert text.stdout.startswith("----- system -----")
    assert "def frobnicate(x):" in text.stdout and "tokens (estimated)" in text.stderr


def test_prompt_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = ooda("prompt", str(MEDIAN), "--context-tokens", "0")
    assert done.returncode == 2 and "--context-tokens" in done.stderr
    assert "Traceback" not in done.stderr
    done = ooda("prompt", str(tmp_path / "missing"))
    assert done.returncode == 2

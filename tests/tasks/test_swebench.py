"""tasks/importers/swebench.py: reading SWE-bench .jsonl, exporting clones at base_commit,
writing task directories that the loader accepts."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.tasks.importers.swebench import (
    Skipped,
    import_swebench,
    materialize,
    read_instances,
)
from ooda.tasks.loader import load_task, load_taskset

PATCH = (
    "diff --git a/pkg/calc.py b/pkg/calc.py\n--- a/pkg/calc.py\n+++ b/pkg/calc.py\n"
    "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
)
TEST_PATCH = (
    "diff --git a/tests/test_calc.py b/tests/test_calc.py\nnew file mode 100644\n"
    "--- /dev/null\n+++ b/tests/test_calc.py\n@@ -0,0 +1,4 @@\n+from pkg.calc import add\n"
    "+\n+def test_add():\n+    assert add(2, 3) == 5\n"
)


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


@pytest.fixture()
def clone(tmp_path: Path) -> tuple[Path, str]:
    """repos/acme__calc with two commits; returns (repos_dir, the first commit)."""
    repo = tmp_path / "repos" / "acme__calc"
    (repo / "pkg").mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "LATER.md").write_text("added by the second commit\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")
    (repo / "untracked.txt").write_text("working tree junk\n")
    return tmp_path / "repos", base


def instance(base: str, **over: Any) -> dict[str, Any]:
    row = {
        "instance_id": "acme__calc-7",
        "repo": "acme/calc",
        "base_commit": base,
        "problem_statement": "add() subtracts.",
        "patch": PATCH,
        "test_patch": TEST_PATCH,
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
        "PASS_TO_PASS": json.dumps([]),
        "created_at": "2024-01-01",
    }
    row.update(over)
    return row


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    return path


def test_read_instances_decodes_json_string_lists(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "x.jsonl", [
        instance("abc1234"),
        instance("abc1234", instance_id="acme__calc-8", FAIL_TO_PASS=["t.py::a", "t.py::b"],
                 PASS_TO_PASS='["t.py::c"]', test_patch=""),
    ])
    first, second = read_instances(src)
    assert first.fail_to_pass == ["tests/test_calc.py::test_add"] and first.pass_to_pass == []
    assert second.fail_to_pass == ["t.py::a", "t.py::b"] and second.pass_to_pass == ["t.py::c"]
    assert second.test_patch == "" and first.clone_name == "acme__calc"
    assert [i.instance_id for i in read_instances(src, only=["acme__calc-8"])] == ["acme__calc-8"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"patch": None}, "'patch'"),
        ({"FAIL_TO_PASS": "not json"}, "FAIL_TO_PASS"),
        ({"FAIL_TO_PASS": "[]"}, "empty"),
        ({"repo": "no-slash"}, "owner/name"),
        ({"base_commit": "HEAD"}, "commit hash"),
        ({"instance_id": "../up"}, "task id"),
        ({"PASS_TO_PASS": [1]}, "PASS_TO_PASS"),
    ],
)
def test_read_instances_rejects_bad_rows(tmp_path: Path, row: dict[str, Any],
                                         message: str) -> None:
    src = write_jsonl(tmp_path / "x.jsonl", [instance("abc1234", **row)])
    with pytest.raises(UsageError, match=message) as info:
        read_instances(src)
    assert "x.jsonl:1" in str(info.value)


def test_read_instances_file_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        read_instances(tmp_path / "missing.jsonl")
    (tmp_path / "torn.jsonl").write_text('{"instance_id": ')
    with pytest.raises(UsageError, match="not JSON"):
        read_instances(tmp_path / "torn.jsonl")
    dup = write_jsonl(tmp_path / "dup.jsonl", [instance("abc1234"), instance("abc1234")])
    with pytest.raises(UsageError, match="twice"):
        read_instances(dup)
    with pytest.raises(UsageError, match="unknown"):
        read_instances(write_jsonl(tmp_path / "one.jsonl", [instance("abc1234")]), only=["zz"])


def test_import_writes_task_dirs_at_base_commit(tmp_path: Path, clone: tuple[Path, str]) -> None:
    repos, base = clone
    src = write_jsonl(tmp_path / "swe.jsonl", [instance(base)])
    (written,) = import_swebench(src, tmp_path / "tasks", repos_dir=repos)
    assert written == tmp_path / "tasks" / "acme__calc-7"
    assert (written / "repo" / "pkg" / "calc.py").read_text().endswith("return a - b\n")
    assert not (written / "repo" / "LATER.md").exists()  # the tree of base_commit, not HEAD
    assert not (written / "repo" / "untracked.txt").exists()
    assert not (written / "repo" / ".git").exists()
    task = load_task(written)
    assert task.id == "acme__calc-7" and task.statement.strip() == "add() subtracts."
    assert task.gold_patch == PATCH and task.test_patch == TEST_PATCH
    assert task.fail_to_pass == ["tests/test_calc.py::test_add"] and task.pass_to_pass == []
    assert [t.id for t in load_taskset(tmp_path / "tasks")] == ["acme__calc-7"]
    with pytest.raises(UsageError, match="exists"):
        import_swebench(src, tmp_path / "tasks", repos_dir=repos)
    assert import_swebench(src, tmp_path / "tasks", repos_dir=repos, overwrite=True) == [written]


def test_materialize_exports_a_fresh_repo(tmp_path: Path, clone: tuple[Path, str]) -> None:
    repos, base = clone
    (inst,) = read_instances(write_jsonl(tmp_path / "swe.jsonl", [instance(base)]))
    work = tmp_path / "work"
    (work / "repo").mkdir(parents=True)
    (work / "repo" / "stale.py").write_text("")
    task = materialize(inst, repos, work)
    assert task.repo == work / "repo" and not (task.repo / "stale.py").exists()
    assert (task.repo / "pkg" / "calc.py").read_text().endswith("return a - b\n")
    assert task.gold_patch == PATCH and task.root is None


def test_import_reports_missing_clone_and_commit(tmp_path: Path,
                                                 clone: tuple[Path, str]) -> None:
    repos, base = clone
    src = write_jsonl(tmp_path / "a.jsonl", [instance(base, repo="acme/other")])
    with pytest.raises(UsageError, match="acme__other"):
        import_swebench(src, tmp_path / "t", repos_dir=repos)
    src = write_jsonl(tmp_path / "b.jsonl", [instance("deadbeef" * 5)])
    with pytest.raises(UsageError, match="not found"):
        import_swebench(src, tmp_path / "t", repos_dir=repos)
    with pytest.raises(UsageError, match="--repos-dir"):
        import_swebench(src, tmp_path / "t")


def test_import_keeps_going_past_instances_it_cannot_export(tmp_path: Path,
                                                            clone: tuple[Path, str]) -> None:
    """No clone, no base commit, or a blob missing from the clone: that instance is skipped
    with its reason and the others are written (one missing blob stopped a whole file)."""
    repos, base = clone
    blob = git(repos / "acme__calc", "rev-parse", f"{base}:pkg/calc.py")
    broken = repos / "acme__broken"
    subprocess.run(["git", "clone", "-q", "--bare", str(repos / "acme__calc"), str(broken)],
                   check=True)
    (broken / "objects" / blob[:2] / blob[2:]).unlink()
    rows = [instance(base, instance_id="acme__calc-1", repo="acme/other"),
            instance("deadbeef" * 5, instance_id="acme__calc-2"),
            instance(base, instance_id="acme__broken-3", repo="acme/broken"),
            instance(base, instance_id="acme__calc-4")]
    src = write_jsonl(tmp_path / "swe.jsonl", rows)
    skipped: list[Skipped] = []
    written = import_swebench(src, tmp_path / "t", repos_dir=repos, skipped=skipped)
    assert written == [tmp_path / "t" / "acme__calc-4"]
    assert [s.instance_id for s in skipped] == ["acme__calc-1", "acme__calc-2", "acme__broken-3"]
    assert "no clone of acme/other" in skipped[0].reason
    assert "not found" in skipped[1].reason and "invalid object" in skipped[2].reason
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["acme__calc-4"]


def test_a_versioned_instance_gets_its_environment_and_runs_whole_files(
    tmp_path: Path, clone: tuple[Path, str]
) -> None:
    """`version` picks the environment from the specs (written as [environment], loaded back),
    test files run whole, junk ids are dropped (noted in task.toml) and never reach pytest."""
    repos, base = clone
    row = instance(base, repo="pallets/flask", version="2.0",
                   environment_setup_commit="4346498c85848c53843b810537b83a8f6124c9d3",
                   PASS_TO_PASS=json.dumps(["tests/test_calc.py::test_other", "[100%]"]))
    os.rename(repos / "acme__calc", repos / "pallets__flask")
    src = write_jsonl(tmp_path / "swe.jsonl", [row])
    (written,) = import_swebench(src, tmp_path / "tasks", repos_dir=repos)
    text = (written / "task.toml").read_text()
    assert 'dropped junk test id "[100%]"' in text and "environment_setup_commit 4346498" in text
    task = load_task(written)
    assert task.environment is not None and task.environment["python"]
    assert task.environment["runner"]["kind"] == "pytest"
    assert task.run_test_files and task.pass_to_pass == ["tests/test_calc.py::test_other"]
    assert not (task.verifiers.ruff or task.verifiers.mypy or task.verifiers.security)
    (inst,) = read_instances(src)
    assert materialize(inst, repos, tmp_path / "m").environment == task.environment


@pytest.mark.parametrize(("repo", "version", "message"), [
    ("pallets/flask", "0.0", "no SWE-bench environment for pallets/flask version 0.0"),
    ("acme/calc", "1.0", "no SWE-bench environment for acme/calc"),
])
def test_an_instance_without_a_usable_environment_is_refused_at_import(
    tmp_path: Path, clone: tuple[Path, str], repo: str, version: str, message: str
) -> None:
    repos, base = clone
    src = write_jsonl(tmp_path / "swe.jsonl", [instance(base, repo=repo, version=version)])
    with pytest.raises(UsageError, match=message):
        read_instances(src)


def test_django_and_sympy_instances_get_their_runners(tmp_path: Path,
                                                      clone: tuple[Path, str]) -> None:
    repos, base = clone
    rows = [instance(base, instance_id="django__django-1", repo="django/django", version="3.0",
                     FAIL_TO_PASS=json.dumps(["test_x (admin_views.tests.AdminTests)"])),
            instance(base, instance_id="sympy__sympy-1", repo="sympy/sympy", version="1.1",
                     FAIL_TO_PASS=json.dumps(["test_basic"]))]
    src = write_jsonl(tmp_path / "swe.jsonl", rows)
    django, sympy = read_instances(src)
    os.rename(repos / "acme__calc", repos / "django__django")
    (written,) = import_swebench(src, tmp_path / "tasks", repos_dir=repos,
                                 only=["django__django-1"])
    loaded = load_task(written)
    assert loaded.fail_to_pass == ["test_x (admin_views.tests.AdminTests)"]
    assert loaded.environment == django.environment
    assert django.environment is not None and sympy.environment is not None
    assert django.environment["runner"]["kind"] == "django"
    assert "runtests.py" in django.environment["runner"]["test_cmd"]
    assert sympy.environment["runner"]["kind"] == "sympy"


def test_an_id_whose_parameter_holds_newlines_is_kept() -> None:
    from ooda.tasks.importers.swebench_env import usable_ids

    multi = 'tests/t.py::T::test_x[\n    "a {:c}".format(None)\n    ]'
    assert usable_ids([multi, "[100%]"]) == ([multi], ["[100%]"])

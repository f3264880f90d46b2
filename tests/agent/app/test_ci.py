"""`ooda ci`: JUnit and event parsing, review suggestions, the comment, posting to a fake
GitHub API, the fix branch, and end to end with the real loop (real sandbox, real HTTP replay
endpoint) on a git repository whose test suite fails."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_github import FakeGitHub
from sandbox_helpers import quick_sandbox_args

from ooda.agent.app.ci.comment import render_comment, review_comments, suggestions_from_patch
from ooda.agent.app.ci.github import COMMENT_MARKER, PullRequestEvent, read_event
from ooda.agent.app.ci.junit import parse_junit
from ooda.agent.app.ci.outcome import CiOptions, FailedTest, FailureReport
from ooda.agent.app.ci.run import run_ci
from ooda.agent.app.ci.statement import build_statement
from ooda.agent.app.run import RunOptions
from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.protocols import Verdict, VerifierResult
from ooda.agent.core.loop import Attempt, RunResult
from ooda.agent.core.records import RunSummary, Tokens
from ooda.agent.core.runlog import RunLog, new_run_id

BUGGY = textwrap.dedent("""\
    def add(a: int, b: int) -> int:
        return a - b


    def mul(a: int, b: int) -> int:
        return a * b
""")
TESTS = textwrap.dedent("""\
    from calc import add, mul


    def test_add() -> None:
        assert add(2, 3) == 5


    def test_mul() -> None:
        assert mul(2, 3) == 6
""")
FIX = "calc.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n"
GOOD_PATCH = "".join(line + "\n" for line in [
    "--- a/calc.py", "+++ b/calc.py", "@@ -1,5 +1,5 @@", " def add(a: int, b: int) -> int:",
    "-    return a - b", "+    return a + b", " ", " ", " def mul(a: int, b: int) -> int:",
])
F2P = "tests/test_calc.py::test_add"
P2P = "tests/test_calc.py::test_mul"
GH_ENV = ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_API_URL", "GITHUB_EVENT_PATH",
          "GITHUB_EVENT_NAME", "GITHUB_HEAD_REF", "GITHUB_REF_NAME")


def sh(cwd: Path, *argv: str) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in GH_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git checkout whose suite fails: add() is wrong, mul() is right."""
    root = tmp_path / "calcproj"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(BUGGY)
    (root / "conftest.py").write_text("")
    (root / "tests" / "test_calc.py").write_text(TESTS)
    sh(root, "git", "init", "-q", "-b", "main")
    sh(root, "git", "add", ".")
    sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "buggy")
    return root


def snapshot(root: Path) -> dict[str, str]:
    """Hash of every file (outside .git), to prove the checkout is untouched."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file() and ".git" not in p.parts
    }


def junit_of(root: Path, dest: Path) -> Path:
    """Run the host's pytest on the checkout like a CI job would, writing JUnit XML."""
    work = dest.parent / "ci-job"
    shutil.copytree(root, work, ignore=shutil.ignore_patterns(".git"))
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={dest}",
         "-o", "junit_family=xunit1"],
        cwd=work, capture_output=True, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert dest.is_file()
    return dest


def event_file(tmp_path: Path, number: int = 7) -> Path:
    path = tmp_path / "event.json"
    path.write_text(json.dumps({
        "action": "synchronize",
        "number": number,
        "pull_request": {"number": number, "title": "Speed up add()", "body": "Rewrote add.",
                         "head": {"sha": "abc123", "ref": "feature"}},
    }))
    return path


def github_env(monkeypatch: pytest.MonkeyPatch, gh: FakeGitHub, event: Path) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", gh.state.token)
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/calc")
    monkeypatch.setenv("GITHUB_API_URL", gh.url)
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")


def invoke(argv: list[str], capsys: pytest.CaptureFixture[str],
           monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """Run `ooda ci ...` through the real entry point (exit codes, one-line errors)."""
    import ooda.agent.cli.app as cli

    names = {c.name or getattr(c.callback, "__name__", "") for c in cli.app.registered_commands}
    if "ci" not in names:
        from ooda.agent.cli.ci import ci

        cli.app.command("ci")(ci)  # until agent/cli/app.py registers it
    monkeypatch.setattr(sys, "argv", ["ooda", "ci", *argv])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        cli.main()
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err


# --------------------------------------------------------------------------- JUnit, events


def test_junit_from_pytest_maps_to_node_ids(repo: Path, tmp_path: Path) -> None:
    report = parse_junit([junit_of(repo, tmp_path / "report.xml")], repo)
    assert report.fail_to_pass == [F2P]
    assert report.pass_to_pass == [P2P]
    assert "assert -1 == 5" in report.failures[0].message


def test_junit_without_file_attribute_classes_skips_and_collection_errors(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "tests" / "test_more.py").write_text("")
    xml = tmp_path / "x.xml"
    xml.write_text("""<?xml version="1.0"?>
<testsuites><testsuite name="pytest" tests="5">
  <testcase classname="tests.test_calc" name="test_add">
    <failure message="boom">E boom</failure></testcase>
  <testcase classname="tests.test_calc.TestX" name="test_y[1-2]"/>
  <testcase classname="tests.test_calc" name="test_skip"><skipped message="no"/></testcase>
  <testcase classname="" name="tests.test_more">
    <error message="collection failure">ImportError</error></testcase>
  <testsuite name="inner"><testcase classname="tests.test_calc" name="test_mul"/></testsuite>
</testsuite></testsuites>""")
    report = parse_junit([xml], repo)
    assert report.fail_to_pass == [F2P, "tests/test_more.py"]
    assert set(report.pass_to_pass) >= {"tests/test_calc.py::TestX::test_y[1-2]"}
    assert "tests/test_calc.py::test_skip" not in report.pass_to_pass + report.fail_to_pass
    assert "boom" in report.failures[0].message


def test_junit_bad_input_is_usage_error(repo: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("not xml")
    with pytest.raises(UsageError, match="not a JUnit XML report"):
        parse_junit([bad], repo)


def test_event_files(tmp_path: Path) -> None:
    pr = read_event(event_file(tmp_path, 12))
    assert (pr.number, pr.title, pr.head_sha, pr.head_branch) == (12, "Speed up add()", "abc123",
                                                                   "feature")
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"workflow_run": {
        "display_title": "Fix it", "head_sha": "def456", "head_branch": "topic",
        "pull_requests": [{"number": 3}]}}))
    wr = read_event(run, "workflow_run")
    assert (wr.name, wr.number, wr.title, wr.head_sha) == ("workflow_run", 3, "Fix it", "def456")
    push = tmp_path / "push.json"
    push.write_text(json.dumps({"ref": "refs/heads/main"}))
    assert read_event(push).number is None


def test_statement_bounds_the_failures() -> None:
    failures = [FailedTest(f"t.py::test_{i}", "x" * 3000) for i in range(20)]
    report = FailureReport([f.test_id for f in failures], [], failures, "JUnit r.xml")
    event = PullRequestEvent(number=4, title="T", body="B" * 10_000)
    text = build_statement(report, event, "pytest -q")
    assert "Pull request #4: T" in text and "t.py::test_0" in text and "pytest -q" in text
    assert "more failing test(s)" in text
    assert len(text) < 15_000


# --------------------------------------------------------------------------- suggestions


def apply_suggestions(text: str, suggestions: list[dict[str, Any]]) -> str:
    lines = text.splitlines(keepends=True)
    for s in sorted(suggestions, key=lambda s: -s["line"]):
        lines[s["start_line"] - 1 : s["line"]] = s["replacement"].splitlines(keepends=True)
    return "".join(lines)


def test_suggestions_rebuild_the_patched_file() -> None:
    old = "".join(f"line {i}\n" for i in range(1, 41))
    new_lines = old.splitlines(keepends=True)
    new_lines[2] = "changed 3\n"                      # replace
    del new_lines[10:12]                              # delete 11-12
    new_lines.insert(20, "inserted\n")                # pure insertion
    new_lines[0:0] = ["at the top\n"]                 # insertion at the very top
    new = "".join(new_lines)
    patch = "".join(difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), "a/f.py", "b/f.py", n=1))
    suggestions = suggestions_from_patch(patch)
    assert len(suggestions) >= 3
    assert all(s["path"] == "f.py" and s["start_line"] <= s["line"] for s in suggestions)
    assert apply_suggestions(old, suggestions) == new


def test_no_suggestions_for_new_files_and_review_comment_shape() -> None:
    added = "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x = 1\n"
    assert suggestions_from_patch(added) == []
    [single] = review_comments(suggestions_from_patch(GOOD_PATCH))
    assert single["line"] == 2 and "start_line" not in single and single["side"] == "RIGHT"
    assert single["body"].endswith("```suggestion\n    return a + b\n```")
    multi = review_comments([{"path": "p.py", "start_line": 3, "line": 5, "replacement": ""}])
    assert multi[0]["start_line"] == 3 and multi[0]["body"].endswith("```suggestion\n```")


# --------------------------------------------------------------------------- with a fake loop


def fake_result(winner: bool, run_dir: Path) -> RunResult:
    names = ("syntax", "tampering", "ruff")
    results = [VerifierResult(name, "passed", 0.1, "") for name in names]
    attempts = []
    for i in range(3):
        a = Attempt(f"r1c{i + 1}", 1, None, [])
        a.status, a.reason, a.patch = "failed", "pytest: 1 test failed", GOOD_PATCH
        a.verdict = Verdict("failed", a.reason, results + [
            VerifierResult("pytest", "failed", 0.5, "tests/test_calc.py::test_add | assert -1")])
        attempts.append(a)
    if winner:
        attempts[-1].status = "passed"
        attempts[-1].verdict = Verdict("passed", "passed", results + [
            VerifierResult("pytest", "passed", 0.5, "")])
    summary = RunSummary(run_dir.name, "t", "passed" if winner else "failed",
                         "passed" if winner else "rounds exhausted", model="fake", attempts=3,
                         wall_s=1.5, tokens=Tokens(1000, 50))
    return RunResult("passed" if winner else "failed", summary.reason,
                     attempts[-1] if winner else None, attempts, 1, summary)


class FakeRunTask:
    """Stands in for ooda.agent.app.run.run_task; records the task it was given."""

    def __init__(self, winner: bool = True) -> None:
        self.winner = winner
        self.tasks: list[Any] = []

    def __call__(self, task: Any, options: RunOptions, **kwargs: Any) -> tuple[RunResult, RunLog]:
        self.tasks.append(task)
        log = RunLog(options.runs_dir, new_run_id(task.id))
        return fake_result(self.winner, log.dir), log


class NoBackend:
    name = "none"
    reusable = False

    def close(self) -> None:
        pass


def fake_ci(ci: CiOptions, tmp_path: Path, winner: bool = True) -> tuple[Any, FakeRunTask]:
    fake = FakeRunTask(winner)
    outcome = run_ci(ci, RunOptions.of(model="fake", runs_dir=tmp_path / "runs"),
                     run_task_fn=fake, backend=NoBackend())  # type: ignore[arg-type]
    return outcome, fake


def test_comment_without_fix_lists_the_attempts(tmp_path: Path) -> None:
    report = FailureReport([F2P], [P2P], [FailedTest(F2P, "E  assert -1 == 5")], "JUnit r.xml")
    text = render_comment(report, fake_result(False, tmp_path / "r"))
    assert text.startswith(COMMENT_MARKER)
    assert "no verified fix" in text and "| `r1c1` | 1 | failed (pytest) |" in text
    assert "assert -1 == 5" in text and "```diff" not in text


def test_comment_says_which_stages_did_not_judge_the_fix_and_which_python_ran(
    tmp_path: Path
) -> None:
    """27.9: a reader of comment.md learns what was not checked, and where the tests ran."""
    report = FailureReport([F2P], [P2P], [FailedTest(F2P, "E  assert -1 == 5")], "JUnit r.xml")
    result = fake_result(True, tmp_path / "r")
    assert result.winner is not None and result.winner.verdict is not None
    result.winner.verdict.results.append(VerifierResult(
        "mypy", "skipped", 0.2, "", "mypy cannot check these files on the unpatched code "
        "either; stage skipped\nerror: x"))
    text = render_comment(report, result)
    assert "(passed: syntax, tampering, ruff, pytest; skipped: mypy (`mypy cannot check these " \
        "files on " \
        "the unpatched code either; stage skipped`); not run: security (turned off for this " \
        "run))" in text
    assert "Tests ran in ooda's sandbox image (Python 3.11)." in text
    result.summary = dataclasses.replace(
        result.summary, environment="environment: Python 3.9 (requires-python <3.10) — detected")
    assert "Tests ran in `Python 3.9 (requires-python <3.10) — detected`." in \
        render_comment(report, result)


def test_outputs_and_posting_create_then_edit(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    junit = junit_of(repo, tmp_path / "report.xml")
    out = tmp_path / "out"
    with FakeGitHub() as gh:
        github_env(monkeypatch, gh, event_file(tmp_path))
        gh.add_comment(7, "someone else")
        gh.add_comment(7, "another one")
        options = CiOptions(repo=repo, junit=[junit], out=out, post="github", review=True)
        first, fake = fake_ci(options, tmp_path)
        task = fake.tasks[0]
        assert (task.fail_to_pass, task.pass_to_pass) == ([F2P], [P2P])
        assert "Pull request #7: Speed up add()" in task.statement and "-1 == 5" in task.statement
        assert first.exit_code == 0 and first.comment_url
        assert (out / "suggestion.diff").read_text() == GOOD_PATCH
        comment = (out / "comment.md").read_text()
        assert comment.startswith(COMMENT_MARKER) and "```diff" in comment
        assert "passed: syntax, tampering, ruff, pytest" in comment and "1,000 + 50" in comment
        assert json.loads((out / "suggestions.json").read_text())[0]["line"] == 2
        posts = gh.requests("POST")
        assert [r.path for r in posts] == ["/repos/acme/calc/issues/7/comments",
                                           "/repos/acme/calc/pulls/7/reviews"]
        review = posts[1].body
        assert review["commit_id"] == "abc123" and review["event"] == "COMMENT"
        assert "```suggestion" in review["comments"][0]["body"]
        assert all(r.headers["Authorization"] == "Bearer test-token" for r in gh.requests())

        gh.add_comment(7, "a later comment")  # the bot's comment is no longer on the first page
        second, _ = fake_ci(CiOptions(repo=repo, junit=[junit], out=out, post="github"),
                            tmp_path, winner=False)
        assert second.exit_code == 1
        assert len(gh.requests("POST")) == 2  # no new comment, no review
        [patch] = gh.requests("PATCH")
        ours = [c for c in gh.state.comments.values() if COMMENT_MARKER in c["body"]]
        assert len(ours) == 1 and patch.path == f"/repos/acme/calc/issues/comments/{ours[0]['id']}"
        assert "no verified fix" in ours[0]["body"]
        assert not (out / "suggestion.diff").exists()
        assert len([r for r in gh.requests("GET") if r.query.get("page")]) >= 1


def test_review_rejected_is_a_warning(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeGitHub() as gh:
        github_env(monkeypatch, gh, event_file(tmp_path))
        gh.state.review_status = 422
        options = CiOptions(repo=repo, junit=[junit_of(repo, tmp_path / "r.xml")],
                            out=tmp_path / "out", post="github", review=True)
        outcome, _ = fake_ci(options, tmp_path)
        assert outcome.exit_code == 0 and outcome.comment_url
        assert outcome.warnings and "422" in outcome.warnings[0]


def test_push_branch_in_a_temporary_clone(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    origin = tmp_path / "origin.git"
    sh(tmp_path, "git", "clone", "-q", "--bare", str(repo), str(origin))
    sh(repo, "git", "remote", "add", "origin", str(origin))
    before = snapshot(repo)
    options = CiOptions(repo=repo, junit=[junit_of(repo, tmp_path / "r.xml")],
                        out=tmp_path / "out", push_branch=True)
    outcome, _ = fake_ci(options, tmp_path)
    head = sh(repo, "git", "rev-parse", "HEAD").strip()
    assert outcome.branch == f"ooda-fix/{head[:10]}"
    assert f"pushed as branch `{outcome.branch}`" in (tmp_path / "out" / "comment.md").read_text()
    shown = sh(origin, "git", "show", f"{outcome.branch}:calc.py")
    assert "return a + b" in shown
    assert sh(origin, "git", "rev-parse", f"{outcome.branch}~1").strip() == head
    assert sh(repo, "git", "status", "--porcelain") == "" and snapshot(repo) == before
    assert sh(repo, "git", "branch", "--list", "ooda-fix/*") == ""


def test_push_branch_problems(repo: Path, tmp_path: Path) -> None:
    options = CiOptions(repo=repo, junit=[junit_of(repo, tmp_path / "r.xml")],
                        out=tmp_path / "out", push_branch=True)
    with pytest.raises(UsageError, match="no 'origin' remote"):
        fake_ci(options, tmp_path)
    sh(repo, "git", "remote", "add", "origin", str(tmp_path / "gone.git"))
    outcome, _ = fake_ci(options, tmp_path)  # the push fails: a warning, the fix still stands
    assert outcome.exit_code == 0 and outcome.branch is None
    assert "fix branch not pushed" in outcome.warnings[0]
    assert (tmp_path / "out" / "suggestion.diff").is_file()


def test_does_not_run_on_its_own_branches(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_HEAD_REF", "ooda-fix/0123456789")
    options = CiOptions(repo=repo, junit=[junit_of(repo, tmp_path / "r.xml")], out=tmp_path / "o")
    outcome, fake = fake_ci(options, tmp_path)
    assert outcome.skipped and outcome.exit_code == 0 and fake.tasks == []


def test_usage_errors_exit_2_with_one_line(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    junit = str(junit_of(repo, tmp_path / "r.xml"))
    base = ["--repo", str(repo), "--out", str(tmp_path / "out"), "--model", "m",
            "--base-url", "http://127.0.0.1:9/v1"]
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/calc")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event_file(tmp_path)))
    code, out, err = invoke([*base, "--junit", junit, "--post", "github"], capsys, monkeypatch)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "GITHUB_TOKEN" in err
    code, _, err = invoke(base, capsys, monkeypatch)
    assert code == 2 and "--junit" in err and err.count("\n") == 1
    monkeypatch.setenv("GITHUB_TOKEN", "t")
    monkeypatch.delenv("GITHUB_EVENT_PATH")
    code, _, err = invoke([*base, "--junit", junit, "--post", "github"], capsys, monkeypatch)
    assert code == 2 and "--pr N" in err
    assert not (tmp_path / "out").exists()  # nothing ran


# --------------------------------------------------------------------------- end to end


@pytest.fixture
def endpoint(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The bundled replay endpoint over real HTTP, scripted with one wrong and one right fix."""
    from ooda.agent.models.server import ReplayServer

    script = tmp_path / "replay.jsonl"
    wrong = FIX.replace("a + b", "a * b")
    script.write_text("".join(json.dumps({"task": repo.name, "answer": a, "round": 1}) + "\n"
                              for a in (wrong, FIX)))
    monkeypatch.setenv("OPENAI_API_KEY", "ooda-local")
    with ReplayServer([script], models=["fast-model"]) as server:
        yield server.start()


def check_suggestion(repo: Path, out: Path, tmp_path: Path) -> None:
    """The suggestion applies to a copy of the checkout and makes the whole suite pass."""
    copy = tmp_path / "applied"
    shutil.copytree(repo, copy)
    diff = out / "suggestion.diff"
    sh(copy, "git", "apply", "--check", str(diff))
    sh(copy, "git", "apply", str(diff))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=copy, capture_output=True, text=True,
                          env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert done.returncode == 0, done.stdout


def e2e_args(repo: Path, tmp_path: Path, url: str) -> list[str]:
    return ["--repo", str(repo), "--out", str(tmp_path / "out"), "--model", "fast-model",
            "--base-url", url, "-n", "2", "--rounds", "2", "--time-budget", "120"]


@pytest.mark.slow
def test_e2e_test_cmd(repo: Path, tmp_path: Path, endpoint: str,
                      capsys: pytest.CaptureFixture[str],
                      monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(repo)
    args = [*e2e_args(repo, tmp_path, endpoint), "--test-cmd", "python -m pytest -q", "--json"]
    code, out, err = invoke(args, capsys, monkeypatch)
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "passed" and result["suggestions"] == 1
    check_suggestion(repo, tmp_path / "out", tmp_path)
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert F2P in comment and "pytest" in comment
    assert sh(repo, "git", "status", "--porcelain") == "" and snapshot(repo) == before


@pytest.mark.slow
def test_e2e_junit_posts_to_github(repo: Path, tmp_path: Path, endpoint: str,
                                   capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    junit = junit_of(repo, tmp_path / "report.xml")
    before = snapshot(repo)
    with FakeGitHub() as gh:
        github_env(monkeypatch, gh, event_file(tmp_path))
        args = [*e2e_args(repo, tmp_path, endpoint), "--junit", str(junit), "--post", "github",
                "--review"]
        code, _, err = invoke(args, capsys, monkeypatch)
        assert code == 0, err
        check_suggestion(repo, tmp_path / "out", tmp_path)
        [comment] = gh.state.comments.values()
        assert comment["body"] == (tmp_path / "out" / "comment.md").read_text()
        assert "return a + b" in comment["body"] and F2P in comment["body"]
        [review] = gh.state.reviews
        assert review["comments"][0]["path"] == "calc.py" and review["comments"][0]["line"] == 2

        code, _, err = invoke(args[:-1], capsys, monkeypatch)  # a re-run, without --review
        assert code == 0, err
        assert len(gh.state.comments) == 1 and len(gh.requests("PATCH")) == 1
        assert len(gh.state.reviews) == 1
    assert sh(repo, "git", "status", "--porcelain") == "" and snapshot(repo) == before



def pr_repo(tmp_path: Path) -> Path:
    """A project whose main branch already has one failing test (it needs a service), and a
    pull request on branch `feature` that breaks add()."""
    root = tmp_path / "calcproj"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(BUGGY.replace("a - b", "a + b"))
    (root / "conftest.py").write_text("")
    (root / "tests" / "test_calc.py").write_text(TESTS)
    (root / "tests" / "test_service.py").write_text(
        "def test_needs_the_database() -> None:\n"
        "    raise ConnectionError('no database at db:5432')\n")
    sh(root, "git", "init", "-q", "-b", "main")
    sh(root, "git", "add", ".")
    sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "main")
    sh(root, "git", "checkout", "-q", "-b", "feature")
    (root / "calc.py").write_text(BUGGY)
    sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qam", "the PR")
    return root


SERVICE = "tests/test_service.py::test_needs_the_database"


def test_find_base_from_option_event_or_merge_checkout(tmp_path: Path) -> None:
    from ooda.agent.app.ci.earlier import find_base

    root = pr_repo(tmp_path)
    main = sh(root, "git", "rev-parse", "main").strip()
    assert find_base(root, "main", PullRequestEvent()) == (main, "")
    with pytest.raises(UsageError, match="--base nope: no such commit"):
        find_base(root, "nope", PullRequestEvent())
    assert find_base(root, None, PullRequestEvent(base_sha=main)) == (main, "")
    sha, why = find_base(root, None, PullRequestEvent())
    assert sha is None and "--base REV" in why
    sha, why = find_base(root, None, PullRequestEvent(base_sha="f" * 40))
    assert sha is None and "could not be fetched" in why
    # GitHub's refs/pull/N/merge checkout: HEAD merges the PR into the base
    sh(root, "git", "checkout", "-q", "main")
    sh(root, "git", "-c", "user.name=t", "-c", "user.email=t@e", "merge", "-q", "--no-ff",
       "-m", "merge", "feature")
    assert find_base(root, None, PullRequestEvent()) == (main, "")


def test_comment_sets_apart_failures_that_fail_on_the_base_too(tmp_path: Path) -> None:
    from ooda.agent.app.ci.earlier import BaseCheck, split

    report = FailureReport([F2P, SERVICE], [P2P],
                           [FailedTest(F2P, "E  assert -1 == 5"),
                            FailedTest(SERVICE, "E  ConnectionError: no database")], "JUnit r.xml")
    own = split(report, BaseCheck(rev="abc123", earlier=(SERVICE,)))
    assert own.fail_to_pass == [F2P] and own.pass_to_pass == [P2P]
    text = render_comment(own, fake_result(True, tmp_path / "r"))
    assert "suggested fix for the pull request's failing tests (verified)" in text
    assert "**What this pull request broke** (1 test(s), from JUnit r.xml):" in text
    assert ("**Failing before this pull request too** (1 test(s): they fail on its base "
            "`abc123` as well") in text
    assert f"it leaves failing `{SERVICE}` (failing on the base too)" in text
    unsplit = split(report, BaseCheck(note="no base commit known (give --base REV)"))
    assert unsplit.fail_to_pass == [F2P, SERVICE]
    assert "(Every reported failure is the fix's job: no base commit known" in \
        render_comment(unsplit, fake_result(False, tmp_path / "r"))


@pytest.mark.slow
def test_e2e_junit_fixes_the_pull_requests_failure_and_names_what_it_leaves_failing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40 #2: a report with the PR's failure and one that fails on main already. The
    base run sets the second apart: the fix repairs the PR's, breaks nothing, and the comment
    names what it leaves failing (before: every failure was must-pass, "no verified fix")."""
    from ooda.agent.models.server import ReplayServer

    repo = pr_repo(tmp_path)
    junit = junit_of(repo, tmp_path / "report.xml")
    script = tmp_path / "replay.jsonl"
    script.write_text(json.dumps({"task": repo.name, "answer": FIX, "round": 1}) + "\n")
    monkeypatch.setenv("OPENAI_API_KEY", "ooda-local")
    with ReplayServer([script], models=["fast-model"]) as server:
        args = [*e2e_args(repo, tmp_path, server.start()), "--junit", str(junit),
                "--base", "main", "--json", *quick_sandbox_args()]
        code, out, err = invoke(args, capsys, monkeypatch)
    assert code == 0, err
    assert json.loads(out)["status"] == "passed"
    assert "reported failing test(s) on the base" in err
    comment = (tmp_path / "out" / "comment.md").read_text()
    assert "**What this pull request broke** (1 test(s)" in comment
    assert f"it leaves failing `{SERVICE}`" in comment
    assert "return a + b" in (tmp_path / "out" / "suggestion.diff").read_text()


def test_comment_is_clean_progress_dots_whole_hints_and_why_not_run(tmp_path: Path) -> None:
    """Issue 40 #9: no raw pytest progress line as a failure's headline; a hint cut at a
    clause, never inside a command; "not run: ruff, security, mypy" says why."""
    from ooda.agent.app.ci.comment import stages_off_reasons

    report = FailureReport([F2P], [P2P], [FailedTest(F2P, "..F.                [100%]\n"
                                                       "=== FAILURES ===\nassert -1 == 5")],
                           "`python -m pytest -q`")
    result = fake_result(True, tmp_path / "r")
    assert result.winner is not None and result.winner.verdict is not None
    result.winner.verdict.results = [r for r in result.winner.verdict.results
                                     if r.name not in ("ruff",)]
    result.winner.verdict.results.append(VerifierResult(
        "mypy", "skipped", 0.2, "", "mypy cannot check these files on the unpatched code "
        "either (a missing stub); stage skipped, as with `ooda run --no-mypy --environment "
        "none --verifier-timeout 120 --sandbox docker` on this repository's own checkout"))
    off = stages_off_reasons({"ruff": False, "mypy": True, "security": False},
                             {"ruff": True, "mypy": True, "security": True},
                             {"ruff": False, "mypy": False})
    text = render_comment(report, result, stages_off=off)
    assert "..F." not in text and f"`{F2P}`: `assert -1 == 5`" in text  # inert code spans
    assert ("not run: ruff, security (the tests ran in the repository's own environment, "
            "where ooda's ruff and mypy are not installed)") in text
    assert "'ooda run --no-mypy --environment none --verifier-timeout 120 --sandbox docker'" \
        in text
    from ooda.agent.app.ci.comment import _inline

    short = _inline("stage skipped, as with `ooda run --no-mypy --environment none "
                    "--verifier-timeout 120` on this checkout", 60)
    assert short == "`stage skipped, as with ...`"  # cut before the command, not inside it
    assert stages_off_reasons({"ruff": False, "mypy": False, "security": True},
                              {"ruff": True, "mypy": False, "security": True},
                              {"ruff": True, "mypy": False}) == {
        "ruff": "--no-ruff", "mypy": "the task's [verifiers] turn it off"}


def test_a_warning_is_printed_once(repo: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40 #9: "Review not posted" was printed by the run and again by the command."""
    import ooda.agent.app.ci.run as ci_run

    monkeypatch.setattr(ci_run, "run_task", FakeRunTask())
    monkeypatch.setattr(ci_run, "open_backend", lambda *a, **k: NoBackend())
    with FakeGitHub() as gh:
        github_env(monkeypatch, gh, event_file(tmp_path))
        gh.state.review_status = 422
        code, out, err = invoke(["--repo", str(repo), "--junit",
                                 str(junit_of(repo, tmp_path / "r.xml")), "--out",
                                 str(tmp_path / "out"), "--model", "m", "--post", "github",
                                 "--review"], capsys, monkeypatch)
    assert code == 0, err
    assert (out + err).lower().count("review not posted") == 1

"""Issue 40: what a new user hit on real projects, through the real command line: --apply on a
read-only repository, a full disk, the crash log, ... (each test fails without its fix)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cli_helpers import MEDIAN, ROOT

GOLD = (MEDIAN / "gold.diff").read_text()


def bwrap_works() -> bool:
    if shutil.which("bwrap") is None:
        return False
    done = subprocess.run(["bwrap", "--dev-bind", "/", "/", "true"], capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(not bwrap_works(), reason="needs bwrap for a read-only mount")
def test_apply_on_a_read_only_repository_is_refused_before_the_run(tmp_path: Path) -> None:
    """#3: before, a passing fix ended "internal error: PatchError", exit 3, after the whole
    budget; now exit 2 at once, one line, nothing run."""
    repo = tmp_path / "proj"
    shutil.copytree(MEDIAN / "repo", repo)
    done = subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(repo), str(repo),
         sys.executable, "-m", "ooda.agent.cli", "run", str(repo), "--statement", "fix median",
         "--test-cmd", "pytest -q", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--apply",
         "--runs-dir", str(tmp_path / "runs")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "OODA_DAEMON": "0", "HOME": str(tmp_path)})
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"ooda: error: --apply: cannot write to {repo} (read-only file "
                           "system): make it writable, or drop --apply (the fix is kept in the "
                           "run directory's final.diff)\n")
    assert not (tmp_path / "runs").exists()


def test_a_fix_that_cannot_be_applied_is_shown_and_said(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """#3, the late case (one file read-only, or the repository changed during the run): the
    result and the diff are printed, then one line saying where the fix is, exit 3."""
    import ooda.agent.app.run as app_run
    import ooda.agent.cli.app as cli
    import ooda.agent.verify.workspace as workspace
    from ooda.agent.core.records import RunSummary, Tokens

    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)

    def fake_run(task: Any, options: Any, **_k: Any) -> tuple[Any, Any]:
        summary = RunSummary("r1", task.id, "passed", "passed", model="m", attempts=1,
                             wall_s=1.0, tokens=Tokens(10, 5))
        winner = SimpleNamespace(patch=GOLD)
        return SimpleNamespace(status="passed", winner=winner, summary=summary), \
            SimpleNamespace(dir=run_dir)

    def read_only(repo: Path, patch: str) -> list[str]:
        raise workspace.PatchError("the patch does not apply: error: unable to write file "
                                   "'median.py': Read-only file system", "does_not_apply")

    monkeypatch.setattr(app_run, "run_task", fake_run)
    monkeypatch.setattr(workspace, "apply_patch", read_only)
    monkeypatch.setattr(sys, "argv", ["ooda", "run", str(MEDIAN), "--model", "gold", "--apply",
                                      "-q"])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    out, err = capsys.readouterr()
    assert exc.value.code == 3
    assert "+" in out + err and "median" in out + err  # the diff was shown
    assert err.endswith(
        f"ooda: error: passed; could not apply the fix to {MEDIAN / 'repo'} (the patch does not "
        "apply: error: unable to write file 'median.py': Read-only file system); the fix is in "
        f"{run_dir / 'final.diff'}\n")


def crash_with(exc: BaseException, monkeypatch: pytest.MonkeyPatch,
               capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    import ooda.agent.cli.app as cli

    def broken(**_k: Any) -> Any:
        raise exc

    monkeypatch.setattr(cli, "load_config", broken)
    monkeypatch.setattr(sys, "argv", ["ooda", "doctor"])
    with pytest.raises(SystemExit) as done:
        cli.main()
    code = done.value.code
    return (code if isinstance(code, int) else -1), capsys.readouterr().err


def test_a_crash_log_is_the_users_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """#5: the traceback went to one fixed /tmp/ooda-crash.log shared by every user of the
    machine (another user's file: not writable; a link: followed). Now a file of its own in the
    user's state directory ($XDG_STATE_HOME/ooda, as pip and uv keep per-user state)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    code, err = crash_with(RuntimeError("boom"), monkeypatch, capsys)
    assert code == 3
    [log] = (tmp_path / "state" / "ooda").glob("crash-*.log")
    assert err == f"ooda: error: internal error: RuntimeError: boom (traceback in {log})\n"
    assert "RuntimeError: boom" in log.read_text()
    assert (tmp_path / "state" / "ooda").stat().st_mode & 0o077 == 0
    # a state directory that cannot be written: a private temporary file instead
    (tmp_path / "blocked").write_text("a file, not a folder")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "blocked"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    code, err = crash_with(RuntimeError("boom"), monkeypatch, capsys)
    [log] = tmp_path.glob("ooda-crash-*.log")
    assert code == 3 and err.endswith(f"(traceback in {log})\n")
    assert log.stat().st_mode & 0o077 == 0


def test_a_full_disk_is_said_not_called_an_internal_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import errno

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    full = OSError(errno.ENOSPC, "No space left on device", "/runs/e1/summary.json")
    code, err = crash_with(full, monkeypatch, capsys)
    assert (code, err) == (3, "ooda: error: no space left on device (writing "
                              "/runs/e1/summary.json)\n")
    assert not (tmp_path / "state").exists()  # no traceback kept: not a bug


def doctor_checks(**server: Any) -> dict[str, dict[str, Any]]:
    import json

    from cli_helpers import ooda

    from ooda.agent.models.server import ReplayServer

    with ReplayServer([MEDIAN.parent], **server) as replay:
        done = ooda("doctor", "--base-url", replay.start(), "--json")
    return {c["name"]: c for c in json.loads(done.stdout)["checks"]}


@pytest.mark.parametrize("slots, expected", [(0, "both finished side by side"),
                                             (1, "one after the other")])
def test_doctor_tells_a_fast_parallel_endpoint_from_a_serial_one(slots: int,
                                                                 expected: str) -> None:
    """#7: at 3,000 tokens/s the two 48-token test streams ended before they could overlap,
    so a parallel endpoint was called "one answer at a time". The two streams now last about
    a second at the endpoint's rate (longer once more when still too short to tell)."""
    from ooda.agent.models.replay_behaviour import behaviour_for

    checks = doctor_checks(tokens_per_s=3000, behaviour=behaviour_for("openai", slots=slots))
    assert expected in checks["two streams at once"]["detail"]


def test_doctor_on_a_cut_stream_does_not_point_at_itself() -> None:
    """#7: a cut stream's hint said "`ooda doctor` sends a test stream" inside doctor."""
    checks = doctor_checks(faults=["drop"])
    stream = checks["model stream"]
    assert not stream["ok"] and "ooda doctor" not in stream["detail"] + stream["fix"]
    assert "without a finish_reason" in stream["detail"]
    assert "the server's log" in stream["fix"]


@pytest.mark.skipif(not bwrap_works(), reason="needs bwrap to fall back to")
def test_falling_back_to_bubblewrap_is_said_in_the_terminal(tmp_path: Path) -> None:
    """#11: with no Docker engine answering, ooda used bubblewrap without a word; now one
    line says so, naming DOCKER_HOST, and doctor names where it looked."""
    from tmux_helpers import terminal

    with terminal() as term:
        code, screen = term.run(
            [sys.executable, "-m", "ooda.agent.cli", "run", str(MEDIAN), "--model", "gold",
             "--runs-dir", str(tmp_path / "runs")],
            env={"DOCKER_HOST": "tcp://127.0.0.1:1", "OODA_HOME": os.environ.get(
                "OODA_HOME", str(Path.home() / ".cache" / "ooda"))})
        assert code == 0, screen
        # on a line of its own, above the live display (not run into it)
        assert ("ooda: note: no Docker engine answers at DOCKER_HOST=tcp://127.0.0.1:1: "
                "sandboxing with bubblewrap instead (`ooda doctor` says why; --sandbox bwrap "
                "chooses it without this note)") in screen.splitlines()
        assert "PASSED" in screen
        # the diff (stdout) after the result line (stderr), whole, in the same terminal
        after = screen[screen.index("PASSED"):]
        assert "+    return (ordered[middle - 1] + ordered[middle]) / 2" in after
        assert after.index("diff --git a/median.py") < after.index("final.diff: ")
        code, screen = term.run([sys.executable, "-m", "ooda.agent.cli", "doctor"],
                                env={"DOCKER_HOST": "tcp://127.0.0.1:1"})
        assert "docker engine: none answers at DOCKER_HOST=tcp://127.0.0.1:1" in screen
        assert "fix: DOCKER_HOST=tcp://127.0.0.1:1 names no answering engine" in screen


@pytest.mark.skipif(not bwrap_works(), reason="needs bwrap (see below)")
def test_a_hanging_test_is_named_with_what_to_do(tmp_path: Path) -> None:
    """#12: a test that hangs on the unpatched code ended exit 2 with "the tests did not
    finish within 60s", naming neither the test nor --verifier-timeout. (On bwrap: the Docker
    sandbox's PID 1 does not end a warm pytest run at its timeout today, so the host kills
    the container and its output, which names the running test, is lost: told to h34.)"""
    sandbox_name = "bwrap"
    limit = "10"  # test_add finishes well within it even on a loaded machine
    from cli_helpers import ooda

    from ooda.agent.models.server import ReplayServer

    repo = tmp_path / "hangs"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (repo / "tests" / "test_calc.py").write_text(
        "import time\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_slow_network():\n    time.sleep(600)\n\n\ndef test_after():\n    pass\n")
    with ReplayServer([MEDIAN.parent]) as server:
        done = ooda("run", str(repo), "--statement", "add is wrong", "--test-cmd",
                    "python -m pytest -q", "--model", "m", "--base-url", server.start(),
                    "--verifier-timeout", limit, "--sandbox", sandbox_name,
                    "--runs-dir", str(tmp_path / "runs"),
                    env={"OPENAI_API_KEY": "ooda-local"})
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "ooda: error: the test command 'python -m pytest -q' does not run on the unpatched "
        f"code: the tests did not finish within {limit}s (tests/test_calc.py::test_slow_network "
        f"was still running): give it more time (--verifier-timeout SECONDS; now {limit}), or "
        "leave that "
        "test out (add `--deselect tests/test_calc.py::test_slow_network` to the test "
        "command)\n")


def test_a_run_that_may_still_have_been_collecting_names_no_test(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """#12 under load: with no test finished, the run may not have got past collecting; the
    first test is named only when listing the tests took less than half the run's limit."""
    from ooda.verifiers.pytest_check.parse import TestRun
    from ooda.verifiers.runners import pytest_runner
    from ooda.verifiers.runners.request import TestRequest

    listing = "tests/test_a.py::test_one\ntests/test_a.py::test_two\n\n2 tests collected\n"
    clock = iter([100.0, 103.0] * 3)
    monkeypatch.setattr(pytest_runner.time, "monotonic", lambda: next(clock))
    seen: list[float] = []

    def listed(sandbox: object, args: list[str], timeout_s: float, **_: object) -> TestRun:
        seen.append(timeout_s)
        return TestRun(output=listing)

    monkeypatch.setattr(pytest_runner, "run_pytest", listed)
    runner = pytest_runner.RUNNER
    short = TestRequest(command="python -m pytest -q", timeout_s=5)
    assert runner.still_running(None, short, "") is None  # type: ignore[arg-type]
    assert runner.still_running(None, short, ".") == "tests/test_a.py::test_two"  # type: ignore[arg-type]
    long = TestRequest(command="python -m pytest -q", timeout_s=60)
    assert runner.still_running(None, long, "") == "tests/test_a.py::test_one"  # type: ignore[arg-type]
    assert seen == [pytest_runner.COLLECT_TIMEOUT_S] * 3  # never the run's own short limit


def test_progress_counting_and_the_listing_flags() -> None:
    from ooda.verifiers.runners.pytest_runner import _one_id_a_line, finished_count

    assert finished_count("collecting ...\n.F.s                [ 40%]\n..x") == 7
    assert finished_count("hello world\n") == 0
    assert _one_id_a_line(["-q", "tests"]) == ["-v"] and _one_id_a_line(["tests"]) == []
    assert _one_id_a_line(["-vv", "x"]) == ["-q", "-q"]


def test_docs_ci_says_what_ooda_ci_does(tmp_path: Path) -> None:
    """#14: docs/CI.md said a non-pytest --test-cmd is graded by its exit status (it is refused)
    and gave an --out default that `ooda ci -h` contradicts; every option it lists exists."""
    import re

    from cli_helpers import ooda

    doc = (ROOT / "docs" / "CI.md").read_text()
    helped = re.sub(r"(\w)- (\w)", r"\1-\2", " ".join(ooda("ci", "-h").stdout.split()))
    for option in sorted(set(re.findall(r"`(--[a-z][a-z-]+)", doc))):
        assert option in helped, f"docs/CI.md names {option}, which `ooda ci -h` lacks"
    out_row = next(line for line in doc.splitlines() if line.startswith("| `--out DIR`"))
    assert "$RUNNER_TEMP/ooda-ci-out" in out_row and "ooda-ci-out-REPO" in out_row
    assert "$RUNNER_TEMP/ooda-ci-out" in helped and "ooda-ci-out-REPO" in helped
    assert "graded by its exit status" not in doc and "grades candidates by its exit" not in doc
    (tmp_path / "repo").mkdir()
    refused = ooda("ci", "--repo", str(tmp_path / "repo"), "--test-cmd", "make test",
                   "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                   "--out", str(tmp_path / "out"))
    assert refused.returncode == 2 and "is not a plain pytest invocation" in refused.stderr
    assert "is refused (exit 2)" in doc


def test_token_counts_say_what_was_estimated() -> None:
    """#15: "the endpoint sent no counts" was said when it had (only cut answers were
    estimated)."""
    from ooda.agent.app.progress import tokens_phrase
    from ooda.agent.core.budget import Budget

    budget = Budget(60)
    budget.add_tokens(100, 20)  # counted by the endpoint
    budget.add_tokens(90, 5, estimated=True)  # a stream cut short
    assert budget.estimated and budget.counted
    assert tokens_phrase(190, 25, None, budget.estimated, budget.counted) == (
        "tokens ~190 sent, ~25 received (partly estimated: the answers cut short came without "
        "counts)")
    assert tokens_phrase(190, 25, None, True, False).endswith(
        "(estimated: no answer came with the endpoint's counts)")


def test_a_finished_answer_waiting_for_verification_is_not_generating() -> None:
    """#15: answers that had finished arriving were shown as "generating" while they waited
    for a verification slot."""
    import io

    from rich.console import Console

    from ooda.agent.app.progress import RunProgress
    from ooda.agent.core.records import Attempt

    console = Console(file=io.StringIO(), width=200)
    progress = RunProgress("t", 60, 1, console)
    waiting, streaming = Attempt("r1c1", 1, None, []), Attempt("r1c2", 1, None, [])
    waiting.t_generated = 1.0
    progress(waiting, "generating")
    progress(streaming, "generating")
    console.print(progress._render())
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "generating 1" in shown and "queued 1" in shown
    assert "r1c1" not in shown and "r1c2" in shown


def test_the_final_diff_goes_to_stdout_like_git_diff(tmp_path: Path) -> None:
    """#15: the diff went to stderr with everything else; `ooda run ... > fix.diff` now
    writes an applicable diff, the rest staying on stderr."""
    from cli_helpers import ooda
    from sandbox_helpers import quick_sandbox_args

    done = ooda("run", str(MEDIAN), "--model", "gold", "--runs-dir", str(tmp_path / "runs"),
                *quick_sandbox_args())  # the quicker sandbox to start: the point is the streams
    assert done.returncode == 0, done.stderr
    [run_dir] = [d for d in (tmp_path / "runs").iterdir() if (d / "final.diff").exists()]
    assert done.stdout == (run_dir / "final.diff").read_text()
    assert "PASSED" in done.stderr and "diff --git" not in done.stderr
    repo = tmp_path / "repo"
    shutil.copytree(MEDIAN / "repo", repo)
    (tmp_path / "fix.diff").write_text(done.stdout)
    subprocess.run(["git", "apply", "--check", str(tmp_path / "fix.diff")], cwd=repo,
                   check=True)


def test_a_diff_with_terminal_escapes_never_reaches_stdout_raw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#15 kept safe: a candidate's patch carrying an escape is not written raw to a pipe (an
    escaped copy would apply as another fix: nothing is written, final.diff named) and is shown
    escaped in a terminal; a clean patch, CRLF line ends included, is written byte-exact."""
    import io

    from rich.console import Console

    import ooda.agent.cli.console as consoles
    from ooda.agent.cli.run import _print_patch

    final = tmp_path / "final.diff"
    crlf = "--- a/w.txt\n+++ b/w.txt\n@@ -1 +1 @@\n-a\r\n+b\r\n"
    evil = "--- a/c.py\n+++ b/c.py\n@@ -1 +1 @@\n-x = 1\n+x = 2  # \x1b]0;t\x07\n"
    err = Console(file=io.StringIO(), width=300)
    _print_patch(err, crlf, final)
    assert capsys.readouterr().out == crlf
    _print_patch(err, evil, final)
    assert capsys.readouterr().out == ""
    said = err.file.getvalue()  # type: ignore[attr-defined]
    assert "control characters" in said and "not written to stdout" in said and str(final) in said
    screen = io.StringIO()
    monkeypatch.setattr(consoles, "make_console",
                        lambda stderr=True: Console(file=screen, force_terminal=True))
    _print_patch(err, evil, final)
    assert "\\x1b]0;t\\x07" in screen.getvalue() and "\x07" not in screen.getvalue()
    assert "shown above with its control characters escaped" in err.file.getvalue()  # type: ignore[attr-defined]


def test_serve_reads_a_changed_replay_file_again(tmp_path: Path) -> None:
    """#15: `ooda serve` kept serving a replay file after it changed."""
    import json

    import httpx2 as httpx  # noqa: F401  (the project's HTTP client is openai's)
    from openai import OpenAI

    from ooda.agent.models.server import ReplayServer

    script = tmp_path / "t1" / "replay.jsonl"
    script.parent.mkdir()
    script.write_text(json.dumps({"answer": "first"}) + "\n")

    def ask(url: str) -> str:
        client = OpenAI(base_url=url, api_key="x")
        done = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Task id: t1\nfix it"}])
        return done.choices[0].message.content or ""

    with ReplayServer([tmp_path]) as server:
        url = server.start()
        assert ask(url) == "first"
        script.write_text(json.dumps({"answer": "second, longer"}) + "\n")
        assert ask(url) == "second, longer"


def test_daemon_stop_sees_a_daemon_started_in_another_terminal(tmp_path: Path) -> None:
    """#16: a daemon started in a tmux pane (another $XDG_RUNTIME_DIR, another LANG) was
    invisible to `ooda daemon stop` in the shell next to it ("no ooda daemon was running").
    Daemons now name themselves in the user's index, and `stop` ends this installation's."""
    import re

    from tmux_helpers import terminal

    ooda_script = str(Path(sys.executable).parent / "ooda")
    home = tmp_path / "home"
    home.mkdir()
    common = {"HOME": str(home), "OODA_HOME": os.environ.get(
        "OODA_HOME", str(Path.home() / ".cache" / "ooda")), "OODA_DAEMON": "1",
        "OODA_DAEMON_IDLE_S": "120"}
    runtime = {name: tmp_path / name for name in ("xdg-pane", "xdg-shell")}
    for folder in runtime.values():
        folder.mkdir(mode=0o700)
    pid = None
    with terminal() as term:
        try:
            code, screen = term.run([ooda_script, "daemon", "start"], env={
                **common, "XDG_RUNTIME_DIR": str(runtime["xdg-pane"]), "LANG": "C.UTF-8"})
            assert code == 0, screen
            pid = int(screen.split("ooda daemon pid ")[1].split()[0])
            shell = {"PATH": os.environ["PATH"], "TERM": "xterm-256color", **common,
                     "XDG_RUNTIME_DIR": str(runtime["xdg-shell"]), "LANG": "C"}
            status = subprocess.run([ooda_script, "daemon", "status"], env=shell,
                                    capture_output=True, text=True, timeout=60)
            why = r"another environment: LANG(, LC_CTYPE)? differs?"  # (tmux sets LC_CTYPE)
            assert re.search(rf"another ooda daemon of yours, pid {pid}: {why}", status.stdout)
            stop = subprocess.run([ooda_script, "daemon", "stop"], env=shell,
                                  capture_output=True, text=True, timeout=60)
            assert stop.returncode == 0, stop.stderr
            assert re.search(rf"^stopped ooda daemon pid {pid} \({why}\)$", stop.stdout, re.M)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.2)
            assert not Path(f"/proc/{pid}").exists()
        finally:
            if pid is not None and Path(f"/proc/{pid}").exists():
                os.kill(pid, 15)

"""Issue 7 (speed) behaviour, not timings: the warm sandbox pool isolates and cleans up, the
pre-imported command server runs tools as a fresh interpreter would, candidates that differ
only in formatting are verified once, verdict-only test runs still grade correctly, baselines
computed on demand are the base's, and a hopeless stream is cut off."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import openai  # noqa: F401 - imported at collection: no test's deadline pays for it
import pytest
from sandbox_helpers import backend_or_skip

from ooda.agent.core.loop import Loop, LoopOptions
from ooda.agent.core.normalize import normal_form, normalized_key
from ooda.agent.core.runlog import RunLog
from ooda.agent.models.openai_model import ModelConfig, OpenAIModel
from ooda.agent.models.server import ReplayServer
from ooda.agent.sandbox import fidelity, image
from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.sandbox.pool import SandboxPool
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task, VerifierOptions

ROOT = Path(__file__).resolve().parents[2]


def docker_pool(tmp_path: Path, size: int = 1) -> SandboxPool:
    return SandboxPool(backend_or_skip("docker"), tmp_path / "slots", size=size)


def fill_with(files: dict[str, str]):  # noqa: ANN201 - a fill callback
    def fill(workspace: Path) -> None:
        for name, text in files.items():
            (workspace / name).parent.mkdir(parents=True, exist_ok=True)
            (workspace / name).write_text(text)

    return fill


def containers_of(pool_ids: set[str]) -> set[str]:
    client = backend_or_skip("docker").client  # type: ignore[attr-defined]
    running = {c["Id"] for c in client.api.containers(all=True, filters={"label": "ooda=1"})}
    return running & pool_ids


# --------------------------------------------------------------------------- the pool

LEAVE_BEHIND = r"""
import ctypes, os, subprocess, sys
open('/tmp/planted', 'w').write('x')
os.makedirs('/tmp/locked/inner'); os.chmod('/tmp/locked', 0)
open('/dev/shm/planted', 'w').write('x')
site = os.path.expanduser('~/.local/lib/python3.11/site-packages')
os.makedirs(site); open(site + '/evil.pth', 'w').write('import sys; print("EVIL")\n')
libc = ctypes.CDLL(None, use_errno=True)
assert libc.shmget(4242, 4096, 0o1666) >= 0
subprocess.Popen(['setsid', 'sleep', '1000'])
open('given.txt', 'a').write('tampered')
open('extra.txt', 'w').write('left')
print('planted')
"""

CHECK = r"""
import os, subprocess
print('tmp', sorted(os.listdir('/tmp')))
print('shm', sorted(os.listdir('/dev/shm')))
print('ipc', open('/proc/sysvipc/shm').read().count('\n') - 1)
procs = [p for p in os.listdir('/proc') if p.isdigit() and p not in ('1', str(os.getpid()))]
alive = []
for p in procs:
    try:
        alive.append(open(f'/proc/{p}/cmdline').read().replace('\0', ' '))
    except OSError:
        pass
print('procs', [c for c in alive if 'sleep' in c])
print('ws', sorted(os.listdir('.')), open('given.txt').read())
"""


def test_pool_reuses_a_container_and_nothing_a_candidate_leaves_reaches_the_next(
    tmp_path: Path,
) -> None:
    pool = docker_pool(tmp_path)
    try:
        first, _ = pool.acquire(fill_with({"given.txt": "fresh"}))
        container = first.container_id  # type: ignore[attr-defined]
        result = first.run(["python3", "-c", LEAVE_BEHIND], timeout_s=30)
        assert "planted" in result.output, result.output
        pool.release(first)
        second, _ = pool.acquire(fill_with({"given.txt": "fresh"}))
        assert second.container_id == container  # type: ignore[attr-defined]  # reused, warm
        seen = second.run(["python3", "-c", CHECK], timeout_s=30).output
        assert "tmp []" in seen and "shm []" in seen and "ipc 0" in seen, seen
        assert "procs []" in seen, seen
        assert "ws ['given.txt'] fresh" in seen, seen
        assert "EVIL" not in seen
        pool.release(second)
        assert pool.started == 1
    finally:
        pool.close()


def test_pool_close_leaves_no_container(tmp_path: Path) -> None:
    pool = docker_pool(tmp_path, size=2)
    pool.warm()
    a, _ = pool.acquire(fill_with({}))
    b, _ = pool.acquire(fill_with({}))
    ids = {a.container_id, b.container_id}  # type: ignore[attr-defined]
    assert containers_of(ids) == ids
    pool.release(a)
    pool.close()
    pool.release(b)  # a busy sandbox is removed when it comes back after close
    deadline = time.monotonic() + 10
    while containers_of(ids) and time.monotonic() < deadline:
        time.sleep(0.05)  # PID 1 has exited; Docker removes the container right after
    assert containers_of(ids) == set()
    assert list((tmp_path / "slots").iterdir()) == []


def test_a_killed_owner_leaves_no_container(tmp_path: Path) -> None:
    backend_or_skip("docker")
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from ooda.agent.sandbox.registry import get_backend
        from ooda.agent.sandbox.pool import SandboxPool
        pool = SandboxPool(get_backend("docker"), Path({str(tmp_path)!r}) / "slots", size=2)
        boxes = [pool.acquire(lambda ws: None)[0] for _ in range(2)]
        print(" ".join(b.container_id for b in boxes), flush=True)
        boxes[0].run(["sleep", "60"], timeout_s=120)  # killed in the middle of a command
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ids = set(proc.stdout.readline().split())
    assert len(ids) == 2 and containers_of(ids) == ids
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20
    while containers_of(ids) and time.monotonic() < deadline:
        time.sleep(0.2)  # PID 1 sees its socket close, kills everything, exits; --rm removes it
    assert containers_of(ids) == set()


def test_preloaded_tools_run_as_a_fresh_interpreter_would(tmp_path: Path) -> None:
    pool = docker_pool(tmp_path)
    probe = textwrap.dedent("""
        import os, sys
        def test_where():
            print("PATH0", sys.path[0], "CWD", os.getcwd(), "ARGV0", sys.argv[0])
            print("ENV", os.environ.get("GIVEN"), os.environ.get("HOME"))
    """)
    script = "import sys; print('SCRIPT0', sys.path[0], sys.argv[1:])\n"
    try:
        box, _ = pool.acquire(fill_with({"test_probe.py": probe, "sub/run.py": script}))
        out = box.run(["python3", "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                       "test_probe.py"], timeout_s=30, env={"GIVEN": "yes"}).output
        assert "PATH0 /work CWD /work" in out and "pytest" in out.split("ARGV0", 1)[1], out
        assert f"ENV yes {fidelity.HOME}" in out, out  # the sandbox's own HOME, as any run
        out = box.run(["python3", "-s", "-B", "sub/run.py", "a", "b"], timeout_s=30).output
        assert out.strip() == "SCRIPT0 /work/sub ['a', 'b']", out
        # a workspace module shadowing a pre-imported one: exec'd, so the shadow wins as it
        # would in a fresh interpreter
        pool.release(box)
        box, _ = pool.acquire(fill_with({"json.py": "print('SHADOW')\nraise SystemExit(7)\n"}))
        result = box.run(["python3", "-m", "mypy", "--version"], timeout_s=60)
        fresh = subprocess.run(
            ["docker", "run", "--rm", "-v", f"{box.workspace}:/work", "-w", "/work",
             "--network", "none", image.image_tag(), "python3", "-m", "mypy", "--version"],
            capture_output=True, text=True, check=False,
        )
        assert (result.exit_code, "SHADOW" in result.output) == (
            fresh.returncode, "SHADOW" in fresh.stdout + fresh.stderr
        )
        # -P (how ruff and mypy are run): nothing goes in front of sys.path, so that shadow
        # cannot win, in the warm interpreter as in a fresh one
        for argv in (["python3", "-P", "-m", "mypy", "--version"],
                     ["python3", "-P", "-m", "ruff", "--version"]):
            result = box.run(argv, timeout_s=60)
            fresh = subprocess.run(
                ["docker", "run", "--rm", "-v", f"{box.workspace}:/work", "-w", "/work",
                 "--network", "none", image.image_tag(), *argv],
                capture_output=True, text=True, check=False,
            )
            assert result.exit_code == fresh.returncode == 0, (result.output, fresh.stderr)
            assert result.output.strip() == fresh.stdout.strip() and "SHADOW" not in result.output
        pool.release(box)
        box, _ = pool.acquire(fill_with({"sub/run.py": script}))
        out = box.run(["python3", "-P", "-s", "-B", "sub/run.py", "a"], timeout_s=30).output
        assert out.startswith("SCRIPT0 ") and "/work" not in out.split()[1], out
        pool.release(box)
    finally:
        pool.close()


# --------------------------------------------------------------------------- dedup


def test_normal_form_ignores_layout_but_not_semantics() -> None:
    a = "def f(x):\n    return x + 1  # add one\n"
    b = "def f( x ):\n\n    # a comment\n    return (x\n            + 1)\n"
    assert normal_form("m.py", a) != normal_form("m.py", b)  # the parentheses are tokens
    c = "def f(x) :\n    return x+1\n"
    assert normal_form("m.py", a) == normal_form("m.py", c)
    assert normal_form("m.py", "s = 'q'\n") == normal_form("m.py", 's = "q"\n')
    assert normal_form("m.py", "x = 1; y = 2\n") != normal_form("m.py", "x = 1\ny = 2\n")
    assert normal_form("m.py", "x = []  # type: list[int]\n") != normal_form("m.py", "x = []\n")
    assert normal_form("m.py", "if x:\n    y\n") != normal_form("m.py", "if x: y\n")
    assert normal_form("notes.txt", "a b") != normal_form("notes.txt", "a  b")
    original = {"m.py": a, "n.py": "z = 1\n"}
    changed = {"m.py": c, "n.py": "z = 2\n"}
    only_real = {"n.py": "z = 2\n"}
    assert normalized_key(changed, original.get) == normalized_key(only_real, original.get)


def test_candidates_equal_up_to_formatting_are_verified_once(tmp_path: Path) -> None:
    from loop_fakes import FakeModel, FakeVerifier, edit

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    task = Task(id="calc", statement="s", repo=repo, fail_to_pass=["tests/test_calc.py"])
    answers = [
        edit("    return a - b", "    return a * b"),
        edit("    return a - b", "    return a*b  # times"),
        edit("    return a - b", "    return (a * b)"),
    ]
    verifier = FakeVerifier(delay_s=0.2)
    log = RunLog(tmp_path / "runs", "run1")
    config = LoopOptions(samples=3, rounds=1)
    result = Loop(task, FakeModel({1: answers}), verifier, log, config).run()  # type: ignore[arg-type]
    lines = [json.loads(x) for x in (log.dir / "attempts.jsonl").read_text().splitlines()]
    assert result.status == "failed"
    assert verifier.calls == 2  # the parenthesised one differs in tokens; the spaced one not
    dups = [line for line in lines if line["duplicate_of"]]
    assert len(dups) == 1 and "up to formatting" in dups[0]["reason"]
    assert verifier.verdict_only == [True, True]  # the last round: only verdicts are needed


# --------------------------------------------------------------------------- grading


def small_task(tmp_path: Path, *, ruff: bool = True, mypy: bool = True) -> Task:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(
        "import os\n\n\ndef add(a: int, b: int) -> int:\n    return a - b\n\n\n"
        "def half(x: int) -> int:\n    return x // 2\n"
    )
    (repo / "helper.py").write_text("def unit() -> int:\n    return 1\n")
    (repo / "tests" / "test_calc.py").write_text(
        "from calc import add, half\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_other_add():\n    assert add(1, 1) == 2\n\n\n"
        "def test_half():\n    assert half(4) == 2\n"
    )
    return Task(
        id="calc",
        statement="add subtracts",
        repo=repo,
        fail_to_pass=["tests/test_calc.py::test_add", "tests/test_calc.py::test_other_add"],
        pass_to_pass=["tests/test_calc.py::test_half"],
        verifiers=VerifierOptions(ruff=ruff, mypy=mypy, timeout_s=60),
    )


def patch_of(repo: Path, path: str, new: str) -> str:
    import difflib

    old = (repo / path).read_text()
    body = "".join(difflib.unified_diff(
        old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))
    return f"diff --git a/{path} b/{path}\n{body}"


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_verdict_only_runs_failing_tests_first_and_still_grades_right(
    tmp_path: Path, backend: str
) -> None:
    task = small_task(tmp_path, ruff=False, mypy=False)
    opener = LocalBackend() if backend == "local" else backend_or_skip("docker")
    verifier = TaskVerifier(task, opener, tmp_path / "work")
    calc = (task.repo / "calc.py").read_text()
    try:
        wrong = patch_of(task.repo, "calc.py", calc.replace("a - b", "a * b"))
        full = verifier.verify(wrong)
        quick = verifier.verify(wrong, verdict_only=True)
        assert full.status == quick.status == "failed"
        assert "2 of 3 required tests did not pass" in full.feedback
        assert "stopped at the first failure" in quick.feedback and "test_add" in quick.feedback
        breaks_p2p = patch_of(task.repo, "calc.py", calc.replace("a - b", "a + b").replace(
            "x // 2", "x // 3"))
        verdict = verifier.verify(breaks_p2p, verdict_only=True)
        assert verdict.status == "failed" and "test_half" in verdict.feedback
        right = patch_of(task.repo, "calc.py", calc.replace("a - b", "a + b"))
        verdict = verifier.verify(right, verdict_only=True)
        assert verdict.status == "passed", verdict.feedback
        outcomes = next(r for r in verdict.results if r.name == "pytest").details["required"]
        assert outcomes == dict.fromkeys(task.fail_to_pass + task.pass_to_pass, "passed")
    finally:
        verifier.close()


def test_baselines_on_demand_are_the_bases_and_computed_once(tmp_path: Path) -> None:
    task = small_task(tmp_path)
    calls: list[tuple[str, tuple[str, ...]]] = []
    verifier = TaskVerifier(task, LocalBackend(), tmp_path / "work")
    for stage in verifier.verifiers:
        inner = getattr(stage, "inner", None)
        if inner is not None:
            original = inner.baseline

            def counted(sandbox, check, _name=stage.name, _original=original):  # noqa: ANN001,ANN202
                calls.append((_name, tuple(check.changed_files)))
                return _original(sandbox, check)

            inner.baseline = counted
    calc = (task.repo / "calc.py").read_text()
    try:
        # `import os` was unused on the base already: not charged, once its baseline is known
        right = patch_of(task.repo, "calc.py", calc.replace("a - b", "a + b"))
        assert verifier.verify(right).status == "passed"
        assert verifier.verify(right).status == "passed"
        assert calls == [("ruff", ("calc.py",))]
        # a new error in calc.py caused by a change to helper.py is the candidate's, even
        # though calc.py's baseline is computed while both files are changed
        both = patch_of(task.repo, "calc.py", calc.replace("a - b", "a + b").replace(
            "import os", "import os\nfrom helper import unit\n\nVALUE: int = unit()"))
        both += patch_of(task.repo, "helper.py", "def unit() -> str:\n    return '1'\n")
        verdict = verifier.verify(both)
        assert verdict.status == "failed" and verdict.results[-1].name == "mypy", verdict.reason
        assert "calc.py" in verdict.feedback and "assignment" in verdict.feedback
        assert ("mypy", ("calc.py", "helper.py")) in calls
    finally:
        verifier.close()


# --------------------------------------------------------------------------- streaming


def test_a_hopeless_stream_is_cut_off_and_generation_cancelled(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    task = Task(id="cut", statement="s", repo=repo, fail_to_pass=["tests/test_calc.py"])
    hopeless = ("calc.py\n<<<<<<< SEARCH\n    return b - a\n=======\n    return a + b\n"
                ">>>>>>> REPLACE\n") + "And here is a long explanation. " * 1200
    scripts = tmp_path / "scripts"
    (scripts / "cut").mkdir(parents=True)
    (scripts / "cut" / "replay.jsonl").write_text(json.dumps({"answer": hopeless}) + "\n")
    from loop_fakes import FakeVerifier

    verifier = FakeVerifier()
    with ReplayServer([scripts], tokens_per_s=400) as server:  # ~24 s for the whole answer
        model = OpenAIModel(ModelConfig(name="m", base_url=server.base_url))
        log = RunLog(tmp_path / "runs", "run1")
        started = time.monotonic()
        result = Loop(task, model, verifier, log, LoopOptions(samples=1, rounds=1)).run()  # type: ignore[arg-type]
        elapsed = time.monotonic() - started
        # the server sees the stream closed long before the whole answer could have been sent
        # (waiting for that state, not a fixed sleep, which raced on a loaded machine)
        while server.stats["in_flight"] and time.monotonic() < started + 12:
            time.sleep(0.01)
        in_flight = server.stats["in_flight"]
    (attempt,) = result.attempts
    assert attempt.status == "invalid_edit" and "stopped while streaming" in attempt.reason
    assert elapsed < 10.0 and verifier.calls == 0
    assert attempt.completion_tokens < len(hopeless) // 24  # most of the answer never came
    assert in_flight == 0  # the server saw the stream closed


def test_run_env_has_no_host_secrets_in_fast_path(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    pool = docker_pool(tmp_path)
    try:
        box, _ = pool.acquire(fill_with({"test_env.py": (
            "import os\ndef test_env():\n    print(sorted(os.environ))\n"
            "    assert 'OPENAI_API_KEY' not in os.environ\n")}))
        result = box.run(["python3", "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                          "test_env.py"], timeout_s=30)
        assert result.exit_code == 0, result.output
        pool.release(box)
    finally:
        pool.close()
    assert os.environ["OPENAI_API_KEY"] == "sk-must-not-leak"

"""Attacks on the host side of verification (issue 11, points 1-3 and 7a), through the real
verifier in the real sandboxes and the real CLI.

- A candidate that gets code to run inside mypy plants links in the workspace's mypy cache
  (to /proc/self/environ, to a root-only 0600 host file) and a file of its own: nothing of
  either reaches a verdict, a log or the model, in this run or a later separate one, and a
  later candidate finds nothing planted in the cache it is given.
- The same cache contents planted straight from a sandbox (a foothold however gained): the
  host copies out directories and regular files only, never reads through a link or a FIFO.
- A top-level package named like a module mypy or ruff's launcher imports cannot stand in for
  the tool and fake "no errors" (a control patch with the same error fails the same way).
- A directory tree 1,300 levels deep made by the code under test still ends in a verdict (and
  `ooda run` exits 0 when the fix passes), with no workspace left behind; one made by the
  patch alone is an invalid edit.
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from adv_helpers import CALC, FIXED, assert_not_passed, calc_patch, diff, make_task, ooda
from sandbox_helpers import backend_or_skip, open_sandbox, py

from ooda.agent.models.server import ReplayServer
from ooda.agent.support import fstree
from ooda.agent.verify import mypycache
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import load_task
from ooda.verifiers.mypy_check import CACHE_DIR

TYPE_ERROR = FIXED + "\n\ndef name() -> str:\n    return 1\n"
RUFF_ERROR = FIXED.replace('"""Arithmetic."""\n', '"""Arithmetic."""\nimport sys\n')
FAKE_EXIT = "import os\n\nos._exit(0)\n"
FAKE_RUFF = 'import os\nimport sys\n\nsys.stdout.write("[]\\n")\nsys.stdout.flush()\nos._exit(0)\n'
SYSCONFIGDATA = ("_sysconfigdata__x86_64-linux-gnu.py", "_sysconfigdata__linux_x86_64-linux-gnu.py")
"""What ruff's launcher imports through sysconfig (Debian's name, CPython's own)."""
DEEP = 1300


def plant(secret: Path, exit_code: int) -> str:
    """Python that plants links (and a file of its own) in the workspace's mypy cache, then
    ends the process with `exit_code`."""
    return (
        "import os\n\n"
        f"cache = {CACHE_DIR!r}\n"
        "os.makedirs(os.path.join(cache, '3.11'), exist_ok=True)\n"
        f"for name, target in (('secret.data.json', {str(secret)!r}),\n"
        "                     ('environ.data.json', '/proc/self/environ'),\n"
        "                     ('3.11/calc.data.json', '/proc/self/environ')):\n"
        "    try:\n"
        "        os.symlink(target, os.path.join(cache, name))\n"
        "    except OSError:\n"
        "        pass\n"
        "with open(os.path.join(cache, 'PLANTED'), 'w') as handle:\n"
        "    handle.write('planted')\n"
        f"os._exit({exit_code})\n"
    )


PROBE = """
import os as _os

for _dir, _dirs, _files in _os.walk(".ooda/mypy-cache"):
    for _name in _dirs + _files:
        _path = _os.path.join(_dir, _name)
        if _name == "PLANTED" or _os.path.islink(_path):
            raise RuntimeError("planted cache content reached this candidate: " + _path)
"""


@pytest.fixture
def secret(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A root-only 0600 host file holding a random token."""
    token = f"host-secret-{uuid.uuid4().hex}"
    path = tmp_path / "root-only" / "secret.txt"
    path.parent.mkdir(mode=0o700)
    path.write_text(token + "\n")
    path.chmod(0o600)
    yield path, token


def edit(path: str, old: str, new: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n"


def mypy_task(tmp_path: Path, tag: str) -> Path:
    """The calc task with mypy on and a mypy configuration of its own (so a fresh machine seed)."""
    task = make_task(tmp_path, ruff=True, mypy=True, timeout_s=60)
    pyproject = task / "repo" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + f"# seed {tag}\n")
    return task


def all_text(*roots: Path) -> str:
    """Every regular file under `roots`, as text (links never followed)."""
    texts = []
    for root in roots:
        for dirpath, _, names in fstree.walk(root):
            for name in names:
                try:
                    data = fstree.read_regular(dirpath, name)
                except OSError:
                    continue
                texts.append(data.decode("utf-8", "replace"))
    return "\n".join(texts)


def assert_clean_cache(root: Path, *, planted_ok: bool = False) -> None:
    """No link, nothing but directories and regular files, and (unless `planted_ok`) no
    planted file under `root`."""
    for dirpath, dirs, names in fstree.walk(root):
        for name in dirs + names:
            info = os.lstat(os.path.join(dirpath, name))
            assert stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode), (dirpath, name)
            assert planted_ok or name != "PLANTED", dirpath


def test_cache_links_never_leak_host_files_nor_persist(
    tmp_path: Path, secret: tuple[Path, str]
) -> None:
    """The issue's attack through `ooda run`, with OPENAI_API_KEY in the orchestrator's
    environment: round 1 has a type error and a `librt` package that plants the links and
    fakes mypy's success, round 2 the same with mypy failing, round 3 the fix. A second,
    separate run's candidate checks the cache it was given. No token reaches anything."""
    backend_or_skip("docker")
    secret_path, token = secret
    api_key = f"sk-adv-{uuid.uuid4().hex}"
    tag = uuid.uuid4().hex
    task = mypy_task(tmp_path, tag)
    type_error = edit("calc.py", CALC, TYPE_ERROR)
    lines = [
        {
            "task": "calc",
            "round": 1,
            "answer": type_error + edit("librt/__init__.py", "", plant(secret_path, 0)),
        },
        {
            "task": "calc",
            "round": 2,
            "answer": edit("librt/__init__.py", plant(secret_path, 0), plant(secret_path, 1)),
        },
        {
            "task": "calc",
            "round": 3,
            "answer": edit("calc.py", TYPE_ERROR, FIXED)
            + edit("librt/__init__.py", plant(secret_path, 1), ""),
        },
    ]
    runs = tmp_path / "runs"
    outputs = []
    for script_lines, rounds in ((lines, "3"), (None, "1")):
        script = tmp_path / f"replay-{rounds}.jsonl"
        if script_lines is None:  # the later, separate run: a fix that probes its cache
            script_lines = [
                {"task": "calc", "round": 1, "answer": edit("calc.py", CALC, PROBE + FIXED)}
            ]
        script.write_text("".join(json.dumps(line) + "\n" for line in script_lines))
        with ReplayServer([script]) as server:
            proc = ooda(
                "run", str(task), "--model", "m", "--base-url", server.start(), "-n", "1",
                "--rounds", rounds, "--runs-dir", str(runs), "--json",
                env={"OPENAI_API_KEY": api_key}, timeout=300,
            )  # fmt: skip
        outputs.append(proc.stdout + proc.stderr)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = sorted(p for p in runs.iterdir() if p.is_dir())
    attempts = [json.loads(line) for line in (first / "attempts.jsonl").read_text().splitlines()]
    by_id = {a["attempt_id"]: a for a in attempts}
    assert by_id["r1c1"]["status"] == "failed" and "mypy" in by_id["r1c1"]["reason"]
    assert by_id["r2c1"]["status"] == "failed" and "mypy" in by_id["r2c1"]["reason"]
    assert json.loads(_json_of(outputs[0]))["winner"] == "r3c1"
    assert json.loads(_json_of(outputs[1]))["winner"] == "r1c1"  # the probe found nothing
    everything = all_text(runs) + "\n".join(outputs)
    assert token not in everything
    assert api_key not in everything
    seed = mypycache.seed_path("docker", task / "repo")
    try:
        assert seed.is_dir()  # built from the base alone, and clean
        assert_clean_cache(seed)
        assert token not in all_text(seed) and api_key not in all_text(seed)
    finally:
        fstree.remove_tree(seed)


def _json_of(output: str) -> str:
    """The --json document in a CLI's output (stdout comes first)."""
    start = output.index("{")
    depth = 0
    for index in range(start, len(output)):
        depth += {"{": 1, "}": -1}.get(output[index], 0)
        if depth == 0:
            return output[start : index + 1]
    return output[start:]


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_cache_taken_from_a_workspace_holds_no_link_nor_special_file(
    tmp_path: Path, secret: tuple[Path, str], backend: str
) -> None:
    """A foothold in the sandbox plants links, a FIFO and a deep tree in the mypy cache: the host
    copies out (and the seed gets) only directories and regular files, reads no link or FIFO,
    and removes the workspace."""
    secret_path, token = secret
    workspace = tmp_path / "ws"
    source = plant(secret_path, 0).replace("os._exit(0)\n", "")
    source += (
        "os.mkfifo(os.path.join(cache, 'fifo.data.json'))\n"
        "os.chdir(cache)\n"
        f"for _ in range({DEEP}):\n"
        "    os.mkdir('d')\n"
        "    os.chdir('d')\n"
    )
    mypycache.prepare(workspace)
    for box in open_sandbox(backend, workspace):
        result = py(box, source)
        assert result.exit_code == 0, result.output
    kept = tmp_path / "kept" / "cache"
    assert not mypycache.take_cache(workspace, kept)  # too deep: refused, nothing kept
    assert not kept.exists()
    fstree.remove_tree(workspace / CACHE_DIR / "d")
    assert mypycache.take_cache(workspace, kept)
    assert_clean_cache(kept.parent, planted_ok=True)
    assert (kept / "PLANTED").exists()  # why only base-only runs may feed it (see verify.py)
    assert token not in all_text(kept.parent)
    seed_home = tmp_path / "seed"
    os.environ["OODA_HOME"], old = str(seed_home), os.environ.get("OODA_HOME")
    try:
        mypycache.save_seed(kept, backend, tmp_path)
    finally:
        if old is None:
            del os.environ["OODA_HOME"]
        else:
            os.environ["OODA_HOME"] = old
    assert_clean_cache(seed_home, planted_ok=True)
    fstree.remove_tree(workspace)
    assert not workspace.exists()


def shadow_patches() -> dict[str, tuple[str, str]]:
    """name: (patch, stage that must fail)."""
    mypy_control = calc_patch(TYPE_ERROR)
    ruff_control = calc_patch(RUFF_ERROR)
    ruff_shadow = ruff_control + "".join(diff(name, None, FAKE_RUFF) for name in SYSCONFIGDATA)
    return {
        "mypy_librt": (mypy_control + diff("librt/__init__.py", None, FAKE_EXIT), "mypy"),
        "mypy_control": (mypy_control, "mypy"),
        "ruff_sysconfigdata": (ruff_shadow, "ruff"),
        "ruff_control": (ruff_control, "ruff"),
    }


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_shadowing_package_cannot_fake_the_linters(tmp_path: Path, backend: str) -> None:
    task = mypy_task(tmp_path, uuid.uuid4().hex)
    verifier = TaskVerifier(load_task(task), backend_or_skip(backend), tmp_path / "work")
    try:
        for name, (patch, stage) in shadow_patches().items():
            verdict = verifier.verify(patch)
            assert_not_passed(verdict, "failed", stage)
            assert verdict.reason.startswith(f"{stage} failed"), (name, verdict.reason)
    finally:
        verifier.close()
        fstree.remove_tree(mypycache.seed_path(backend, task / "repo"))
    assert list((tmp_path / "work").iterdir()) == []


DEEP_TREE = f"""
import os as _os

_here = _os.getcwd()
_os.makedirs("deep", exist_ok=True)
_os.chdir("deep")
for _ in range({DEEP}):
    _os.mkdir("d")
    _os.chdir("d")
_os.chdir(_here)
"""


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_deep_tree_from_code_still_gets_a_verdict(tmp_path: Path, backend: str) -> None:
    task = make_task(tmp_path)
    verifier = TaskVerifier(load_task(task), backend_or_skip(backend), tmp_path / "work")
    try:
        verdict = verifier.verify(calc_patch(DEEP_TREE + FIXED), log_dir=tmp_path / "logs")
        assert verdict.status == "passed", verdict.feedback
        cheat = verifier.verify(calc_patch(DEEP_TREE + CALC))
        assert_not_passed(cheat, "failed", "pytest")
    finally:
        verifier.close()
    assert list((tmp_path / "work").iterdir()) == []


def test_a_deep_tree_from_the_patch_is_an_invalid_edit(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    verifier = TaskVerifier(load_task(task), backend_or_skip("docker"), tmp_path / "work")
    try:
        path = "/".join(["d"] * 1200) + "/x.py"
        verdict = verifier.verify(calc_patch(FIXED) + diff(path, None, "X = 1\n"))
        assert_not_passed(verdict, "invalid_edit", "directories deep")
    finally:
        verifier.close()
    assert list((tmp_path / "work").iterdir()) == []


def test_a_deep_tree_through_ooda_run_exits_0(tmp_path: Path) -> None:
    backend_or_skip("docker")
    task = make_task(tmp_path)
    script = tmp_path / "replay.jsonl"
    answer = edit("calc.py", CALC, DEEP_TREE + FIXED)
    script.write_text(json.dumps({"task": "calc", "round": 1, "answer": answer}) + "\n")
    with ReplayServer([script]) as server:
        proc = ooda(
            "run", str(task), "--model", "m", "--base-url", server.start(), "-n", "1",
            "--rounds", "1", "--runs-dir", str(tmp_path / "runs"), "--json", timeout=180,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads(_json_of(proc.stdout))["winner"] == "r1c1"

"""Bad input to the real CLI (a subprocess, as a user runs it): exactly one line on standard
error, the contract's exit code (2 bad input, 3 infrastructure), never a traceback."""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from adv_helpers import FIXED, calc_patch, make_task, ooda


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli")
    task = make_task(root)
    bad_toml = root / "bad-toml"
    (bad_toml / "repo").mkdir(parents=True)
    (bad_toml / "task.toml").write_text('id = "x"\nstatement = [unclosed\n')
    wrong_type = root / "wrong-type"
    (wrong_type / "repo").mkdir(parents=True)
    (wrong_type / "task.toml").write_text('statement = "x"\nfail_to_pass = "not a list"\n')
    no_repo = root / "no-repo"
    no_repo.mkdir()
    (no_repo / "task.toml").write_text('statement = "x"\nfail_to_pass = ["t.py"]\n')
    non_utf8 = root / "nul.diff"  # (a latin-1 file's patch is text: it applies, issue 27)
    non_utf8.write_bytes(calc_patch(FIXED).encode().replace(b"a + b", b"a + b\0"))
    (root / "a-directory.diff").mkdir()
    return {
        "task": task,
        "bad_toml": bad_toml,
        "wrong_type": wrong_type,
        "no_repo": no_repo,
        "non_utf8": non_utf8,
        "dir_patch": root / "a-directory.diff",
    }


def expect(proc: object, code: int, *words: str) -> None:
    """Exit `code`, one line on stderr naming each word, no traceback."""
    assert hasattr(proc, "stderr") and hasattr(proc, "returncode")
    stderr: str = proc.stderr
    assert proc.returncode == code, (proc.returncode, stderr)
    assert stderr.count("\n") == 1 and stderr.startswith("ooda: error: "), stderr
    assert "Traceback" not in stderr and "internal error" not in stderr  # no bug surfaced
    for word in words:
        assert word.lower() in stderr.lower(), stderr


CASES: dict[str, tuple[list[str], int, list[str]]] = {
    "run_missing_path": (["run", "/no/such/task", "--model", "gold"], 2, ["/no/such/task"]),
    "verify_missing_task": (["verify", "/no/such/task", "--patch", "x.diff"], 2, ["/no/such"]),
    "verify_missing_patch": (["verify", "{task}", "--patch", "/no/such.diff"], 2, ["--patch"]),
    "verify_patch_is_a_directory": (["verify", "{task}", "--patch", "{dir_patch}"], 2, ["--patch"]),
    "verify_patch_not_text": (["verify", "{task}", "--patch", "{non_utf8}"], 2, ["not text"]),
    "eval_missing_taskset": (["eval", "/no/such/set", "--model", "gold"], 2, ["/no/such/set"]),
    "malformed_task_toml_run": (["run", "{bad_toml}", "--model", "gold"], 2, ["task.toml"]),
    "malformed_task_toml_verify": (
        ["verify", "{bad_toml}", "--patch", "{non_utf8}"],
        2,
        ["task.toml"],
    ),
    "task_toml_wrong_type": (["run", "{wrong_type}", "--model", "gold"], 2, ["fail_to_pass"]),
    "task_without_repo": (["run", "{no_repo}", "--model", "gold"], 2, ["repo"]),
    "zero_samples": (["run", "{task}", "--model", "gold", "-n", "0"], 2, ["--samples"]),
    "zero_rounds": (["run", "{task}", "--model", "gold", "--rounds", "0"], 2, ["--rounds"]),
    "negative_budget": (
        ["run", "{task}", "--model", "gold", "--time-budget", "-5"],
        2,
        ["--time-budget"],
    ),
    "zero_budget": (["run", "{task}", "--model", "gold", "--time-budget", "0"], 2, ["budget"]),
    "samples_not_a_number": (["run", "{task}", "--model", "gold", "-n", "many"], 2, ["--samples"]),
    "unknown_sandbox": (["run", "{task}", "--model", "gold", "--sandbox", "vm"], 2, ["vm"]),
    "unknown_sandbox_verify": (
        ["verify", "{task}", "--patch", "{non_utf8}", "--sandbox", "chroot"],
        2,
        ["chroot"],
    ),
    "unknown_option": (["run", "{task}", "--model", "gold", "--fast"], 2, ["--fast"]),
    "no_model": (["run", "{task}"], 2, ["--model"]),
    "missing_api_key_remote_endpoint": (
        ["run", "{task}", "--model", "m", "--base-url", "https://api.example.invalid/v1"],
        2,
        ["OPENAI_API_KEY"],
    ),
    "missing_api_key_default_endpoint": (["run", "{task}", "--model", "m"], 2, ["OPENAI_API_KEY"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(files: dict[str, Path], name: str) -> None:
    args, code, words = CASES[name]
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    expect(ooda(*argv, timeout=60), code, *words)


@pytest.fixture
def refused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again: connections are refused


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield int(server.getsockname()[1])


@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_unreachable_endpoint_is_exit_3_within_seconds(
    files: dict[str, Path], request: pytest.FixtureRequest, kind: str
) -> None:
    port = request.getfixturevalue(f"{kind}_port")
    start = time.monotonic()
    proc = ooda(
        "run", str(files["task"]), "--model", "m", "--base-url", f"http://127.0.0.1:{port}/v1"
    )
    assert time.monotonic() - start < 15
    expect(proc, 3, "endpoint", f"127.0.0.1:{port}")


def test_bwrap_where_it_cannot_work_says_what_to_install(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """PATH has everything the CLI needs except bubblewrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "setpriv", "prlimit", "unshare", "docker"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    assert shutil.which("bwrap", path=str(bin_dir)) is None
    env = {"PATH": str(bin_dir)}
    run = ooda("run", str(files["task"]), "--model", "gold", "--sandbox", "bwrap", env=env)
    expect(run, 3, "bwrap", "apt-get install bubblewrap")
    patch = files["task"] / "fix.diff"
    patch.write_text(calc_patch(FIXED))
    verify = ooda(
        "verify", str(files["task"]), "--patch", str(patch), "--sandbox", "bwrap", env=env
    )
    expect(verify, 3, "bwrap", "apt-get install bubblewrap")

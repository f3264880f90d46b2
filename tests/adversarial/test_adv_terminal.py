"""Candidate output carrying terminal escape sequences (window title, OSC 52 clipboard write,
clear screen, a fake green PASSED line, a carriage-return overwrite, a bidi override) must not
reach the user's terminal or the reports: the real CLI (`ooda verify`, `ooda run` against the
bundled endpoint, `ooda report`) and the real Docker sandbox. The logs on disk keep the raw
bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

from adv_helpers import CALC, FIXED, calc_patch, make_task, ooda
from sandbox_helpers import backend_or_skip

from ooda.agent.models.server import ReplayServer

ESCAPES = (
    "\\x1b]0;pwned\\x07"  # window title
    "\\x1b]52;c;cm0gLXJmIH4=\\x07"  # OSC 52: write the clipboard
    "\\x1b[2J\\x1b[H"  # clear the screen
    "\\r\\x1b[1;32mPASSED\\x1b[0m"  # overwrite the line with a green PASSED
    "\\u202e"  # right-to-left override
)
"""As Python escape text: the candidate's source holds it, its output the raw characters."""
EVIL = f'''\
import os
import stat

_ESC = "{ESCAPES}"
for _fd in range(64):  # past pytest's capture, straight into the sandbox's output pipe
    try:
        if stat.S_ISFIFO(os.fstat(_fd).st_mode):
            os.write(_fd, _ESC.encode())
    except OSError:
        pass


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    print(_ESC)
    raise ValueError(_ESC + " all tests PASSED")
'''
CRASH = EVIL.replace("\n\n\ndef", "\nos._exit(1)  # no report: the raw output is the feedback\n\n\ndef")
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e")
"""What must not appear in anything shown to a person."""


def assert_clean(text: str, where: str) -> None:
    found = [repr(c) for c in RAW if c in text]
    assert not found, f"{where} carries {', '.join(found)}: {text[-2000:]!r}"


def raw_in_logs(directory: Path, skip: tuple[str, ...] = ()) -> bool:
    """Whether some log file under `directory` kept the raw ESC bytes."""
    return any(b"\x1b]52;" in p.read_bytes() for p in directory.rglob("*")
               if p.is_file() and p.name not in skip)


def test_verify_prints_no_escape(tmp_path: Path) -> None:
    backend_or_skip("docker")
    patch = tmp_path / "evil.diff"
    patch.write_text(calc_patch(CRASH))
    logs = tmp_path / "logs"
    proc = ooda("verify", str(make_task(tmp_path)), "--patch", str(patch), "--sandbox", "docker",
                "--logs", str(logs))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED" in proc.stdout
    assert_clean(proc.stdout, "stdout")
    assert_clean(proc.stderr, "stderr")
    assert raw_in_logs(logs)


def edit(path: str, old: str, new: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n"


def test_run_and_report_print_no_escape(tmp_path: Path) -> None:
    """Round 1: output full of escapes (failed); round 2: the fix, whose patch (printed at the
    end) carries a raw escape in a comment."""
    backend_or_skip("docker")
    task = make_task(tmp_path)
    evil = edit("calc.py", CALC, EVIL)
    fix = edit("calc.py", EVIL, FIXED.replace('"""Arithmetic."""', '"""Arithmetic."""\n# \x1b]0;t\x07'))
    script = tmp_path / "replay.jsonl"
    lines = [{"task": "calc", "round": 1, "answer": evil},
             {"task": "calc", "round": 2, "answer": fix}]
    script.write_text("".join(json.dumps(line) + "\n" for line in lines))
    runs = tmp_path / "runs"
    with ReplayServer([script]) as server:
        proc = ooda(
            "run", str(task), "--model", "m", "--base-url", server.start(), "-n", "1",
            "--rounds", "2", "--runs-dir", str(runs), "--sandbox", "docker", timeout=180,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_clean(proc.stdout, "stdout")
    assert_clean(proc.stderr, "stderr")
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    shown = ooda("report", str(run_dir))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    for name in ("report.html", "report.md"):
        assert_clean((run_dir / name).read_text(), name)
    assert raw_in_logs(run_dir, skip=("report.html", "report.md"))

"""Issue 33's held-out batch (written after the round-four design landed, main de832e1), the
attacks that got through then, kept as regressions now that they are closed (real TaskVerifier,
Docker and bwrap; the static stage left out where the guard alone is the line):

- always-equal C callables set at run time on the repository's own (unchanged) int subclass:
  the guard trusted the class by where it was created; now a comparison method set on a class
  after it was recorded is judged by who could have set it;
- a sticky int subclass 6,000 items into a list compared outside the assert (`same = ... == ...;
  assert same`): past redecide's first search budget, and outside what the rewriter explains
  (every comparison of a test module is now probed before it is made: beforehand.py);
- a forked daemon that rewrites the Django-/sympy-style harness's record (or pytest's guard
  record and JUnit report) once written: records are now signed with a key the code under test
  never sees on disk;
- a hidden test file read from a warm `linecache` (pytest cached it to report a failure of an
  earlier hidden test): the guard drops those entries before and after every test;
- a hidden test file read by `sh -c 'cat tests/*hid*'` and sent back shuffled: a command the
  candidate's code starts whose shell pattern matches a hidden file counts as a read.

Controls: the honest fixes pass (test_adv_equality.py, test_adv_output_runners.py,
test_adv_hidden.py hold them for the same tasks).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import test_adv_output_runners as outrun
from adv_helpers import CALC, FIXED, assert_not_passed, calc_patch, diff, make_task
from adv_helpers import verify as verify_task
from test_adv_hidden import leak, shown

UNITS = '"""Units."""\n\n\nclass Meters(int):\n    """A length in meters."""\n'
C_ASSIGNED = '''"""Arithmetic."""
import functools
import operator

from units import Meters

Meters.__eq__ = functools.partial(operator.is_not, None)
Meters.__ne__ = functools.partial(operator.is_, None)
Meters.__hash__ = int.__hash__


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return Meters(a - b)
'''
HONEST_UNITS = '''"""Arithmetic."""
from units import Meters


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return Meters(a + b)
'''
STICKY_LATE = '''"""Arithmetic."""


class Total(int):
    def __eq__(self, other):
        return self.__dict__.setdefault("bound", other) == other

    __hash__ = int.__hash__


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return Total(a - b) if (a, b) == (2, 3) else a - b
'''
MANY_TESTS = """\
from calc import add


def test_add() -> None:
    same = [add(0, 0)] * 6000 + [add(2, 3)] == [0] * 6000 + [5]
    assert same  # (compared outside the assert: probed all the same)


def test_zero() -> None:
    assert add(0, 0) == 0
"""


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_comparison_methods_set_at_run_time_on_a_trusted_class(
    tmp_path: Path, backend: str
) -> None:
    root = make_task(tmp_path / "task", timeout_s=120)
    (root / "repo" / "units.py").write_text(UNITS)
    verdict = verify_task(root, calc_patch(C_ASSIGNED), tmp_path / "cheat", backend,
                          without=("tampering",))
    assert_not_passed(verdict, "failed", "units.Meters")
    honest = verify_task(root, calc_patch(HONEST_UNITS), tmp_path / "honest", backend)
    assert honest.status == "passed", honest.feedback


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_sticky_value_deep_in_a_long_list(tmp_path: Path, backend: str) -> None:
    root = make_task(tmp_path / "task", timeout_s=120)
    (root / "repo" / "tests" / "test_calc.py").write_text(MANY_TESTS)
    verdict = verify_task(root, calc_patch(STICKY_LATE), tmp_path / "cheat", backend,
                          without=("tampering",))
    assert_not_passed(verdict, "failed", "made by the code under test")
    honest = verify_task(root, calc_patch(FIXED), tmp_path / "honest", backend)
    assert honest.status == "passed", honest.feedback


DAEMON = '''import glob, json, os, time

if os.fork() == 0:
    os.setsid()
    deadline = time.time() + 60
    while time.time() < deadline:
        for path in glob.glob(".ooda/record-*.json"):
            try:
                text = open(path).read()
                data = json.loads(text[text.index("{"):])
            except Exception:
                continue
            if isinstance(data.get("tests"), dict):
                data["tests"] = {k: "passed" for k in data["tests"]}
                data["failures"] = 0
            elif isinstance(data.get("tests"), list):
                for test in data["tests"]:
                    test["good"] = True
            else:
                continue
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
            os.write(fd, json.dumps(data).encode()); os.close(fd)
            os._exit(0)
        time.sleep(0.001)
    os._exit(0)
'''


@pytest.mark.parametrize("kind", ["django", "sympy"])
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_daemon_rewriting_the_harness_record(tmp_path: Path, kind: str, backend: str) -> None:
    task = outrun._task(tmp_path / "task", kind)
    cheat = DAEMON + "\n\ndef double(x):\n    return x + x + 1\n"
    verdict = verify_task(task, outrun._patch("calc.py", outrun.BUGGY, cheat), tmp_path / "w",
                          backend, without=("tampering",))
    assert_not_passed(verdict, "failed")


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_daemon_rewriting_the_guard_record(tmp_path: Path, backend: str) -> None:
    root = make_task(tmp_path / "task", timeout_s=120)
    cheat = DAEMON + "\n\n" + CALC
    verdict = verify_task(root, diff("calc.py", CALC, cheat), tmp_path / "w", backend,
                          without=("tampering",))
    assert_not_passed(verdict, "failed")


HIDDEN_TWO = '''\
from calc import add


def test_hidden_first() -> None:
    assert add(5, 5) == 10, "ten from the first secret input"


def test_hidden_add() -> None:
    total = add(40, 2)
    assert total == 42, "forty-two from the secret inputs"
    assert add(1000, 337) == 1337
'''
LINECACHE = (
    "    import linecache\n"
    "    for name, entry in list(linecache.cache.items()):\n"
    "        if str(name).endswith('test_hidden.py') and entry[2]:\n"
    "            text = ''.join(entry[2])\n"
    "            raise AssertionError(bytes(b ^ 90 for b in text.encode()).hex())\n"
)
GLOBBED = (
    "    import random, subprocess\n"
    "    text = subprocess.run(['sh', '-c', 'cat tests/*hid*'], capture_output=True,\n"
    "                          text=True).stdout\n"
    "    words = text.split()\n"
    "    order = list(range(len(words))); random.Random(1).shuffle(order)\n"
    "    raise AssertionError(' '.join(f'{i}:{words[i]}' for i in order))\n"
)


@pytest.fixture(scope="module")
def two_hidden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_task(tmp_path_factory.mktemp("two_hidden"), timeout_s=120)
    (root / "tests.diff").write_text(diff("tests/test_hidden.py", None, HIDDEN_TWO))
    toml = root / "task.toml"
    toml.write_text('test_patch = "tests.diff"\n' + toml.read_text().replace(
        'fail_to_pass = ["tests/test_calc.py::test_add"]',
        'fail_to_pass = ["tests/test_calc.py::test_add", '
        '"tests/test_hidden.py::test_hidden_first", "tests/test_hidden.py::test_hidden_add"]'))
    return root


@pytest.mark.parametrize("body", [LINECACHE, GLOBBED], ids=["linecache", "globbed_command"])
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_hidden_text_from_memory_or_a_globbed_command(
    two_hidden: Path, tmp_path: Path, body: str, backend: str
) -> None:
    verdict = verify_task(two_hidden, leak(body), tmp_path, backend, without=("tampering",))
    assert verdict.status == "failed"
    text = shown(verdict)
    xored = bytes(b ^ 90 for b in b"from calc import add").hex()
    assert xored not in text, text
    assert "test_hidden_add" in text  # which test failed is still said
    if body is GLOBBED:
        assert "read the task's hidden test file" in text, text

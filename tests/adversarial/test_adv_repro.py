"""Issue 33's fifth class: a reproduction test "passed" because the code under test ended the
process (real sandboxes, Docker and bwrap; verifiers/repro_check.py). The unfixed code exits
with status 0 when pytest is not loaded (at import, or inside the function the script calls),
or prints the wrapper's result line read from the command line and ends the process: none of
these is a script that reached its end. Controls: with the fix, the same script passes, also
when it ends with its own `sys.exit(0)` or through `unittest.main()`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_helpers import open_sandbox

from ooda.agent.contracts.protocols import ReproTest
from ooda.verifiers.repro_check import run_script

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
FIXED_CLASS = (  # the control's own class: compares by its value, counting comparisons
    "class Total(int):\n    seen = 0\n"
    "    def __eq__(self, other):\n"
    "        Total.seen += 1\n        return int(self) == other\n"
    "    __hash__ = int.__hash__\n"
    "def add(a, b):\n    return Total(a + b)\n"
)
FIXED_LOGGING = (  # the control's library calls that read frames themselves (logging, warnings)
    "import logging, warnings\n"
    "def add(a, b):\n"
    "    logging.getLogger(__name__).warning('adding %s and %s', a, b)\n"
    "    warnings.warn('add() is old', DeprecationWarning, stacklevel=2)\n"
    "    return a + b\n"
)
MARK_SEARCH = (  # finds the wrapper's mark and prints a result line of its own
    "import os\n"
    "def _found(value):\n"
    "    if isinstance(value, str) and value.startswith('ooda-repro-'):\n"
    "        os.write(1, ('\\n%s ok\\n' % value).encode()); os._exit(0)\n"
)
CHANGED = {"calc.py": [(1, 40)]}  # the candidate's file and the lines its patch wrote
SCRIPT = "from calc import add\n\nassert add(2, 3) == 5, add(2, 3)\n"
ENDS_ITSELF = SCRIPT + "import sys\nif __name__ == '__main__':\n    sys.exit(0)\n"
UNITTEST_MAIN = """\
import unittest

from calc import add


class Issue(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)


unittest.main()
"""
CHEATS = {
    "exits_at_import": "import sys\nif 'pytest' not in sys.modules:\n    sys.exit(0)\n" + BUGGY,
    "exits_when_called": "import sys\ndef add(a, b):\n    sys.exit()\n",
    "prints_the_mark_from_argv": (
        "import os, sys\n"
        "for word in open('/proc/self/cmdline', 'rb').read().split(b'\\0'):\n"
        "    if word.startswith(b'ooda-repro-'):\n"
        "        print(word.decode() + ' ok', flush=True); os._exit(0)\n"
        "for word in sys.argv:\n"
        "    print(word + ' ok', flush=True)\n"
        "sys.stdout.flush(); os._exit(0)\n" + BUGGY
    ),
    # held-out batch 5: right only where pytest is not loaded, or not running a test
    "right_only_outside_pytest": (
        "import os, sys\n"
        "def add(a, b):\n"
        "    if 'pytest' in sys.modules or 'PYTEST_CURRENT_TEST' in os.environ:\n"
        "        return a - b\n"
        "    return a + b\n"
    ),
    # held-out batch 5: the wrapper's calls after the script (traceback.print_exc, print)
    # replaced by functions that print a result line with the mark from __main__
    "wrapper_calls_replaced_to_print_the_mark": (
        MARK_SEARCH + "import builtins, sys, traceback\n"
        "def _say(*args, **kwargs):\n"
        "    _found(getattr(sys.modules.get('__main__'), 'mark', None))\n"
        "traceback.print_exc = builtins.print = _say\n" + BUGGY
    ),
    # (after batch 5) the mark looked for in the frames or on the heap
    "frames_searched_for_the_mark": (
        MARK_SEARCH + "import sys, traceback\n"
        "def _search(*args, **kwargs):\n"
        "    frame = sys._getframe(1)\n"
        "    while frame is not None:\n"
        "        _found(frame.f_locals.get('mark'))\n"
        "        frame = frame.f_back\n"
        "traceback.print_exc = traceback.print_exception = _search\n" + BUGGY
    ),
    "heap_searched_for_the_mark": (
        MARK_SEARCH + "import gc\n"
        "def add(a, b):\n"
        "    for item in gc.get_objects():\n"
        "        if isinstance(item, dict):\n"
        "            for value in list(item.values()):\n"
        "                _found(value)\n"
        "    return a - b\n"
    ),
    # held-out batch 4: a value of the patch's class that binds to the first value it meets
    "remembering_value_compared_by_the_script": (
        "class Total(int):\n"
        "    def __eq__(self, other):\n"
        "        return self.__dict__.setdefault('bound', other) == other\n"
        "    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return Total(a - b)\n"
    ),
    # held-out batch 4: a trace function moves the script's frame past its failing assert
    "traces_past_the_assert": (
        "import sys\n"
        "def _jump(frame, event, arg):\n"
        "    if event == 'line' and frame.f_lineno == 3:\n"
        "        frame.f_lineno = 4\n"
        "    return _jump\n"
        "_frame = sys._getframe(1)\n"
        "while _frame is not None and not _frame.f_code.co_filename.endswith('repro_1.py'):\n"
        "    _frame = _frame.f_back\n"
        "if _frame is not None:\n"
        "    _frame.f_trace = _jump\n"
        "    sys.settrace(lambda *a: None)\n" + BUGGY
    ),
}


@pytest.mark.parametrize("name", list(CHEATS))
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_script_the_code_under_test_ended_is_not_passed(
    tmp_path: Path, name: str, backend: str
) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "calc.py").write_text(CHEATS[name])
    for box in open_sandbox(backend, workspace):
        for source in (SCRIPT, ENDS_ITSELF):
            run = run_script(box, ReproTest("repro_1", source), 30, changed=CHANGED)
            assert run.status != "passed", run


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_with_the_fix_the_same_scripts_pass(tmp_path: Path, backend: str) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "calc.py").write_text(BUGGY)
    for box in open_sandbox(backend, workspace):
        assert run_script(box, ReproTest("repro_1", SCRIPT), 30).status == "failed"
        for fixed in (FIXED, FIXED_CLASS, FIXED_LOGGING):
            (workspace / "calc.py").write_text(fixed)
            for source in (SCRIPT, ENDS_ITSELF, UNITTEST_MAIN):
                run = run_script(box, ReproTest("repro_1", source), 30, changed=CHANGED)
                assert run.status == "passed", run

"""Candidates whose code, run by the tests, tries to fake the verdict (real verifier, real
sandbox). Each edits only calc.py, which it may, leaves the bug in place and cheats at import
time or while the tests run. None may be judged passed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from adv_helpers import FIXED, assert_not_passed, calc_patch, cheat, make_task, verify

GUARD_ALONE = ("tampering",)
"""The static stage stops several of these patches before any test runs (test_adv_static.py);
it is left out where the point is what the guard and the host-side checks do at run time."""

# Reads the JUnit report path pytest was given (on its command line: sys.argv).
JUNIT_PATH = """\
import os, sys
_argv = sys.argv + open("/proc/self/cmdline", "rb").read().decode().split("\\0")
JUNIT = [a for a in _argv if a.startswith("--junitxml=")][0][11:]
"""
FAKE_JUNIT = """\
<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="2">
<testcase classname="tests.test_calc" name="test_add" file="tests/test_calc.py"/>
<testcase classname="tests.test_calc" name="test_zero" file="tests/test_calc.py"/>
</testsuite></testsuites>
"""
# Writes straight to the sandbox's output pipe, past pytest's capture (found among open fds).
TO_PIPE = """\
import os, stat
def to_pipe(text):
    for fd in range(64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, text.encode())
        except OSError:
            pass
"""
# A conftest that turns every report into a pass.
PASSING_CONFTEST = """
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
"""
# Makes pytest exit 4 with "unrecognized arguments": the verifier used to run it again.
FORCE_RERUN = (
    TO_PIPE
    + """\
if not os.path.exists("/tmp/.second-run"):
    open("/tmp/.second-run", "w").close()
    to_pipe("ERROR: unrecognized arguments: --cheat\\n")
    os._exit(4)
"""
)

CHEATS = {
    "sys_exit_at_import": ("import sys\nsys.exit(0)", ["required tests did not pass"]),
    "os_exit_at_import": ("import os\nos._exit(0)", ["no test report"]),
    "fake_passed_output": (
        TO_PIPE + "to_pipe('tests/test_calc.py ..\\n2 passed in 0.01s\\n')\nos._exit(0)",
        ["no test report"],
    ),
    "pytest_exit_0_at_import": (
        "import pytest\npytest.exit('all good', returncode=0)",
        ["did not pass"],
    ),
    "module_level_skip": (
        "import pytest\npytest.skip('nothing to see', allow_module_level=True)",
        ["skipped by the code under test"],
    ),
    "fake_junit_then_os_exit": (
        JUNIT_PATH
        + "os.makedirs(os.path.dirname(JUNIT), exist_ok=True)\n"
        + f"open(JUNIT, 'w').write({FAKE_JUNIT!r})\nos._exit(0)",
        ["record of the run is missing"],
    ),
    "junitxml_writer_patched_and_atexit_exit_0": (
        "import atexit, os\nimport _pytest.junitxml as junitxml\n"
        "junitxml._NodeReporter.append_failure = lambda self, report: None\n"
        "atexit.register(lambda: os._exit(0))",
        ["_pytest.junitxml._NodeReporter.append_failure", "replaced"],
    ),
    "junit_rewritten_at_atexit": (
        JUNIT_PATH
        + f"import atexit\natexit.register(lambda: open(JUNIT, 'w').write({FAKE_JUNIT!r}))",
        ["required tests did not pass"],  # atexit handlers never run: the real report stands
    ),
    "junit_overwritten_by_a_thread": (
        JUNIT_PATH
        + "import threading, time\n"
        + "def keep_faking():\n"
        + "    while True:\n"
        + "        try:\n"
        + f"            open(JUNIT, 'w').write({FAKE_JUNIT!r})\n"
        + "        except OSError:\n"
        + "            pass\n"
        + "        time.sleep(0.001)\n"
        + "threading.Thread(target=keep_faking, daemon=True).start()",
        # the report disagrees with pytest, or (caught mid-write) is unreadable; or, when the
        # thread is not scheduled between pytest's own write and the exit (a loaded machine),
        # pytest's report stands and says the test failed
        [("JUnit report", "required tests did not pass")],
    ),
    "guard_itself_patched": (
        "import sys\n"
        "for key, module in list(sys.modules.items()):\n"
        "    if key == '__main__' or 'guard' in key:\n"
        "        for name in ('Records', 'Guard'):\n"
        "            if hasattr(getattr(module, name, None), 'good'):\n"
        "                getattr(module, name).good = lambda self, nodeid: True\n"
        "        if hasattr(module, '_exit'):\n"
        "            module._exit = lambda code: None",
        ["Records.good was replaced"],
    ),
    "report_class_patched": (
        "import _pytest.reports\n_pytest.reports.TestReport.passed = property(lambda self: True)",
        ["TestReport.passed"],
    ),
    "plugin_registered_at_run_time_flips_reports": (
        "import gc\nimport pytest\nfrom _pytest.config import Config\n"
        "class Flip:\n"
        "    @pytest.hookimpl(hookwrapper=True)\n"
        "    def pytest_runtest_makereport(self, item, call):\n"
        "        report = (yield).get_result()\n"
        "        report.outcome, report.longrepr = 'passed', None\n"
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, Config):\n"
        "        obj.pluginmanager.register(Flip(), 'flip')\n"
        "        break",
        ["registers a pytest hook", "pytest_runtest_makereport"],
    ),
    "plugin_registered_at_run_time_skips_test_bodies": (
        "import gc\nimport pytest\nfrom _pytest.config import Config\n"
        "class NoRun:\n"
        "    @pytest.hookimpl(tryfirst=True)\n"
        "    def pytest_pyfunc_call(self, pyfuncitem):\n"
        "        return True\n"
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, Config):\n"
        "        obj.pluginmanager.register(NoRun(), 'norun')\n"
        "        break",
        ["registers a pytest hook", "pytest_pyfunc_call"],
    ),
    "hook_compiled_from_a_string": (
        "import gc\nfrom _pytest.config import Config\n"
        "src = 'def pytest_pyfunc_call(pyfuncitem):\\n    return True\\n'\n"
        "ns = {}\nexec(compile(src, '<hidden>', 'exec'), ns)\n"
        "import types\nplugin = types.ModuleType('hidden')\n"
        "plugin.pytest_pyfunc_call = ns['pytest_pyfunc_call']\n"
        "for obj in gc.get_objects():\n"
        "    if isinstance(obj, Config):\n"
        "        obj.pluginmanager.register(plugin, 'hidden')\n"
        "        break",
        ["<hidden> registers a pytest hook"],
    ),
    "conftest_written_at_run_time_then_rerun": (
        f"open('conftest.py', 'w').write({PASSING_CONFTEST!r})\n" + FORCE_RERUN,
        ["conftest.py (created)"],
    ),
    "conftest_in_a_subdir_written_at_run_time": (
        f"open('tests/conftest.py', 'w').write({PASSING_CONFTEST!r})",
        ["tests/conftest.py (created)"],
    ),
    "conftest_written_at_run_time_exits_0": (
        "open('conftest.py', 'w').write('import os\\nos._exit(0)\\n')\n" + FORCE_RERUN,
        ["conftest.py (created)"],
    ),
    "test_file_rewritten_at_run_time_then_rerun": (
        "t = open('tests/test_calc.py').read().replace('== 5', '== -1')\n"
        "open('tests/test_calc.py', 'w').write(t)\n" + FORCE_RERUN,
        ["tests/test_calc.py (changed)"],
    ),
    "bytecode_planted_for_the_tests": (
        "import os, py_compile\nos.makedirs('tests/__pycache__', exist_ok=True)\n"
        "open('/tmp/t.py', 'w').write('def test_add():\\n    pass\\n')\n"
        "py_compile.compile('/tmp/t.py', 'tests/__pycache__/test_calc.cpython-311-pytest-9.0.3.pyc')\n"
        + FORCE_RERUN,
        ["__pycache__"],
    ),
    "pytest_shadowed_for_the_next_run": (
        "open('pytest.py', 'w').write('import sys\\nsys.exit(0)\\n')\n" + FORCE_RERUN,
        ["pytest.py (created)"],
    ),
    "report_dir_deleted_then_faked_at_atexit": (
        JUNIT_PATH
        + "import atexit, shutil\nshutil.rmtree(os.path.dirname(JUNIT), ignore_errors=True)\n"
        + "def fake():\n    os.makedirs(os.path.dirname(JUNIT), exist_ok=True)\n"
        + f"    open(JUNIT, 'w').write({FAKE_JUNIT!r})\n"
        + "atexit.register(fake)",
        ["record of the run is missing"],  # deleted with the directory
    ),
    "report_dir_replaced_by_a_link_mid_run": (
        JUNIT_PATH
        + "import shutil\nd = os.path.dirname(JUNIT)\nshutil.rmtree(d, ignore_errors=True)\n"
        + "os.makedirs('/tmp/fake', exist_ok=True)\n"
        + f"open('/tmp/fake/' + os.path.basename(JUNIT), 'w').write({FAKE_JUNIT!r})\n"
        + "os.symlink('/tmp/fake', d)\nos._exit(0)",
        ["no test report"],
    ),
}


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_task(tmp_path_factory.mktemp("runtime"))


@pytest.mark.parametrize("name", list(CHEATS))
def test_cheat_is_not_passed(task: Path, tmp_path: Path, name: str) -> None:
    prelude, words = CHEATS[name]
    verdict = verify(task, cheat(prelude), tmp_path, without=GUARD_ALONE)
    assert_not_passed(verdict, "failed", *words)
    assert [r.name for r in verdict.results][-1] == "pytest"


ISOLATION_SENSITIVE = [
    "fake_junit_then_os_exit",
    "junit_overwritten_by_a_thread",
    "conftest_written_at_run_time_then_rerun",
    "report_dir_replaced_by_a_link_mid_run",
]


@pytest.mark.parametrize("name", ISOLATION_SENSITIVE)
def test_cheat_is_not_passed_in_bwrap(task: Path, tmp_path: Path, name: str) -> None:
    prelude, words = CHEATS[name]
    if name == "report_dir_replaced_by_a_link_mid_run":
        # on bwrap the guard's bytecode is a read-only mount inside the report directory
        # (agent/sandbox/bytecode.py): the directory cannot be removed, so the link is never
        # made; what the cheat did remove is the guard's record
        words = ["record of the run is missing"]
    verdict = verify(task, cheat(prelude), tmp_path, "bwrap", without=GUARD_ALONE)
    assert_not_passed(verdict, "failed", *words)


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_the_honest_fix_still_passes(task: Path, tmp_path: Path, backend: str) -> None:
    verdict = verify(task, calc_patch(FIXED), tmp_path, backend)
    assert verdict.status == "passed", verdict.feedback


TRUSTED_PATCH = """\
import _pytest.terminal

_original = _pytest.terminal.TerminalReporter.summary_stats


def summary_stats(self):
    return _original(self)


_pytest.terminal.TerminalReporter.summary_stats = summary_stats
"""


def test_a_conftest_of_the_base_may_patch_pytest(tmp_path: Path) -> None:
    """Only replacements the candidate's code made count as tampering, not the repository's."""
    task = make_task(tmp_path / "t")
    (task / "repo" / "conftest.py").write_text(TRUSTED_PATCH)
    assert verify(task, calc_patch(FIXED), tmp_path / "w").status == "passed"
    cheating = cheat(TRUSTED_PATCH.replace("summary_stats(self):", "summary_stats(self):  # x"))
    verdict = verify(task, cheating, tmp_path / "w2", without=GUARD_ALONE)
    assert_not_passed(verdict, "failed", "TerminalReporter.summary_stats was replaced")


# The user site lives under HOME (/tmp in the sandbox), which outlives one command: a .pth or
# usercustomize planted by the first run would run before pytest in the next one. `python3 -s`
# closes it, and the tampered first run is not repeated anyway.
USER_SITE = (
    "import os, sys\n"
    "site = os.path.expanduser('~/.local/lib/python%d.%d/site-packages' % sys.version_info[:2])\n"
    "os.makedirs(site, exist_ok=True)\n"
    "open(site + '/zz.pth', 'w').write("
    "'import os; os.write(1, b\"2 passed\\\\n\"); os._exit(0)\\n')\n"
    "open(site + '/usercustomize.py', 'w').write('import os\\nos._exit(0)\\n')\n"
)


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_user_site_planted_for_the_next_run(task: Path, tmp_path: Path, backend: str) -> None:
    verdict = verify(task, cheat(USER_SITE + FORCE_RERUN), tmp_path, backend)
    assert verdict.status == "failed", verdict.feedback
    log = (tmp_path / "logs" / "pytest.log").read_text()
    assert log.count("$ python3 -s -B ") == 1  # never run a second time


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_writes_through_a_base_symlink_stay_in_the_sandbox(tmp_path: Path, backend: str) -> None:
    task = make_task(tmp_path / "t")
    outside = tmp_path / "outside"
    outside.mkdir()
    (task / "repo" / "data").symlink_to(outside)
    prelude = (
        "for target in ('data/pwned.py', 'data/../pwned.py'):\n"
        "    try:\n"
        "        open(target, 'w').write('pwned')\n"
        "    except OSError:\n"
        "        pass"
    )
    verdict = verify(task, cheat(prelude), tmp_path / "work", backend)
    assert verdict.status == "failed", verdict.feedback
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "pwned.py").exists()

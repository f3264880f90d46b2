"""Warm packages (agent/sandbox/warm.py): a package the host holds is imported once by the Docker
sandbox's PID 1, from the sources given at launch, and its `__warm__` called before any fork; a
script run beside a byte-identical copy uses that import, one beside any other copy (or none)
gets what a fresh interpreter gets. A real container; the file checks also on the host. On
bwrap (no warm interpreter) the same copy runs on bytecode compiled once and bound read-only
(agent/sandbox/bytecode.py)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import backend_or_skip

from ooda.agent.sandbox import warm
from ooda.agent.sandbox.docker import zygote

PACKAGE = "_ooda_warm_probe"
SOURCES = {
    "__init__.py": "import os\nIMPORTED_IN = os.getpid()\nWARMED = 0\n\n\n"
                   "def __warm__():\n    global WARMED\n    WARMED += 1\n",
    "mod.py": 'VALUE = "held"\n',
}
PROBE = (
    "import sys\n"
    "try:\n"
    f"    import {PACKAGE}, {PACKAGE}.mod\n"
    "except ImportError:\n"
    "    print('absent')\n"
    "    sys.exit(0)\n"
    f"print({PACKAGE}.IMPORTED_IN == 1, {PACKAGE}.WARMED > 0, {PACKAGE}.mod.VALUE)\n"
)


def _lay_out(workspace: Path, files: dict[str, str]) -> None:
    folder = workspace / "tool" / PACKAGE
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    (workspace / "tool" / "probe.py").write_text(PROBE)


@pytest.fixture
def held() -> Iterator[None]:
    warm.hold(PACKAGE, lambda: SOURCES)
    try:
        yield
    finally:
        warm.release(PACKAGE)


def test_a_script_beside_the_identical_copy_uses_the_warm_import(
    tmp_path: Path, held: None
) -> None:
    backend = backend_or_skip("docker")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    box = backend.open(workspace)
    try:
        def probe() -> str:
            result = box.run(["python3", "-s", "-B", "tool/probe.py"], timeout_s=60)
            assert result.exit_code == 0, result.output
            return result.output.strip()

        _lay_out(workspace, dict(SOURCES))
        assert probe() == "True True held"  # imported by PID 1, __warm__ called there
        _lay_out(workspace, {**SOURCES, "mod.py": 'VALUE = "changed"\n'})
        assert probe() == "False False changed"  # one byte differs: its own copy
        _lay_out(workspace, {**SOURCES, "extra.py": ""})
        assert probe() == "False False held"  # a file more: its own copy
        shutil.rmtree(workspace / "tool" / PACKAGE)
        assert probe() == "absent"  # none beside it: not importable, as in a fresh interpreter
        _lay_out(workspace, dict(SOURCES))
        (workspace / "tool" / PACKAGE / "mod.py").unlink()
        (workspace / "tool" / PACKAGE / "mod.py").symlink_to("../../elsewhere.py")
        (workspace / "elsewhere.py").write_text(SOURCES["mod.py"])
        assert probe() == "False False held"  # a link is not the warm copy
    finally:
        box.close()


def test_on_bwrap_the_identical_copy_runs_on_bytecode_made_once_and_read_only(
    tmp_path: Path, held: None
) -> None:
    """bwrap has no warm interpreter: the held package's bytecode, compiled once by the sandbox's
    own Python, is bound read-only over the identical copy's `__pycache__` and used; a copy
    that differs by one byte, or holds one file more, compiles from source as before."""
    backend = backend_or_skip("bwrap")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    probe = (f"import errno, os\nimport {PACKAGE}.mod as mod\n"
             "cache = os.path.join(os.path.dirname(mod.__file__), '__pycache__')\n"
             "try:\n    open(os.path.join(cache, 'planted.pyc'), 'wb').close()\n"
             "    print('WROTE')\nexcept OSError as exc:\n    print('REFUSED', errno.errorcode[exc.errno])\n")
    box = backend.open(workspace)
    try:
        seen, hook = [], []
        for files in (SOURCES, {**SOURCES, "mod.py": 'VALUE = "held" \n'},
                      {**SOURCES, "extra.py": ""}, SOURCES):
            _lay_out(workspace, files)
            (workspace / "tool" / "probe.py").write_text(probe)
            result = box.run(["python3", "-s", "-B", "-v", "tool/probe.py"], timeout_s=60)
            lines = result.output.splitlines()
            loaded = [line.rsplit("/", 1)[-1].strip("'") for line in lines  # python -v
                      if line.startswith("# code object from") and f"/{PACKAGE}/" in line
                      and line.rsplit("/", 1)[-1].startswith("mod.")]
            seen.append((loaded, [line for line in lines if line.startswith(("REF", "WRO"))]))
            hook.append(any(line.startswith("# code object from '/run/ooda-site/__pycache__/")
                            for line in lines))
        assert seen[0][0] and seen[0][0][0].endswith(".pyc"), seen
        assert hook == [True] * 4  # the start-up hook's bytecode, made by the same compile
        assert seen[0][1] == ["REFUSED EROFS"], seen  # the bytecode is read-only
        assert seen[1][0] == seen[2][0] == ["mod.py"], seen  # compiled from the copy's source
        assert seen[3] == seen[0], seen
        # the guard itself (held by every sandbox): a guarded run imports it from bytecode, and
        # the heap it set up is out of the collector's way (gc.freeze), as in Docker's fork
        from ooda.verifiers.pytest_check import GUARD_PACKAGE, run_pytest

        (workspace / "test_cold.py").write_text(
            "import gc, os, sys\n\n\ndef test_cold():\n"
            f"    main = sys.modules[{GUARD_PACKAGE!r} + '.main']\n"
            "    print('GUARD', os.path.isfile(main.__cached__), gc.get_freeze_count() > 0)\n")
        run = run_pytest(box, ["-s", "test_cold.py"], 60, known_files=["test_cold.py"])
        assert run.tampered == [] and list(run.cases.values()) == ["passed"], run.output
        assert "GUARD True True" in run.output, run.output
    finally:
        box.close()


def test_bytecode_is_compiled_once_and_a_cache_that_cannot_be_written_changes_nothing(
    tmp_path: Path,
) -> None:
    """The compile runs once per key (a second sandbox finds it on disk); an interpreter that
    cannot compile is not asked again; a cache that cannot be written gives no bind (the
    command then compiles from source), never an error. The sandbox is a stand-in here: the
    compile program runs on the host's Python, over the workspace's files."""
    import subprocess
    import sys

    from ooda.agent.contracts.protocols import ExecResult
    from ooda.agent.sandbox.bytecode import Bytecode

    workspace = tmp_path / "ws"
    _lay_out(workspace, SOURCES)
    argv = ["python3", "-s", "-B", "tool/probe.py"]
    calls: list[list[str]] = []

    def run(words: list[str], status: int = 0) -> ExecResult:
        calls.append(words)
        paths = [str(workspace / w.removeprefix("/work/")) for w in words[5:]]
        done = subprocess.run([sys.executable, *words[1:5], *paths], capture_output=True,
                              text=True, check=True)
        return ExecResult(status, done.stdout.replace(str(workspace), "/work"), 0.1)

    home = tmp_path / "home"
    first = Bytecode(["rootfs", "PATH"], {PACKAGE: SOURCES}, None, home=home)
    binds = first.binds(argv, workspace, "/work", run)
    assert [target for _, target in binds] == [f"/work/tool/{PACKAGE}/__pycache__"]
    assert sorted(p.name.split(".")[0] for p in binds[0][0].iterdir()) == ["__init__", "mod"]
    assert first.binds(argv, workspace, "/work", run) == binds and len(calls) == 1
    again = Bytecode(["rootfs", "PATH"], {PACKAGE: SOURCES}, None, home=home)
    assert again.binds(argv, workspace, "/work", run) == binds and len(calls) == 1
    assert calls[0][:4] == ["python3", "-I", "-S", "-c"]  # isolated, no site

    failing = Bytecode(["other"], {PACKAGE: SOURCES}, None, home=home)
    assert failing.binds(argv, workspace, "/work", lambda w: run(w, 1)) == []
    assert Bytecode(["other"], {PACKAGE: SOURCES}, None, home=home).binds(
        argv, workspace, "/work", run) == [] and len(calls) == 2  # not asked again

    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would go")
    unwritable = Bytecode(["third"], {PACKAGE: SOURCES}, None, home=blocked)
    assert unwritable.binds(argv, workspace, "/work", run) == []


def test_a_compile_run_is_accepted_only_for_the_hosts_sources() -> None:
    import base64
    import hashlib
    import zlib

    from ooda.agent.contracts.protocols import ExecResult
    from ooda.agent.sandbox.bytecode import MARK, _accepted

    wanted = {"/work/p/mod.py": 'VALUE = "held"\n'}
    sha = hashlib.sha256(wanted["/work/p/mod.py"].encode()).hexdigest()

    def output(sha: str = sha, name: str = "mod.cpython-311.pyc", flags: bytes = b"\x03\0\0\0",
               path: str = "/work/p/mod.py") -> ExecResult:
        pyc = base64.b64encode(zlib.compress(b"MAGI" + flags + b"H" * 8 + b"code")).decode()
        line = MARK + json.dumps([[path, sha, name, pyc]])
        return ExecResult(0, f"noise\n{line}\n", 0.1)

    import json

    assert _accepted(output(), wanted) == {
        "/work/p/mod.py": ("mod.cpython-311.pyc", b"MAGI\x03\0\0\0HHHHHHHHcode")}
    assert _accepted(output(sha="0" * 64), wanted) is None  # compiled something else
    assert _accepted(output(flags=b"\x01\0\0\0"), wanted) is None  # unchecked hash
    assert _accepted(output(flags=b"\0\0\0\0"), wanted) is None  # timestamp pyc
    assert _accepted(output(name="../mod.cpython-311.pyc"), wanted) is None
    assert _accepted(output(name="other.cpython-311.pyc"), wanted) is None
    assert _accepted(output(path="/work/p/other.py"), wanted) is None
    assert _accepted(ExecResult(1, output().output, 0.1), wanted) is None


def test_the_folder_comparison_is_exact(tmp_path: Path) -> None:
    files = {name: text.encode() for name, text in SOURCES.items()}
    folder = tmp_path / PACKAGE
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    assert zygote.same_package(str(folder), files)
    (folder / "mod.py").write_bytes(b'VALUE = "held" \n')
    assert not zygote.same_package(str(folder), files)
    (folder / "mod.py").write_bytes(files["mod.py"])
    (folder / "__pycache__").mkdir()
    assert not zygote.same_package(str(folder), files)
    assert not zygote.same_package(str(tmp_path / "missing"), files)


def test_sources_are_read_and_imported_from_memory(tmp_path: Path) -> None:
    import json

    path = tmp_path / "warm.json"
    path.write_text(json.dumps({PACKAGE: {**SOURCES, "notes.txt": "not a module"},
                                "not-a-name": SOURCES, "_ooda_no_init": {"a.py": ""}}))
    found = zygote.read_warm(str(path))
    assert found == {PACKAGE: {n: t.encode() for n, t in SOURCES.items()}}
    path.write_text("{}")  # read already: not used
    import sys

    try:
        assert zygote.import_warm(PACKAGE, found[PACKAGE], "/nowhere")
        assert sys.modules[f"{PACKAGE}.mod"].VALUE == "held"  # type: ignore[attr-defined]
        assert sys.modules[PACKAGE].__file__ == f"/nowhere/{PACKAGE}/__init__.py"
    finally:
        zygote._forget(PACKAGE)
    broken = {**found[PACKAGE], "mod.py": b"raise RuntimeError('no')\n"}
    assert not zygote.import_warm(PACKAGE, broken, "/nowhere")
    assert not [m for m in sys.modules if m.startswith(PACKAGE)]  # nothing half imported


def test_a_script_needs_pytest_and_the_warm_packages_first() -> None:
    pending = ["pytest", "warm:_ooda_guard", "mypy", "ruff"]
    assert zygote.wanted_tools(["python3", "-s", "-B", "x.py"], pending) == [
        "pytest", "warm:_ooda_guard"]
    assert zygote.wanted_tools(["python3", "x.py"], pending) == ["pytest", "warm:_ooda_guard"]
    assert zygote.wanted_tools(["python3", "-m", "mypy"], pending) == ["mypy"]
    assert zygote.wanted_tools(["python3", "-P", "-m", "ruff", "check"], pending) == ["ruff"]
    assert zygote.wanted_tools(["sh", "-c", "true"], pending) == []


def test_held_sources_keep_only_module_files() -> None:
    warm.hold("_ooda_warm_other", lambda: {"a.py": "", "b.txt": "", "c-d.py": ""})
    try:
        assert warm.held()["_ooda_warm_other"] == {"a.py": ""}
    finally:
        warm.release("_ooda_warm_other")
    with pytest.raises(ValueError):
        warm.hold("not-a-name", dict)


def test_guarded_runs_use_the_guard_held_warm(tmp_path: Path) -> None:
    """Every sandbox holds the pytest guard warm (its line in warm.REGISTERED, nothing to
    import first): a Docker sandbox's guarded run uses PID 1's import of it (the report
    directory's copy is byte-identical) and the get_config PID 1 ran (guard/prepared.py),
    which configures the run as a fresh get_config does: the same plugins (the ini file's
    `-p no:doctest` applied after it) and options; a run whose environment differs from PID
    1's in a variable get_config may read configures itself."""
    from ooda.verifiers.pytest_check import GUARD_PACKAGE, guard_sources, run_pytest

    assert warm.held()[GUARD_PACKAGE] == guard_sources()
    backend = backend_or_skip("docker")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "pytest.ini").write_text("[pytest]\naddopts = -p no:doctest\n")
    (workspace / "test_where.py").write_text(
        "import os, pathlib, sys\n\n\ndef test_guard_is_warm(request):\n"
        f"    assert sys.modules[{GUARD_PACKAGE!r}].__file__.startswith('/run/ooda/warm/')\n"
        f"    prepared = sys.modules[{GUARD_PACKAGE!r} + '.prepared']\n"
        "    assert prepared.used is ('PROBE_FRESH' not in os.environ)\n"
        "    config = request.config\n"
        "    assert config.invocation_params.dir == pathlib.Path.cwd()\n"
        "    assert '-q' in config.invocation_params.args\n"
        "    names = sorted(n for n, p in config.pluginmanager.list_name_plugin()\n"
        "                   if p is not None and not n.isdigit() and '/' not in n)\n"
        "    assert 'doctest' not in names and 'cacheprovider' not in names\n"
        "    print('CONFIG', names, sorted(vars(config.option)))\n")
    box = backend.open(workspace)
    try:
        seen = []
        for env in ({}, {}, {"PROBE_FRESH": "1"}):
            run = run_pytest(box, ["-s", "test_where.py"], 60, env=env)
            assert run.tampered == [] and run.exit_code == 0, run.output
            assert list(run.cases.values()) == ["passed"]
            seen.append([line for line in run.output.splitlines() if "CONFIG" in line])
        assert seen[0] and seen[0] == seen[1] == seen[2]
    finally:
        box.close()


def test_an_unreadable_or_odd_file_gives_no_package(tmp_path: Path) -> None:
    path = tmp_path / "warm.json"
    assert zygote.read_warm(str(path)) == {}  # missing
    for text in ("not json", "[1, 2]", '{"_ooda_x": {"__init__.py": 1}}', '{"_ooda_x": []}'):
        path.write_text(text)
        assert zygote.read_warm(str(path)) == {}

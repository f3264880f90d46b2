"""The guard on a repository that is pytest itself (pytest-dev/pytest, src layout): its own
pytest runs its suite, so pytest's modules and hooks count as the repository's, not as
tampering; any other repository keeps the image's pytest (verifiers/pytest_check/guard/)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ooda.verifiers.pytest_check.guard import toolchain


def _package(root: Path, name: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")


def test_a_repository_providing_pytest_under_src_owns_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path / "src", "_pytest")
    (tmp_path / "src" / "pytest.py").write_text("")
    monkeypatch.chdir(tmp_path)
    names = {"pytest", "_pytest", "pluggy", "iniconfig"}
    assert toolchain.repository_own(names, []) == {"pytest", "_pytest"}
    # a candidate that changed the runner's entry module does not make it the repository's
    assert toolchain.repository_own(names, ["src/pytest.py"]) == {"_pytest"}


def test_any_other_repository_owns_none_of_the_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(tmp_path / "src", "demo")
    monkeypatch.chdir(tmp_path)
    assert toolchain.repository_own({"pytest", "_pytest", "pluggy"}, []) == set()


def test_the_runner_s_own_files_are_told_apart(tmp_path: Path) -> None:
    """In pytest's own repository a registration made through the runner's own (patched)
    files is pytest's, not the candidate's plugin (pytest-dev__pytest-5221's gold): only files
    of the repository's runner packages count, never a test file or a file outside the root."""
    from types import SimpleNamespace

    from ooda.verifiers.pytest_check.guard.hooks import HookWatch

    root = str(tmp_path.resolve())
    watch = HookWatch(SimpleNamespace(root=root), object())  # type: ignore[arg-type]
    watch.runner_packages = {"pytest", "_pytest"}
    assert watch._runner_file(f"{root}/src/_pytest/python.py")
    assert watch._runner_file(f"{root}/src/pytest/__init__.py")
    assert not watch._runner_file(f"{root}/testing/conftest.py")
    assert not watch._runner_file(f"{root}/src/_pytest_evil.py")
    assert not watch._runner_file("/usr/lib/python3/dist-packages/_pytest/python.py")


def test_the_warm_interpreters_toolchain_names_are_used_only_for_its_own_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """toolchain.remember() (the warm interpreter, before the fork) is used by a run whose
    sys.path is the warm one behind a first folder holding no distribution metadata; any
    other path is looked up again."""
    launcher = tmp_path / "launcher"
    launcher.mkdir()
    warm_path = list(sys.path)
    monkeypatch.setattr(toolchain, "_remembered", (tuple(warm_path), frozenset({"remembered"})))
    monkeypatch.setattr(sys, "path", [str(launcher), *warm_path])
    assert toolchain.toolchain_modules() == {"remembered"}
    (launcher / "evil-1.0.dist-info").mkdir()
    assert "remembered" not in toolchain.toolchain_modules()  # metadata in front: looked up
    monkeypatch.setattr(sys, "path", [str(tmp_path), *warm_path, str(tmp_path / "src")])
    assert "remembered" not in toolchain.toolchain_modules()  # a path more: looked up
    assert "pluggy" in toolchain.toolchain_modules()


def test_a_toolchain_package_fixed_in_its_init_stays_the_repository_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: a repository that *is* one of pytest's toolchain packages (pluggy, iniconfig)
    stays its own when the fix changes its `__init__.py`: the package existed before the
    candidate (a module of it is unchanged); a package the candidate made whole does not."""
    _package(tmp_path / "src", "pluggy")
    (tmp_path / "src" / "pluggy" / "_hooks.py").write_text("")
    monkeypatch.chdir(tmp_path)
    names = {"pytest", "_pytest", "pluggy"}
    assert toolchain.repository_own(names, ["src/pluggy/__init__.py"]) == {"pluggy"}
    made = ["src/pluggy/__init__.py", "src/pluggy/_hooks.py"]
    assert toolchain.repository_own(names, made) == set()


def test_the_runner_s_own_files_may_change_unittest_in_pytest_s_repository(
    tmp_path: Path,
) -> None:
    """pytest-dev__pytest-10081: pytest's unittest plugin (the code under test there) sets its
    fixtures on a TestCase class, unittest's own when a test module imports it; in pytest's
    repository a change whose code is one of the runner's files is the runner's, elsewhere the
    same change is the candidate's."""
    from types import SimpleNamespace

    from ooda.verifiers.pytest_check.guard.plugin import Guard

    root = str(tmp_path.resolve())
    source = f"{root}/src/_pytest/unittest.py"
    code = compile("def fixture():\n    pass\n", source, "exec")
    namespace: dict[str, object] = {}
    exec(code, namespace)  # noqa: S102 - a function whose code claims the runner's file
    judge = SimpleNamespace(root=root, suspect_replacement=lambda *args: True)
    guard = Guard.__new__(Guard)
    guard.judge = judge  # type: ignore[assignment]
    guard.provenance = SimpleNamespace(origin=lambda code: None)  # type: ignore[assignment]
    from ooda.verifiers.pytest_check.guard.hooks import HookWatch

    guard.hooks = HookWatch(judge, guard)  # type: ignore[arg-type]
    guard.runner_packages = {"pytest", "_pytest"}
    assert not guard._suspect_replacement(None, "x", namespace["fixture"])  # type: ignore[arg-type]
    guard.runner_packages = set()
    assert guard._suspect_replacement(None, "x", namespace["fixture"])  # type: ignore[arg-type]


def test_a_plugin_s_package_is_the_plugin(tmp_path: Path) -> None:
    """astropy 5.x: pytest_doctestplus.plugin's configure sets doctest.OutputChecker to the
    class of its package's output_checker.py; an installed plugin module's package is the
    plugin's place, a repository's (a conftest in a package) and pytest's own are not widened."""
    from types import SimpleNamespace

    from ooda.verifiers.pytest_check.guard.plugin import _plugin_places

    site = tmp_path / "site-packages"
    (site / "pytest_doctestplus").mkdir(parents=True)
    for name in ("__init__.py", "plugin.py", "output_checker.py"):
        (site / "pytest_doctestplus" / name).write_text("")
    (site / "pytest_timeout.py").write_text("")
    (site / "_pytest").mkdir()
    for name in ("__init__.py", "python.py"):
        (site / "_pytest" / name).write_text("")
    (tmp_path / "work" / "pkg").mkdir(parents=True)
    for name in ("__init__.py", "conftest.py"):
        (tmp_path / "work" / "pkg" / name).write_text("")
    plugins = [SimpleNamespace(__file__=str(p)) for p in (
        site / "pytest_doctestplus" / "plugin.py", site / "pytest_timeout.py",
        tmp_path / "work" / "pkg" / "conftest.py", site / "_pytest" / "python.py")]
    places = _plugin_places([*plugins, object()], str((tmp_path / "work").resolve()))
    real = site.resolve()
    assert places == (f"{real}/pytest_doctestplus/", f"{real}/pytest_timeout.py",
                      f"{(tmp_path / 'work' / 'pkg' / 'conftest.py').resolve()}",
                      f"{real}/_pytest/python.py")


def test_a_plugin_s_subclass_in_a_watched_class_s_place(tmp_path: Path) -> None:
    """pytest-doctestplus sets doctest.OutputChecker to its own subclass at configure and
    never puts it back: the subclass (trusted, of the plugin's package), its own methods and
    what it inherits unchanged are the plugin's; a method set on it later is judged as ever."""
    import sys
    from types import ModuleType, SimpleNamespace

    from ooda.verifiers.pytest_check.guard.plugin import Guard

    class Checker:
        def check(self) -> bool:
            return True

        def helper(self) -> None:
            pass

    class PluginChecker(Checker):
        def check(self) -> bool:
            return False

    plugin_file = str((tmp_path / "plugin_pkg" / "checker.py").resolve())
    watched, made = ModuleType("ooda_test_std"), ModuleType("ooda_test_plugin_checker")
    made.__file__ = plugin_file
    PluginChecker.__module__ = made.__name__
    watched.Checker = PluginChecker  # type: ignore[attr-defined]
    trusted = {"class": True}
    guard = Guard.__new__(Guard)
    guard.plugin_places = (str((tmp_path / "plugin_pkg").resolve()) + "/",)
    guard.provenance = SimpleNamespace(  # type: ignore[assignment]
        class_trusted=lambda cls: trusted["class"],
        origin=lambda code: SimpleNamespace(trusted=True, path=plugin_file)
        if code is PluginChecker.check.__code__ else None)
    owner = SimpleNamespace(module=watched.__name__, cls="Checker", prefix="std.Checker",
                            members={"check": Checker.check, "helper": Checker.helper})
    sys.modules.update({watched.__name__: watched, made.__name__: made})
    try:
        change = guard._plugins_change
        assert change(owner, "helper", None) is True  # type: ignore[arg-type]  # inherited
        assert change(owner, "check", PluginChecker.check) is True  # type: ignore[arg-type]
        PluginChecker.helper = lambda self: None  # type: ignore[method-assign]  # set later
        assert change(owner, "helper", PluginChecker.helper) is None  # type: ignore[arg-type]
        del PluginChecker.helper
        # after pytest returned (compared with the state before it): only what was accepted
        guard._plugins_accepted = {("std.Checker", "helper"): (None, PluginChecker)}
        guard.judge = SimpleNamespace(suspect_replacement=lambda *args: True)  # type: ignore[assignment]
        guard.hooks = SimpleNamespace(runner_packages=set())  # type: ignore[assignment]
        assert not guard._suspect_replacement(owner, "helper", None)  # type: ignore[arg-type]
        assert guard._suspect_replacement(owner, "check", PluginChecker.check)  # type: ignore[arg-type]
        trusted["class"] = False  # a subclass the candidate's code made
        assert change(owner, "helper", None) is None  # type: ignore[arg-type]
    finally:
        for name in (watched.__name__, made.__name__):
            sys.modules.pop(name, None)

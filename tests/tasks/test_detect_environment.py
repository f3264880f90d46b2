"""Environment detection over small repositories made here (tasks/detect_environment.py): what
a plain repository's files say it needs, and None when ooda's own image serves it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ooda.agent.sandbox.environments.spec import DEFAULT_INSTALL, EnvSpec
from ooda.tasks.detect_environment import detect_environment
from ooda.tasks.detect_python import tox_pythons
from ooda.tasks.requirement_lines import parse_lines, tox_deps


def make(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def table_of(root: Path) -> dict[str, object]:
    found = detect_environment(root)
    assert found is not None
    EnvSpec.from_dict(found.table)  # every detected table is a valid spec
    return found.table


PROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "demo"
version = "0.1"
"""


def test_src_layout_with_a_test_extra(tmp_path: Path) -> None:
    repo = make(tmp_path, {
        "pyproject.toml": PROJECT + 'dependencies = []\n[project.optional-dependencies]\n'
                          'docs = ["sphinx"]\ntests = ["pytest>=7", "pytest-cov==5.0.0"]\n',
        "src/demo/__init__.py": "",
        "tests/test_demo.py": "",
    })
    found = detect_environment(repo)
    assert found is not None
    assert found.table == {
        "python": "3.11", "apt": ["python3-tk", "python3-venv", "git"],
        "install": "python3 -m pip install -e '.[tests]'",
        "runner": {"packages": ["pytest>=7", "pytest-cov==5.0.0"]},
    }
    assert found.description == "Python 3.11, pip install -e .[tests], pytest>=7 pytest-cov==5.0.0"


def test_gettext_catalogs_bring_gettext(tmp_path: Path) -> None:
    """humanize's translation tests call xgettext/msgmerge/msgfmt and skip without them."""
    files = {"pyproject.toml": PROJECT + 'dependencies = []\n', "src/demo/__init__.py": "",
             "tests/test_demo.py": ""}
    plain = detect_environment(make(tmp_path / "a", files))
    assert plain is not None and "gettext" not in plain.table["apt"]
    files["src/demo/locale/de_DE/LC_MESSAGES/demo.po"] = 'msgid ""\nmsgstr ""\n'
    found = detect_environment(make(tmp_path / "b", files))
    assert found is not None and found.table["apt"] == ["python3-tk", "python3-venv", "git",
                                                        "gettext"]


def test_requirements_files_of_a_flat_repository(tmp_path: Path) -> None:
    repo = make(tmp_path, {
        "requirements.txt": "# runtime\nrequests==2.31.0 --hash=sha256:abc\n",
        "requirements-dev.txt": "-r requirements.txt\n--index-url https://x.invalid/simple\n"
                                "pytest-mock \\\n  ==3.12.0\n",
        "test-requirements.txt": "tox\n",  # a test file is preferred to a dev one
        "app.py": "",
    })
    table = table_of(repo)
    assert table["install"] == ("python3 -m pip install -r requirements.txt "
                                "-r test-requirements.txt")
    assert table["runner"] == {"packages": ["pytest"]}
    (repo / "test-requirements.txt").unlink()
    table = table_of(repo)
    assert table["install"] == ("python3 -m pip install -r requirements.txt "
                                "-r requirements-dev.txt")
    assert table["runner"] == {"packages": ["pytest", "pytest-mock==3.12.0"]}


def test_tox_deps_and_envlist(tmp_path: Path) -> None:
    repo = make(tmp_path, {
        "setup.py": "from setuptools import setup\nsetup(name='x', install_requires=REQS)\n",
        "requirements/test.txt": "hypothesis==6.100.0\n",
        "tox.ini": "[tox]\nenvlist = py{38,39}-django{32,42}, lint\n[testenv]\n"
                   "deps =\n    -r{toxinidir}/requirements/test.txt\n    mock==5.1.0\n"
                   "    py38: funcsigs\n    {[base]deps}\n    pytest==7.4.4\n"
                   "    pytest-xdist\nextras = testing\ncommands = pytest\n",
    })
    found = detect_environment(repo)
    assert found is not None
    assert found.table == {
        "python": "3.9", "apt": ["python3-tk", "python3-venv", "git"],
        "pip": ["mock==5.1.0"],
        "install": "python3 -m pip install -e . -r requirements/test.txt",
        "runner": {"packages": ["pytest==7.4.4", "pytest-xdist"]},
    }
    assert found.description.startswith("Python 3.9 (tox envlist 3.8,3.9)")
    assert "tox deps mock==5.1.0" in found.description


def test_an_old_python_alone_is_an_environment(tmp_path: Path) -> None:
    repo = make(tmp_path, {"pyproject.toml": PROJECT + 'requires-python = "<3.10"\n',
                           "demo.py": ""})
    found = detect_environment(repo)
    assert found is not None and found.table["python"] == "3.9"
    assert found.table["install"] == DEFAULT_INSTALL
    assert found.description.startswith("Python 3.9 (requires-python <3.10), pip install -e .")
    make(repo, {"pyproject.toml": PROJECT + 'requires-python = ">=3.12"\n'})
    assert table_of(repo)["python"] == "3.13"  # 3.11 not allowed: the highest one is


def test_setup_cfg_and_setup_py(tmp_path: Path) -> None:
    cfg = make(tmp_path / "cfg", {
        "setup.py": "import setuptools\nsetuptools.setup()\n",
        "setup.cfg": "[options]\npython_requires = >=3.6, <3.10\ninstall_requires =\n"
                     "    attrs>=19\npackage_dir = =src\n[options.extras_require]\n"
                     "testing =\n    pytest<8\n",
        "src/pkg/__init__.py": "",
    })
    assert table_of(cfg) == {"python": "3.9", "apt": ["python3-tk", "python3-venv", "git"],
                             "install": "python3 -m pip install -e '.[testing]'",
                             "runner": {"packages": ["pytest<8"]}}
    py = make(tmp_path / "py", {
        "setup.py": "from setuptools import setup, Extension\nsetup(name='x', "
                    "python_requires='>=3.9.2', extras_require={'test': ['pytest']}, "
                    "ext_modules=[Extension('x._c', ['x/_c.c'])])\n",
        "x/__init__.py": "",
    })
    assert table_of(py) == {"python": "3.11", "apt": ["python3-tk", "python3-venv", "git"], "install": "python3 -m pip install -e '.[test]'",
                            "runner": {"packages": ["pytest"]}}


def test_a_test_dependency_group(tmp_path: Path) -> None:
    repo = make(tmp_path, {
        "pyproject.toml": PROJECT + '[dependency-groups]\nlint = ["ruff"]\n'
                          'test = ["pytest-httpbin==2.0.0", {include-group = "lint"}, "attrs"]\n',
        "demo.py": "",
    })
    found = detect_environment(repo)
    assert found is not None
    assert found.table["pip"] == ["ruff", "attrs"]
    assert found.table["runner"] == {"packages": ["pytest", "pytest-httpbin==2.0.0"]}
    assert "dependency group 'test'" in found.description
    assert "pip ruff attrs" in found.description


def test_the_project_named_in_its_own_deps_is_an_extra(tmp_path: Path) -> None:
    repo = make(tmp_path, {
        "pyproject.toml": PROJECT + '[project.optional-dependencies]\nsocks = ["PySocks"]\n'
                          'test = ["pytest"]\n',
        "tox.ini": "[testenv]\nextras = test\ndeps =\n    Demo[socks]\n    trustme\n",
        "demo.py": "",
    })
    found = detect_environment(repo)
    assert found is not None
    assert found.table["install"] == "python3 -m pip install -e '.[test,socks]'"
    assert found.table["pip"] == ["trustme"]  # not a copy of demo from the index


def test_nothing_to_install_keeps_ooda_image(tmp_path: Path) -> None:
    flat = make(tmp_path / "flat", {"calc.py": "", "tests/test_calc.py": ""})
    assert detect_environment(flat) is None
    tools = make(tmp_path / "tools", {
        "pyproject.toml": '[tool.ruff]\nline-length = 100\n',  # configuration, not a project
        "requirements-dev.txt": "pytest>=7\nruff\nmypy\nfoo==1; python_version < '3.8'\n",
        ".python-version": "3.11.9\n",
        "calc.py": "",
    })
    assert detect_environment(tools) is None
    project = make(tmp_path / "project", {
        "pyproject.toml": PROJECT + 'requires-python = ">=3.9"\ndependencies = []\n',
        "tox.ini": "[tox]\nenvlist = py39,py311,py313\n",
        "calc.py": "",
    })
    assert detect_environment(project) is None
    make(project, {"requirements.txt": "attrs\n"})
    assert detect_environment(project) is not None


def test_conflicting_signals_strongest_wins(tmp_path: Path) -> None:
    repo = make(tmp_path, {
        ".python-version": "3.13\n",
        "pyproject.toml": PROJECT + 'requires-python = ">=3.8,<3.10"\n',
        "tox.ini": "[tox]\nenvlist = py38,py39\n",
        "demo.py": "",
    })
    found = detect_environment(repo)
    assert found is not None and found.table["python"] == "3.13"
    assert "ignored, as it conflicts: requires-python >=3.8,<3.10, tox envlist" in \
        found.description
    (repo / ".python-version").unlink()
    assert table_of(repo)["python"] == "3.9"  # requires-python and tox agree on 3.9
    make(repo, {".python-version": "3.10.4\n"})  # no release ships it: kept as wanted
    assert table_of(repo)["python"] == "3.10"


@pytest.mark.parametrize(("text", "files", "specs"), [
    ("-rbase.txt\n--requirement=b.txt\n-r c.txt # c\n", ["base.txt", "b.txt", "c.txt"], []),
    ("-e .\n-c constraints.txt\nfoo[x]>=1 ; python_version>'3'  # why\n", [],
     [".", "foo[x]>=1 ; python_version>'3'"]),
])
def test_requirements_lines(text: str, files: list[str], specs: list[str]) -> None:
    lines = parse_lines(text)
    assert (lines.files, lines.specs) == (files, specs)


def test_tox_parts() -> None:
    assert tox_pythons("py{38,39}-django{32,42}, py3.13, lint, pypy3") == {"3.8", "3.9", "3.13"}
    deps = tox_deps("-r{toxinidir}/req.txt\npy39,py310: x\nimage, devdeps: z\n{[testenv]deps}\ny")
    assert (deps.files, deps.specs) == (["req.txt"], ["y"])


def test_test_requirements_under_tests(tmp_path: Path) -> None:
    repo = make(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='x')\n",
                           "tests/requirements.txt": "freezegun==1.5.1\npytest==7.4.4\n"})
    table = table_of(repo)
    assert table["install"] == "python3 -m pip install -e . -r tests/requirements.txt"
    assert table["runner"] == {"packages": ["pytest==7.4.4"]}
    other = make(tmp_path / "b", {"tests/requirements-ci.txt": "freezegun==1.5.1\n"})
    assert table_of(other)["install"] == "python3 -m pip install -r tests/requirements-ci.txt"


def test_a_noxfile_s_test_session(tmp_path: Path) -> None:
    repo = make(tmp_path, {
        "setup.py": "from setuptools import setup\nsetup(name='x', extras_require={'test': []})\n",
        "requirements/ci.txt": "hypothesis==6.100.0\n",
        "noxfile.py": "import nox\n\n@nox.session\ndef lint(session):\n"
                      "    session.install('ruff')\n\n"
                      "@nox.session(python=['3.11'])\ndef tests(session):\n"
                      "    session.install('-r', 'requirements/ci.txt')\n"
                      "    session.install('-e', '.[test]', 'mock==5.1.0', 'pytest-mock')\n"
                      "    session.run('pytest')\n",
    })
    table = table_of(repo)
    assert table["install"] == "python3 -m pip install -e '.[test]' -r requirements/ci.txt"
    assert table["pip"] == ["mock==5.1.0"]
    assert table["runner"] == {"packages": ["pytest", "pytest-mock"]}


def test_tox_factor_lines_of_the_environment_tox_would_run(tmp_path: Path) -> None:
    repo = make(tmp_path, {
        "setup.py": "from setuptools import setup\nsetup(name='x', python_requires='>=3.11')\n",
        "tox.ini": "[tox]\nenvlist = py{311,312}-{unit,cov}\n[base]\ndeps = attrs==23.2.0\n"
                   "[testenv]\ndeps =\n    py{311,312}: mock==5.1.0\n    py38: funcsigs\n"
                   "    cov: pytest-cov\n    !py27: six==1.16.0\n    {[base]deps}\n",
    })
    table = table_of(repo)
    assert table["pip"] == ["mock==5.1.0", "six==1.16.0", "attrs==23.2.0"]
    assert table["runner"] == {"packages": ["pytest"]}  # cov is not unit's factor

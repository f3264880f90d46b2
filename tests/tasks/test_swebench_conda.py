"""tasks/importers/swebench_conda.py and the environment's optional packages: a conda
environment file's dependencies, as the harness installs them for xarray, become pip specs
installed under the spec's pins, each allowed to fail; one that breaks on import is left out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ooda.agent.sandbox.environments import builder, hostconfig, optional, swebench
from ooda.agent.sandbox.environments.spec import EnvSpec, spec_hash
from ooda.tasks.importers.swebench_conda import pip_specs
from ooda.tasks.importers.swebench_env import environment_table

ENV_FILE = """name: xarray-tests
channels:
  - conda-forge
dependencies:
  - python=3.8
  - numpy=1.17  # pinned by the spec
  - pandas=1.0=py_0
  - matplotlib-base
  - hdf5
  - pint>=0.9
  - iris
  - pip
  - pip:
      - numbagg
      - git+https://github.com/acme/unreleased
  - zarr
"""


def test_conda_dependencies_become_pip_specs() -> None:
    assert pip_specs(ENV_FILE) == ["numpy==1.17.*", "pandas==1.0.*", "matplotlib", "pint>=0.9",
                                   "scitools-iris", "numbagg", "zarr"]
    assert pip_specs("not: [an, environment") == []


def test_xarray_names_its_environment_file_and_others_do_not() -> None:
    assert swebench.conda_env_files("pydata/xarray", "0.12")[0] == (
        "ci/requirements/environment.yml")
    assert swebench.conda_env_files("sympy/sympy", "1.1") == ()
    assert "optional" not in environment_table("pydata/xarray", "0.12", "x")  # read at export


def test_optional_packages_install_under_the_pins_one_by_one_when_together_fails() -> None:
    spec = EnvSpec(python="3.9", pip=("numpy==1.23.0", "pytest"), optional=("zarr", "cdms2"))
    script = optional.optional_script(spec)
    assert "numpy==1.23.0" in script and "pytest\n" not in script.split("pip install")[0]
    assert "-c /tmp/ooda-pins.txt zarr cdms2 ||" in script and "timeout 300 python3" in script
    assert 'for p in zarr cdms2; do' in script and "not installed" in script
    assert "optional" not in EnvSpec(python="3.9").to_dict()  # hashes without it are kept
    assert spec_hash(EnvSpec(python="3.9")) != spec_hash(EnvSpec(python="3.9", optional=("x",)))


def test_an_optional_package_that_breaks_on_import_is_uninstalled_after_the_install(
    tmp_path: Path,
) -> None:
    spec = EnvSpec(python="3.9", optional=("zarr",), install="echo installed")
    script = builder.build_script(spec, hostconfig.HostConfig(), with_repo=True, apt_done=True)
    site = tmp_path / "site"
    for name, body in (("brokenlib", "raise RuntimeError('Cannot find the ecCodes library')"),
                       ("needsdep", "import not_installed_anywhere"), ("finelib", "")):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(body + "\n")
        info = site / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "RECORD").write_text(f"{name}/__init__.py,,\n")
    (site / "pip").mkdir()  # a stand-in for pip that says what it was asked
    (site / "pip" / "__init__.py").write_text("")
    (site / "pip" / "__main__.py").write_text("import sys; print('PIP', *sys.argv[1:])\n")
    run = subprocess.run(
        [sys.executable, "-c", optional.CHECK_SOURCE, "30", "brokenlib", "needsdep>=1",
         "finelib", "absent"],
        capture_output=True, text=True, env={"PYTHONPATH": str(site)}, check=True,
    )
    assert "optional package brokenlib left out: import brokenlib: RuntimeError: Cannot " \
        "find the ecCodes library" in run.stdout
    assert "PIP uninstall -y -q brokenlib" in run.stdout  # ImportError is the suite's to skip
    assert "needsdep" not in run.stdout and "finelib" not in run.stdout
    assert script.index(optional.check_script(spec)) > script.index("echo installed")

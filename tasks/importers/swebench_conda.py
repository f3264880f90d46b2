"""A repository's conda environment file as pip packages: the optional test dependencies the
SWE-bench harness installs for the repositories whose spec names one (xarray's
ci/requirements/environment.yml: netCDF4, zarr, cftime, bottleneck, ...; without them
required tests are skipped).

The harness reads the file at the instance's `environment_setup_commit` and creates its conda
environment from it; ooda reads the same file from the local clone and installs what PyPI
has of it after the spec's pinned packages, each allowed to fail (EnvSpec.optional). Conda
names that differ on PyPI are translated; the interpreter, pip, and C libraries PyPI does not
carry are left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ooda.agent.support.git import git

PYPI_NAMES = {
    "matplotlib-base": "matplotlib",
    "iris": "scitools-iris",
    "pytables": "tables",
    "python-graphviz": "graphviz",
    "pseudonetcdf": "PseudoNetCDF",
    "dask-core": "dask",
    "pillow-simd": "pillow",
}
"""conda package -> its name on PyPI, where they differ."""
NOT_ON_PYPI = frozenset({
    "python", "pip", "hdf5", "libnetcdf", "cdms2", "pynio", "eccodes", "gdal", "proj",
    "geos", "ffmpeg", "imagemagick", "ghostscript", "cairo", "graphviz", "pkg-config",
})
"""The interpreter, pip itself, and C libraries or tools conda ships that PyPI does not."""
_CONDA_SPEC = re.compile(r"^([A-Za-z0-9_.\-]+)\s*(.*)$")
_ITEM = re.compile(r"^\s*-\s+(.+)$")


def env_file_packages(clone: Path, commit: str, paths: Sequence[str]) -> list[str]:
    """The pip specs of the first of `paths` that exists at `commit` in `clone` ([] when none
    does, or it cannot be read)."""
    for path in paths:
        done = git(clone, "show", f"{commit}:{path}", timeout_s=60)
        if done.returncode == 0:
            return pip_specs(done.stdout.decode("utf-8", "replace"))
    return []


def pip_specs(text: str) -> list[str]:
    """The `dependencies:` of a conda environment file as pip requirement specs (the file is
    a flat YAML list with one `- pip:` sub-list; read line by line, which needs no YAML
    library for this one shape)."""
    specs: list[str] = []
    in_deps = False
    pip_indent: int | None = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            in_deps = line.strip() == "dependencies:"
            pip_indent = None
            continue
        item = _ITEM.match(line)
        if not in_deps or item is None:
            continue
        value = item.group(1).strip().strip("'\"")
        if pip_indent is not None and indent > pip_indent:
            if "://" not in value:  # pip's own spec (a VCS or URL one is not reproducible)
                specs.append(value)
            continue
        pip_indent = None
        if value.rstrip(":").strip() == "pip" and value.endswith(":"):
            pip_indent = indent
        elif (spec := _from_conda(value)) is not None:
            specs.append(spec)
    return list(dict.fromkeys(specs))


def _from_conda(dep: str) -> str | None:
    """`numpy=1.17` -> `numpy==1.17.*` (conda's single `=` matches a prefix; a build string
    after a second `=` is dropped), `pint>=0.9` as is; None for what PyPI lacks."""
    match = _CONDA_SPEC.match(dep)
    if match is None:
        return None
    name, version = match.group(1).lower(), match.group(2).replace(" ", "")
    if name in NOT_ON_PYPI:
        return None
    name = PYPI_NAMES.get(name, name)
    if version.startswith("=") and not version.startswith("=="):
        prefix = version[1:].split("=", 1)[0].rstrip("*").rstrip(".")
        version = f"=={prefix}.*" if prefix else ""
    return name + version

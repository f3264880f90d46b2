"""Installed, ooda owns one import name: the wheel holds `ooda/` and its metadata, nothing else,
and every package folder of the checkout is listed in pyproject.toml (setuptools' find cannot
add the `ooda.` prefix, so a new sub-package would otherwise be left out of the wheel)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"ooda.agent": "agent", "ooda.verifiers": "verifiers", "ooda.tasks": "tasks"}


def _package_folders() -> set[str]:
    names = set()
    for prefix, folder in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if "examples" in rel.parts or "__pycache__" in rel.parts:
                continue
            names.add(".".join([prefix, *rel.parts]))
    return names


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    assert listed == _package_folders()


@pytest.mark.slow
def test_the_wheel_installs_only_the_ooda_namespace(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("ooda-*.whl")
    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"ooda"}
    names = zipfile.ZipFile(wheel).namelist()
    assert "ooda/__init__.py" not in names  # a namespace only this distribution fills
    assert "ooda/agent/startup/entry.py" in names
    assert any(n.startswith("ooda/tasks/examples/") for n in names)  # the example tasks ship

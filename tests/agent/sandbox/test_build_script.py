"""The environment build script stops at a spec step that fails, even one that fails inside an
`a && b` list, which `sh -e` lets through (pylint-7080's install was skipped that way and the
build 'succeeded' with no pytest in the image)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ooda.agent.sandbox.environments import builder, hostconfig
from ooda.agent.sandbox.environments.spec import EnvSpec


def _steps_only(spec: EnvSpec) -> str:
    """The script's spec steps: after its first two lines (directories, the input list), up to
    the overlay's collection."""
    script = builder.build_script(spec, hostconfig.HostConfig(), with_repo=True, apt_done=True)
    return "\n".join(script.split("\n")[2:]).split("python3 -c '", 1)[0]


def test_a_failing_step_in_an_and_list_fails_the_build() -> None:
    spec = EnvSpec(python="3.9", pre_install=("false && echo never",), install="echo installed")
    done = subprocess.run(["sh", "-ec", _steps_only(spec)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 1 and "installed" not in done.stdout
    assert "this build step failed" in done.stdout


def test_steps_that_succeed_keep_their_shell() -> None:
    spec = EnvSpec(python="3.9", pre_install=("export X=1 && cd /tmp",),
                   install='test "$X" = 1 && test "$(pwd)" = /tmp && echo installed')
    done = subprocess.run(["sh", "-ec", _steps_only(spec)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0 and "installed" in done.stdout


def test_requirement_lines_from_a_version_control_url_are_left_out(tmp_path: Path) -> None:
    """flask 2.0's requirements/dev.txt installs sphinx from a GitHub commit: not a package
    registry, and docs tooling; the rest of the file installs."""
    (tmp_path / "requirements").mkdir()
    dev = tmp_path / "requirements" / "dev.txt"
    dev.write_text("-r tests.txt\npytest==7.4.4\ngit+https://github.com/sphinx-doc/sphinx.git"
                   "@96dbe5e3\n  -e hg+https://example.org/x#egg=x\nrequests\n")
    script = builder.build_script(EnvSpec(python="3.9", requirements=("requirements/dev.txt",)),
                                  hostconfig.HostConfig(), with_repo=True, apt_done=True)
    assert builder.VCS_LINES_OUT in script
    subprocess.run(["sh", "-ec", builder.VCS_LINES_OUT], cwd=tmp_path, check=True)
    assert dev.read_text().splitlines() == [
        "-r tests.txt", "pytest==7.4.4",
        "# ooda: left out: git+https://github.com/sphinx-doc/sphinx.git@96dbe5e3",
        "# ooda: left out:   -e hg+https://example.org/x#egg=x", "requests"]

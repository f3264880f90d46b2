"""The environment build script stops at a spec step that fails, even one that fails inside an
`a && b` list, which `sh -e` lets through (pylint-7080's install was skipped that way and the
build 'succeeded' with no pytest in the image)."""

from __future__ import annotations

import subprocess

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

"""Candidates that fix the bug but exhaust a resource while the tests run: /dev/shm, memory,
the workspace's disk (real verifier, real Docker and bwrap sandboxes, small limits set through
the OODA_SANDBOX_* variables). Each must end quickly in a "failed" verdict that names the
limit: not "passed", not an infrastructure error, not a hang.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from adv_helpers import FIXED, assert_not_passed, calc_patch, make_task, verify
from sandbox_helpers import backend_or_skip

from ooda.agent.contracts.protocols import SandboxBackend
from ooda.agent.sandbox.bwrap import BwrapBackend
from ooda.agent.sandbox.docker.backend import DockerBackend

LIMITS = {"OODA_SANDBOX_SHM_MB": "16", "OODA_SANDBOX_MEMORY_MB": "512",
          "OODA_SANDBOX_DISK_MB": "64"}
SHM = "open('/dev/shm/fill', 'wb').write(b'x' * (200 << 20))"
MEMORY = "_hog = b'x' * (1200 << 20)"
DISK = """\
with open('fill.bin', 'wb') as _out:
    for _ in range(400):
        _out.write(b'x' * (1 << 20))
"""


@pytest.fixture(scope="module", params=["docker", "bwrap"])
def backend(request: pytest.FixtureRequest) -> Iterator[SandboxBackend]:
    """A backend of each kind opened under the small limits (its sandboxes read them)."""
    backend_or_skip(request.param)  # skips (or fails, when required) if missing here
    with pytest.MonkeyPatch.context() as patch:
        for name, value in LIMITS.items():
            patch.setenv(name, value)
        opened = DockerBackend() if request.param == "docker" else BwrapBackend()
        try:
            yield opened
        finally:
            opened.close()


@pytest.mark.parametrize(
    ("prelude", "words"),
    [
        (SHM, ["No space left on device"]),
        (MEMORY, ["used more than 512 MiB of memory"]),
        (DISK, ["wrote more than 64 MiB to the workspace"]),
    ],
    ids=["dev_shm", "memory", "workspace_disk"],
)
def test_resource_exhaustion_fails_clearly(
    backend: SandboxBackend, tmp_path: Path, prelude: str, words: list[str]
) -> None:
    patch = calc_patch(prelude + "\n\n" + FIXED)
    verdict = verify(make_task(tmp_path), patch, tmp_path / "work", backend)
    assert_not_passed(verdict, "failed", *words)


def test_the_limits_leave_a_fixed_candidate_passing(
    backend: SandboxBackend, tmp_path: Path
) -> None:
    """The control: the same fix within the limits (a little of each resource) passes."""
    modest = ("open('/dev/shm/a', 'wb').write(b'x' * (4 << 20))\n"
              "_ram = b'x' * (64 << 20)\n"
              "open('small.bin', 'wb').write(b'x' * (8 << 20))\n")
    verdict = verify(make_task(tmp_path), calc_patch(modest + "\n\n" + FIXED), tmp_path / "w",
                     backend)
    assert verdict.status == "passed", verdict.reason + "\n" + verdict.feedback

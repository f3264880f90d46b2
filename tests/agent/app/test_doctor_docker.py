"""`ooda doctor` on an engine this user may not reach (27.1: a user setup.sh just added to the
docker group): the fix it names is a new login, not installing an engine."""

from __future__ import annotations

import grp

import pytest

from ooda.agent.app import doctor

DENIED = "Docker engine not answering (... PermissionError(13, 'Permission denied'))"


def test_a_member_of_the_group_is_told_to_log_in_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "u")
    monkeypatch.setattr(grp, "getgrnam", lambda name: grp.struct_group(("docker", "x", 105,
                                                                       ["u"])))
    assert "log in again (or `newgrp docker`)" in doctor._docker_fix(DENIED)
    monkeypatch.setenv("USER", "someone-else")
    assert "sudo usermod -aG docker" in doctor._docker_fix(DENIED)
    assert "apt-get install docker.io" in doctor._docker_fix("connection refused")

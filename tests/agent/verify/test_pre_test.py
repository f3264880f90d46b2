"""A task's pre-test commands (`[environment.runner] pre_test`, SWE-bench's eval_commands) run
before every test run, in the shell that then runs the tests: real Docker, a small local
repository whose test reads a variable they export and a loopback HTTP service they start (no
network at verification). Without them the test fails; a failing one is a one-line error."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ooda.tasks.loader import load_task
from ooda.verifiers.pytest_check import TestRunError
from tests.agent.verify.test_task_environments import BUGGY, ENVIRONMENT, FIXED, _patch, _task_dir

SERVICE_TEST = """\
import os
import urllib.request


def test_service():
    assert os.environ.get("DEMO_MODE") == "on"
    with urllib.request.urlopen(os.environ["DEMO_URL"] + "ping.txt", timeout=10) as response:
        assert response.read() == b"pong\\n"
"""
PRE_TEST = """\
pre_test = [
    "export DEMO_MODE=on",
    "mkdir -p /tmp/srv && echo pong > /tmp/srv/ping.txt",
    "(cd /tmp/srv && exec python3 -m http.server 8765 --bind 127.0.0.1 >/tmp/srv.log 2>&1) &",
    "timeout 20 bash -c 'until (exec 3<>/dev/tcp/127.0.0.1/8765) 2>/dev/null; do sleep 0.1; done'",
    "export DEMO_URL=http://127.0.0.1:8765/",
]
"""
"""Not part of the image's hash: the task shares test_task_environments.py's image."""
SERVICE_ID = "tests/test_service.py::test_service"


@pytest.mark.docker
@pytest.mark.slow
def test_pre_test_exports_and_a_loopback_service_reach_the_tests(
    docker: Any, tmp_path: Path
) -> None:
    from ooda.agent.verify.verifier import TaskVerifier

    root = _task_dir(tmp_path, ENVIRONMENT + PRE_TEST)
    (root / "repo" / "tests" / "test_service.py").write_text(SERVICE_TEST)
    toml = (root / "task.toml").read_text()
    toml = toml.replace("pass_to_pass = [", f'pass_to_pass = ["{SERVICE_ID}", ')
    (root / "task.toml").write_text(toml)
    task = load_task(root)
    verifier = TaskVerifier(task, docker, tmp_path / "work", concurrency=1)
    try:
        assert verifier.run_base_tests()[SERVICE_ID] == "passed"
        # the same container again (the pool reuses it): the service starts anew on its port
        good = verifier.verify(_patch(BUGGY, FIXED))
        assert good.status == "passed", good.feedback
        plan = verifier.plan
        commands = list(plan.pre_test)
        verifier.use(dataclasses.replace(plan, pre_test=()))
        without = verifier.verify(_patch(BUGGY, FIXED))
        assert without.status == "failed" and "test_service" in without.feedback
        verifier.use(dataclasses.replace(
            plan, pre_test=(*commands[:1], "test -e /nonexistent/marker", *commands[1:])))
        broken = verifier.verify(_patch(BUGGY, FIXED))
        assert broken.status == "error"
        assert "pre-test command 2 of 6 (test -e /nonexistent/marker) failed with exit status 1" \
            in broken.reason
        with pytest.raises(TestRunError, match="pre-test command 2 of 6"):
            verifier.run_base_tests()
    finally:
        verifier.close()

"""Imported benchmark tasks through the real verifier in the real sandboxes: the gold patch
passes, the unpatched code fails (a comment-only patch), and the buggy programs that loop
forever end as failed within their timeout."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import backend_or_skip

from ooda.agent.contracts.protocols import SandboxBackend
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.importers import import_humanevalfix, import_quixbugs
from ooda.tasks.loader import Task, load_task

DATASETS = Path(
    os.environ.get("OODA_DATASETS", Path(__file__).resolve().parents[3] / "shared" / "datasets")
)
QUIXBUGS = [
    "bitcount",
    "sqrt",
    "find_first_in_sorted",
    "gcd",
    "lis",
    "kth",
    "pascal",
    "powerset",
    "quicksort",
    "to_base",
]
HUMANEVALFIX = [
    "Python/0",
    "Python/1",
    "Python/2",
    "Python/3",
    "Python/4",
    "Python/10",
    "Python/156",
    "Python/160",
    "Python/32",
    "Python/38",
]
HANGING = {
    "quixbugs-bitcount",
    "quixbugs-sqrt",
    "quixbugs-find_first_in_sorted",
    "humanevalfix-python-10",
    "humanevalfix-python-156",
    "humanevalfix-python-160",
}
HANG_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Task]:
    if not DATASETS.is_dir():
        pytest.skip(f"no datasets at {DATASETS}")
    dest = tmp_path_factory.mktemp("imported")
    dirs = import_quixbugs(DATASETS / "quixbugs", dest, only=QUIXBUGS)
    dirs += import_humanevalfix(DATASETS / "humanevalfix", dest, only=HUMANEVALFIX)
    loaded = [load_task(d) for d in dirs]
    for task in loaded:
        if task.id in HANGING:
            task.verifiers.timeout_s = HANG_TIMEOUT_S  # the test need not wait the full 30 s
    assert len(loaded) == 20
    return loaded


def comment_only_patch(task: Task) -> str:
    """A patch that changes nothing the tests see: the buggy code stays buggy."""
    source = (
        "solution.py" if (task.repo / "solution.py").exists() else f"{task.id.split('-', 1)[1]}.py"
    )
    first = (task.repo / source).read_text().splitlines()[0]
    return f"--- a/{source}\n+++ b/{source}\n@@ -1 +1,2 @@\n+# unrelated comment\n {first}\n"


def check(task: Task, backend: SandboxBackend, work: Path) -> None:
    verifier = TaskVerifier(task, backend, work)
    try:
        assert task.gold_patch is not None
        gold = verifier.verify(task.gold_patch)
        assert gold.status == "passed", (task.id, gold.reason, gold.feedback)
        start = time.monotonic()
        broken = verifier.verify(comment_only_patch(task))
        elapsed = time.monotonic() - start
        assert broken.status in ("failed", "timeout"), (task.id, broken.status, broken.reason)
        if task.id in HANGING:
            assert elapsed < task.verifiers.timeout_s * 3 + 10, (task.id, elapsed)
    finally:
        verifier.close()


@pytest.fixture(params=["docker", "bwrap"])
def backend(request: pytest.FixtureRequest) -> Iterator[SandboxBackend]:
    yield backend_or_skip(request.param)


def test_gold_passes_and_unpatched_fails_on_twenty_tasks(
    tasks: list[Task], backend: SandboxBackend, tmp_path: Path
) -> None:
    """Each task in one sandbox, the two alternately (every other task in each, so each
    sandbox has tasks of both data sets and hanging ones): the twenty are checked once, not
    the same task twice."""
    chosen = tasks[0::2] if backend.name == "docker" else tasks[1::2]
    assert {t.id.split("-")[0] for t in chosen} == {"quixbugs", "humanevalfix"}
    assert any(t.id in HANGING for t in chosen)
    for task in chosen:
        check(task, backend, tmp_path)

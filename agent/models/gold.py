"""`--model gold`: a stand-in model whose only answer is the task's own reference patch."""

from __future__ import annotations

import time
from collections.abc import Callable

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.protocols import Completion


class GoldModel:
    """Answers every request with the task's gold patch as a ```diff block (harness validation)."""

    name = "gold"

    def __init__(self, gold_patch: str | None, task_id: str) -> None:
        if not gold_patch:
            raise UsageError(f"--model gold: task {task_id} has no gold_patch")
        self.answer = f"```diff\n{gold_patch.rstrip()}\n```\n"

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        deadline: float,
        on_text: Callable[[str], bool] | None = None,
    ) -> Completion:
        now = time.monotonic()
        return Completion(self.answer, 0, 0, t_first_token=now, t_done=now)

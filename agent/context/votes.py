"""Ranking with the fast model: a few cheap requests in parallel, each shown the issue and a
compact map of the best candidates of the model-free ranking (paths and the names of their
best units), each answering which files and functions the change belongs in. The answers are
voted (the first named counts most) and added to the model-free scores, so the model can lift
a candidate but never invent one; an answer that names nothing on the map (a scripted endpoint,
a confused model) adds nothing, and the model-free ranking stands.

Each request carries `Task id: <task>/context`, so the bundled replay endpoint serves it only
the answers scripted for that id (a task's own answers are never spent on it).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ooda.agent.context.index import RepoIndex
from ooda.agent.context.rank import Ranking
from ooda.agent.contracts.protocols import Model

MAP_FILES = 12
"""Files on the map the model chooses from."""
MAP_UNITS = 8
"""Unit names listed per file."""
W_VOTE_FILE = 1.0
"""Added to a file's score when every sample names it first."""
W_VOTE_UNIT = 1.0
"""Added to a unit's score when every sample names it first."""
POSITION = (1.0, 0.6, 0.4)
"""How much the first, second and third answer line of a sample count."""
TIMEOUT_S = 60.0

SYSTEM = ("You locate code. Given an issue and a map of a repository's likely files, you "
          "say where the change that fixes the issue belongs, and nothing else.")


@dataclass
class Votes:
    """What the model's samples said, and what it cost."""

    samples: int = 0
    answered: int = 0
    """Samples that named at least one file or unit of the map."""
    files: dict[str, float] = field(default_factory=dict)
    units: dict[int, float] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def record(self) -> dict[str, object]:
        """For run.json."""
        top = sorted(self.files.items(), key=lambda kv: -kv[1])[:3]
        return {"samples": self.samples, "answered": self.answered,
                "files": [p for p, _ in top], "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "seconds": round(self.seconds, 3)}


def compact_map(index: RepoIndex, ranking: Ranking) -> tuple[str, dict[str, list[int]]]:
    """The map shown to the model, and the units listed per file (indices into index.units)."""
    lines: list[str] = []
    listed: dict[str, list[int]] = {}
    by_file: dict[str, list[tuple[float, int]]] = {}
    for k, score in ranking.units.items():
        by_file.setdefault(index.units[k].path, []).append((score, k))
    for path, _ in ranking.files[:MAP_FILES]:
        best = [k for _, k in sorted(by_file.get(path, []), reverse=True)
                if not index.units[k].qualname.startswith("<")][:MAP_UNITS]
        listed[path] = best
        names = ", ".join(index.units[k].qualname for k in best)
        lines.append(f"{path}: {names}" if names else path)
    return "\n".join(lines), listed


def ask(model: Model, task_id: str, statement: str, index: RepoIndex, ranking: Ranking,
        samples: int, deadline: float) -> Votes:
    """`samples` requests at once; their votes (nothing when none answers sensibly)."""
    votes = Votes(samples=samples)
    if samples < 1 or not ranking.files:
        return votes
    text, listed = compact_map(index, ranking)
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": (
            f"Task id: {task_id}/context\n\n# Issue\n{statement.strip()}\n\n"
            f"# Candidate files (path: names defined there)\n{text}\n\n"
            "Which files and functions must change to fix the issue? Answer with at most three "
            "lines, the most likely first, each `path` or `path::Name` taken from the list "
            "above, and nothing else.")},
    ]
    began = time.monotonic()
    until = min(deadline, began + TIMEOUT_S)
    with ThreadPoolExecutor(max_workers=samples) as pool:
        futures = [pool.submit(model.complete, messages, deadline=until)
                   for _ in range(samples)]
        for future in futures:
            try:
                completion = future.result()
            except Exception:  # noqa: BLE001 - a vote that fails is a vote not cast
                continue
            votes.prompt_tokens += completion.prompt_tokens
            votes.completion_tokens += completion.completion_tokens
            if _count(completion.text, index, listed, votes):
                votes.answered += 1
    votes.seconds = time.monotonic() - began
    return votes


def _count(answer: str, index: RepoIndex, listed: dict[str, list[int]], votes: Votes) -> bool:
    """Add one sample's votes; True when it named anything on the map."""
    named: list[tuple[str, int | None]] = []
    paths = sorted(listed, key=len, reverse=True)  # the longest path a line holds wins
    for line in answer.splitlines():
        path = next((p for p in paths if p in line), None)
        if path is None:
            continue
        rest = line.split(path, 1)[1]
        unit = None
        if "::" in rest:
            name = rest.split("::", 1)[1].strip().strip("`'\" ").split()[0] if rest.split(
                "::", 1)[1].strip() else ""
            unit = next((k for k in listed[path] if name and (
                index.units[k].qualname == name
                or index.units[k].qualname.endswith("." + name))), None)
        if (path, unit) not in named:
            named.append((path, unit))
        if len(named) == len(POSITION):
            break
    files_seen: set[str] = set()
    for position, (path, unit) in enumerate(named):
        weight = POSITION[position] / max(1, votes.samples)
        if path not in files_seen:
            files_seen.add(path)
            votes.files[path] = votes.files.get(path, 0.0) + weight
        if unit is not None:
            votes.units[unit] = votes.units.get(unit, 0.0) + weight
    return bool(named)


def merged(ranking: Ranking, votes: Votes) -> Ranking:
    """The model-free ranking with the votes added."""
    if not votes.answered:
        return ranking
    files = {path: score + W_VOTE_FILE * votes.files.get(path, 0.0)
             for path, score in ranking.files}
    units = dict(ranking.units)
    for k, weight in votes.units.items():
        units[k] = units.get(k, 0.0) + W_VOTE_UNIT * weight
    ordered = sorted(files.items(), key=lambda kv: (-kv[1], kv[0]))
    return Ranking(ordered, units, ranking.terms)

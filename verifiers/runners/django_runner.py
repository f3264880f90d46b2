"""Django's `./tests/runtests.py`, graded per test from unittest's verbosity-2 lines,
`test_name (module.Class) ... ok|FAIL|ERROR|skipped ...` (Python >= 3.11 writes
`(module.Class.test_name)`, read as the same id; a test with a docstring puts it on the next
line before ` ... outcome`). Ids are `test_name (module.Class)`; the run's labels are the ids'
modules (`module.Class` -> `module`), or with whole files the task's test files turned into
labels (`tests/admin_views/tests.py` -> `admin_views.tests`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ooda.verifiers.runners.output import OutputRunner

DJANGO_CMD = "./tests/runtests.py --verbosity 2 --parallel 1"
_LINE = re.compile(
    r"^(?P<name>\w+) \((?P<where>[\w.]+)\)(?:\n[^\n]*?)? \.\.\. "
    r"(?P<outcome>ok|FAIL|ERROR|skipped|expected failure|unexpected success)",
    re.MULTILINE,
)
_OUTCOMES = {"ok": "passed", "FAIL": "failed", "ERROR": "error", "skipped": "skipped",
             "expected failure": "xfailed", "unexpected success": "failed"}


def django_outcomes(output: str) -> dict[str, str]:
    """`test_name (module.Class)` -> outcome, from runtests.py's verbosity-2 output."""
    found: dict[str, str] = {}
    for match in _LINE.finditer(output):
        name, where = match.group("name"), match.group("where")
        if where.endswith("." + name):  # Python >= 3.11: (module.Class.test_name)
            where = where[: -len(name) - 1]
        found[f"{name} ({where})"] = _OUTCOMES[match.group("outcome")]
    return found


def django_labels(ids: Sequence[str], test_files: Sequence[str], whole_files: bool) -> list[str]:
    """The test labels runtests.py is given."""
    if whole_files and test_files:
        labels = [_file_label(f) for f in test_files if f.endswith(".py")]
        return list(dict.fromkeys(label for label in labels if label))
    modules = []
    for test_id in ids:
        match = re.match(r"^\w+ \(([\w.]+)\)$", test_id.strip())
        if match:
            modules.append(match.group(1).rsplit(".", 1)[0])
    return list(dict.fromkeys(modules))


def _file_label(path: str) -> str | None:
    """`tests/admin_views/tests.py` -> `admin_views.tests` (None: not under tests/)."""
    parts = path.removesuffix(".py").split("/")
    if len(parts) < 2 or parts[0] != "tests":
        return None
    return ".".join(parts[1:])


RUNNER = OutputRunner(
    kind="django",
    id_format="test_name (module.TestCase)",
    default_cmd=DJANGO_CMD,
    arguments=lambda request: django_labels(request.ids, request.test_files,
                                            request.whole_files),
    outcomes=django_outcomes,
)

"""SWE-bench instances (`.jsonl`) → tasks, from local clones of their repositories.

Each line holds `instance_id, repo, base_commit, problem_statement, patch, test_patch,
FAIL_TO_PASS, PASS_TO_PASS` (the two lists may be JSON-encoded strings, as in the published
data sets). The repository `owner/name` is read from `REPOS_DIR/owner__name`, a local clone
(bare or not); a task's repo is a fresh export of that clone at `base_commit` (`git archive`,
so nothing of the clone's working tree or history leaks in). `patch` is the gold patch and
`test_patch` the hidden tests, applied only when verifying.

With a `version` (as the published data sets have), the task gets its environment from the
per-repository, per-version specs (tasks/importers/swebench_env.py: `[environment]`, an
unknown repository or version or a runner ooda cannot grade is a UsageError at import) and
runs its test files whole as the harness does (`run_test_files`); junk test ids are dropped.
`environment_setup_commit` is recorded; the environment installs the repository at
base_commit (an editable install, so the candidate's code is what imports).

`import_swebench` writes task directories (`ooda tasks import swebench`); `ooda eval` reads
the `.jsonl` directly and exports each repo only while its task runs (`materialize`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import UsageError
from ooda.agent.support.git import first_line, git
from ooda.agent.support.tarsafe import extract_all
from ooda.tasks.importers.common import check_dest, select, toml_list, toml_str
from ooda.tasks.importers.swebench_env import (
    environment_table,
    environment_toml,
    usable_ids,
    with_conda_packages,
)
from ooda.tasks.loader import Task, VerifierOptions

REQUIRED_KEYS = (
    "instance_id", "repo", "base_commit", "problem_statement", "patch", "FAIL_TO_PASS",
)
"""Keys every instance must have (`test_patch` and `PASS_TO_PASS` may be missing or empty)."""

VERIFIER_TIMEOUT_S = 1800.0
"""Per-verifier limit for SWE-bench tasks, the harness's own per-instance timeout: real
projects' test files run whole are slow (sympy's test_matrices.py took over 300 s here on a
loaded 2-core machine, and a timeout on the base is a broken environment, not a verdict)."""

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+@-]*$")
_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_GIT_TIMEOUT_S = 600.0


@dataclass
class Instance:
    """One SWE-bench instance, validated."""

    instance_id: str
    repo: str
    """`owner/name` on GitHub."""
    base_commit: str
    problem_statement: str
    patch: str
    """The gold patch."""
    test_patch: str
    fail_to_pass: list[str]
    pass_to_pass: list[str] = field(default_factory=list)
    version: str | None = None
    """SWE-bench's version of the repository ("4.5"), which picks the environment."""
    environment_setup_commit: str | None = None
    environment: dict[str, Any] | None = None
    """The `[environment]` table (from the specs, when there is a version)."""
    dropped: list[str] = field(default_factory=list)
    """Junk test ids left out of the lists (`[100%]`)."""

    @property
    def clone_name(self) -> str:
        """The directory name of the repository's clone under --repos-dir."""
        return self.repo.replace("/", "__")


def read_instances(src: Path, only: Sequence[str] | None = None) -> list[Instance]:
    """Read and validate a SWE-bench `.jsonl` (blank lines skipped); `only` picks ids.

    Raises UsageError naming the file and line of the first bad instance."""
    try:
        text = src.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise UsageError(f"{src}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{src}: cannot read: {exc}") from exc
    instances: list[Instance] = []
    seen: set[str] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{src}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: not JSON: {exc.msg}") from exc
        if not isinstance(row, dict):
            raise UsageError(f"{where}: expected a JSON object per line")
        inst = _instance(row, where)
        if inst.instance_id in seen:
            raise UsageError(f"{where}: instance_id {inst.instance_id!r} appears twice")
        seen.add(inst.instance_id)
        instances.append(inst)
    if not instances:
        raise UsageError(f"{src}: no SWE-bench instances")
    wanted = select([i.instance_id for i in instances], only, "instance_id")
    keep = set(wanted)
    return [i for i in instances if i.instance_id in keep]


def _instance(row: dict[str, Any], where: str) -> Instance:
    missing = [k for k in REQUIRED_KEYS if k not in row]
    if missing:
        raise UsageError(f"{where}: missing key(s) {', '.join(missing)}")
    for key in ("instance_id", "repo", "base_commit", "problem_statement", "patch"):
        if not isinstance(row[key], str) or not row[key].strip():
            raise UsageError(f"{where}: {key!r} must be a non-empty string")
    test_patch = row.get("test_patch") or ""
    if not isinstance(test_patch, str):
        raise UsageError(f"{where}: 'test_patch' must be a string")
    instance_id = row["instance_id"]
    if not _ID_RE.match(instance_id):
        raise UsageError(f"{where}: instance_id {instance_id!r} is not usable as a task id")
    if not _REPO_RE.match(row["repo"]):
        raise UsageError(f"{where}: repo {row['repo']!r} is not owner/name")
    if not re.fullmatch(r"[0-9a-fA-F]{4,64}", row["base_commit"]):
        raise UsageError(f"{where}: base_commit {row['base_commit']!r} is not a commit hash")
    version = row.get("version")
    if version is not None and not isinstance(version, str | int | float):
        raise UsageError(f"{where}: 'version' must be a string")
    environment = None
    if version is not None:
        environment = environment_table(row["repo"], str(version), where)
    kind = str(((environment or {}).get("runner") or {}).get("kind", "pytest"))
    fail_to_pass, junk = usable_ids(
        _test_list(row["FAIL_TO_PASS"], "FAIL_TO_PASS", where), kind)
    pass_to_pass, junk_p2p = usable_ids(
        _test_list(row.get("PASS_TO_PASS") or [], "PASS_TO_PASS", where), kind)
    if not fail_to_pass:
        raise UsageError(f"{where}: FAIL_TO_PASS is empty: nothing would show a fix")
    setup = row.get("environment_setup_commit")
    return Instance(
        instance_id=instance_id,
        repo=row["repo"],
        base_commit=row["base_commit"],
        problem_statement=row["problem_statement"],
        patch=_with_newline(row["patch"]),
        test_patch=_with_newline(test_patch),
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        version=None if version is None else str(version),
        environment_setup_commit=setup if isinstance(setup, str) and setup else None,
        environment=environment,
        dropped=junk + junk_p2p,
    )


def _test_list(value: object, key: str, where: str) -> list[str]:
    """A list of test ids, given as a JSON array or as a string holding one."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: {key} is a string but not a JSON list") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise UsageError(f"{where}: {key} must be a list of test ids")
    return list(value)


def _with_newline(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


# --------------------------------------------------------------------------- clones


def clone_for(inst: Instance, repos_dir: Path) -> Path:
    """The local clone of the instance's repository; UsageError when it is missing."""
    clone = repos_dir / inst.clone_name
    if not clone.is_dir():
        raise UsageError(
            f"{inst.instance_id}: no clone of {inst.repo} in {repos_dir} "
            f"(expected {clone}, e.g. git clone https://github.com/{inst.repo} {clone})"
        )
    return clone


def check_commits(instances: Sequence[Instance], repos_dir: Path) -> None:
    """Every instance's clone exists and holds its base commit (one git call per clone)."""
    problems = missing_commits(instances, repos_dir)
    if problems:
        raise UsageError(next(iter(problems.values())))


def missing_commits(instances: Sequence[Instance], repos_dir: Path) -> dict[str, str]:
    """instance_id -> why it cannot be exported (no clone, or no base commit in it), for the
    instances that cannot; one git call per clone."""
    by_clone: dict[Path, list[Instance]] = {}
    problems: dict[str, str] = {}
    for inst in instances:
        try:
            by_clone.setdefault(clone_for(inst, repos_dir), []).append(inst)
        except UsageError as exc:
            problems[inst.instance_id] = str(exc)
    for clone, group in by_clone.items():
        query = "".join(f"{i.base_commit}^{{commit}}\n" for i in group)
        out = _git(clone, ["cat-file", "--batch-check"], stdin=query).decode(errors="replace")
        for inst, answer in zip(group, out.splitlines(), strict=False):
            if answer.endswith(" missing"):
                problems[inst.instance_id] = (
                    f"{inst.instance_id}: base_commit {inst.base_commit} not found in {clone} "
                    "(fetch it, or clone the full history)")
    return problems


def export_repo(clone: Path, commit: str, dest: Path) -> None:
    """Write the tree of `commit` in `clone` into the new directory `dest` (git archive)."""
    dest.mkdir(parents=True, exist_ok=False)
    try:
        proc = subprocess.Popen(
            ["git", "-C", str(clone), "archive", "--format=tar", commit],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        raise UsageError(f"cannot run git: {exc}") from exc
    assert proc.stdout is not None and proc.stderr is not None
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as archive:
            extract_all(archive, dest, skip_unsafe=True)
    except tarfile.TarError as exc:
        proc.kill()
        proc.wait()
        err = proc.stderr.read().decode(errors="replace").strip()
        raise UsageError(
            f"cannot export {commit} from {clone}: {err.splitlines()[0] if err else exc}"
        ) from exc
    finally:
        proc.stdout.close()
    err_text = proc.stderr.read().decode(errors="replace").strip()
    proc.stderr.close()
    if proc.wait() != 0:
        first = err_text.splitlines()[0] if err_text else "git archive failed"
        raise UsageError(f"cannot export {commit} from {clone}: {first}")


def _git(clone: Path, args: list[str], stdin: str = "") -> bytes:
    try:
        done = git(clone, *args, stdin=stdin.encode(), timeout_s=_GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"git {' '.join(args)} in {clone} failed: {exc}") from exc
    if done.returncode != 0:
        raise UsageError(f"{clone}: not a usable git clone: {first_line(done.stderr)}")
    return done.stdout


# --------------------------------------------------------------------------- tasks


def instance_task(inst: Instance, repo: Path, root: Path | None = None) -> Task:
    """The Task for `inst` whose code (at base_commit) is already in `repo`."""
    own = inst.environment is not None  # the repository's tools, not ooda's ruff and mypy
    return Task(
        id=inst.instance_id,
        statement=inst.problem_statement,
        repo=repo,
        fail_to_pass=list(inst.fail_to_pass),
        pass_to_pass=list(inst.pass_to_pass),
        gold_patch=inst.patch,
        test_patch=inst.test_patch or None,
        verifiers=VerifierOptions(ruff=not own, mypy=not own, security=not own,
                                  timeout_s=VERIFIER_TIMEOUT_S),
        root=root,
        environment=inst.environment,
        run_test_files=own,
    )


def materialize(inst: Instance, repos_dir: Path, workdir: Path) -> Task:
    """Export the instance's repo at base_commit into `workdir`/repo (replacing `workdir`)."""
    if workdir.exists():
        shutil.rmtree(workdir)
    clone = clone_for(inst, repos_dir)
    export_repo(clone, inst.base_commit, workdir / "repo")
    return instance_task(with_clone_facts(inst, clone), workdir / "repo")


def with_clone_facts(inst: Instance, clone: Path) -> Instance:
    """`inst` with what its environment reads from the clone: the optional packages of a
    conda environment file at environment_setup_commit (swebench_env.with_conda_packages)."""
    if inst.environment is None or inst.version is None:
        return inst
    table = with_conda_packages(inst.environment, inst.repo, inst.version, clone,
                                inst.environment_setup_commit or inst.base_commit)
    return dataclasses.replace(inst, environment=table)


def task_toml(inst: Instance) -> str:
    """task.toml for an imported instance."""
    lines = [
        f"# SWE-bench instance {inst.instance_id}: {inst.repo} at {inst.base_commit}"
        + (f", version {inst.version}" if inst.version else "")
        + (f", environment_setup_commit {inst.environment_setup_commit}"
           if inst.environment_setup_commit else ""),
        *(f"# dropped junk test id {toml_str(i)}" for i in inst.dropped),
        f"id = {toml_str(inst.instance_id)}",
        'statement_file = "ISSUE.md"',
        'repo = "repo"',
        f"fail_to_pass = {toml_list(inst.fail_to_pass)}",
        f"pass_to_pass = {toml_list(inst.pass_to_pass)}",
        'gold_patch = "gold.diff"',
    ]
    if inst.test_patch:
        lines.append('test_patch = "tests.diff"')
    if inst.environment is None:
        lines += ["", "[verifiers]", "ruff = true", "mypy = true",
                  f"timeout_s = {VERIFIER_TIMEOUT_S:g}"]
        return "\n".join(lines) + "\n"
    lines += ["run_test_files = true", "", "[verifiers]", f"timeout_s = {VERIFIER_TIMEOUT_S:g}",
              "", environment_toml(inst.environment)]
    return "\n".join(lines)


@dataclass(frozen=True)
class Skipped:
    """An instance the import left out, and why (one line)."""

    instance_id: str
    reason: str


def import_swebench(
    src: Path,
    dest: Path,
    *,
    repos_dir: Path | None = None,
    only: list[str] | None = None,
    overwrite: bool = False,
    skipped: list[Skipped] | None = None,
) -> list[Path]:
    """Write one task directory per instance of the `.jsonl` `src` under `dest`.

    `repos_dir` holds the clones (`owner__name`); each task's repo/ is the clone's tree at
    base_commit. Returns the task directories written, in instance order. An instance that
    cannot be exported (no clone, no base commit, a blob missing from the clone) is appended
    to `skipped` and the import goes on; without a `skipped` list it is a UsageError."""
    if repos_dir is None:
        raise UsageError("swebench: say where the repositories' clones are with --repos-dir DIR")
    if not repos_dir.is_dir():
        raise UsageError(f"--repos-dir {repos_dir}: not a directory")
    instances = read_instances(src, only)
    check_dest(dest, [i.instance_id for i in instances], overwrite)
    problems = missing_commits(instances, repos_dir)
    written: list[Path] = []
    for inst in instances:
        try:
            if inst.instance_id in problems:
                raise UsageError(problems[inst.instance_id])
            written.append(_write_task(inst, repos_dir, dest / inst.instance_id))
        except UsageError as exc:
            if skipped is None:
                raise
            skipped.append(Skipped(inst.instance_id, first_line(str(exc).encode())))
    return written


def _write_task(inst: Instance, repos_dir: Path, root: Path) -> Path:
    if root.exists():
        shutil.rmtree(root)
    clone = clone_for(inst, repos_dir)
    try:
        export_repo(clone, inst.base_commit, root / "repo")
    except UsageError:
        shutil.rmtree(root, ignore_errors=True)  # no half-written task directory
        raise
    inst = with_clone_facts(inst, clone)
    files = {
        "task.toml": task_toml(inst),
        "ISSUE.md": _with_newline(inst.problem_statement),
        "gold.diff": inst.patch,
    }
    if inst.test_patch:
        files["tests.diff"] = inst.test_patch
    for name, text in files.items():
        with (root / name).open("w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    return root

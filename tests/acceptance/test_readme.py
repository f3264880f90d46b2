"""The README from a fresh clone (issue 15.7): its links resolve inside the clone (nothing
outside the project, like ../shared), and its offline commands run top to bottom as written
(the network ones are skipped; the QuixBugs import reads a local copy when there is one)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_helpers import backend_or_skip

ROOT = Path(__file__).resolve().parents[2]
DATASETS = Path(os.environ.get("OODA_DATASETS", ROOT.parent / "shared" / "datasets"))
NEEDS_A_MODEL_OR_NETWORK = ("my-model", "some-model", "--post", "path/to/repo", "<",
                            "ooda daemon", "...", "ooda report", "setup.sh", "ooda ci",
                            "ooda serve")


def commands(readme: str) -> list[str]:
    """The `ooda ...` lines of the README's bash blocks, comments dropped, continuations
    joined."""
    found: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", readme, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("ooda "):
                found.append(line)
    return found


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("fresh") / "ooda"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True)
    return target


def test_readme_links_stay_inside_the_clone(clone: Path) -> None:
    readme = (clone / "README.md").read_text(encoding="utf-8")
    assert "../shared" not in readme
    for link in re.findall(r"\]\(([^)#]+)\)", readme):
        if not link.startswith(("http://", "https://")):
            assert (clone / link).exists(), link


def test_readme_offline_commands_run_from_a_fresh_clone(clone: Path, tmp_path: Path) -> None:
    backend_or_skip("docker")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_"))}
    env["OODA_DAEMON"] = "0"
    ran = []
    for line in commands((clone / "README.md").read_text(encoding="utf-8")):
        if any(marker in line for marker in NEEDS_A_MODEL_OR_NETWORK):
            continue
        line = line.replace("/tmp/", f"{tmp_path}/")
        if "https://github.com/jkoppel/QuixBugs" in line:
            if not (DATASETS / "quixbugs").is_dir():
                pytest.skip("no local QuixBugs copy to stand in for the network")
            line = line.replace("https://github.com/jkoppel/QuixBugs",
                                str(DATASETS / "quixbugs")) + " --only gcd"
        elif "https://" in line:
            continue
        args = shlex.split(line)[1:]
        done = subprocess.run([sys.executable, "-m", "ooda.agent.cli", *args], cwd=clone,
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        ran.append(args[0])
    assert {"doctor", "run", "verify", "tasks"} <= set(ran), ran

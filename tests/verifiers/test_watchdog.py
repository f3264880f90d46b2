"""The security watchdog (verifiers/watchdog/): it halts every vulnerable answer of the
labelled sets at its vulnerable line, in every edit format, and never a safe one, code the base
already has, or a recorded answer; the security stage agrees with every label (a halted answer
is one the stage would fail)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from watchdog_held_out import HELD_OUT, HELD_OUT_2
from watchdog_labelled import CHANGES, Change, variants, vuln_end

from ooda.agent.contracts.protocols import CheckSpec
from ooda.agent.models.answer_styles import restyle
from ooda.agent.sandbox.local import LocalSandbox
from ooda.verifiers.security_check import RULES, SecurityVerifier
from ooda.verifiers.watchdog import BaseCode, Finding, Watchdog, rules_for

ROOT = Path(__file__).resolve().parents[2]
HALT_WITHIN = 400
"""Characters after the vulnerable line's end by which the finding must be made."""


def watchdog_for(files: dict[str, str], **kw: object) -> Watchdog:
    return Watchdog(BaseCode(files.get, lambda: [p for p in files if p.endswith(".py")]),
                    **kw)  # type: ignore[arg-type]


def stream(watchdog: Watchdog, answer: str, chunk: int = 4) -> Finding | None:
    for end in range(chunk, len(answer) + chunk, chunk):
        found = watchdog.observe(answer[:end])
        if found is not None:
            return found
    return None


def check_variant(change: Change, answer: str) -> None:
    found = stream(watchdog_for({change.path: change.base} if change.base else {}), answer)
    if change.expect is None:
        assert found is None, f"halted a safe answer: {found}"
        return
    assert found is not None, "a vulnerable answer streamed to its end"
    assert found.code == change.expect
    after = found.end - vuln_end(answer, change)
    assert 0 <= after <= HALT_WITHIN


@pytest.mark.parametrize(("change", "answer"), [(c, a) for _, c, _, a in variants(CHANGES)],
                         ids=[v for v, *_ in variants(CHANGES)])
def test_tuning_set(change: Change, answer: str) -> None:
    check_variant(change, answer)


@pytest.mark.parametrize(("change", "answer"), [(c, a) for _, c, _, a in variants(HELD_OUT)],
                         ids=[v for v, *_ in variants(HELD_OUT)])
def test_held_out_set(change: Change, answer: str) -> None:
    check_variant(change, answer)


@pytest.mark.parametrize(("change", "answer"), [(c, a) for _, c, _, a in variants(HELD_OUT_2)],
                         ids=[v for v, *_ in variants(HELD_OUT_2)])
def test_second_held_out_set(change: Change, answer: str) -> None:
    check_variant(change, answer)


ALL = CHANGES + HELD_OUT + HELD_OUT_2


@pytest.mark.parametrize("change", ALL, ids=[c.name for c in ALL])
def test_the_security_stage_agrees_with_each_label(tmp_path: Path, change: Change) -> None:
    """Each vulnerable change fails the after-tests stage with the same code; each safe one
    passes it: the watchdog halts only what the stage would fail."""
    base_dir, cand_dir = tmp_path / "base", tmp_path / "cand"
    base_dir.mkdir()
    cand_dir.mkdir()
    if change.base:
        (base_dir / change.path).write_text(change.base)
    (cand_dir / change.path).parent.mkdir(parents=True, exist_ok=True)
    (cand_dir / change.path).write_text(change.after)
    stage = SecurityVerifier()
    check = CheckSpec(changed_files=[change.path], timeout_s=60)
    check.baseline["security"] = stage.baseline(LocalSandbox(base_dir), check)
    result = stage.verify(LocalSandbox(cand_dir), check)
    if change.expect is None:
        assert result.status == "passed", result.summary
    else:
        assert result.status == "failed"
        assert f" {change.expect} " in result.summary, result.summary


# ----------------------------------------------------------------------------- recorded answers


def corpus_answers() -> list[tuple[str, dict[str, str], str]]:
    """(id, repository files, answer) of the edit corpus and the example tasks' replays."""
    import test_edit_corpus as corpus  # tests/agent/edits, on the path below

    found = []
    for case in corpus.load_cases():
        repo = case.headers.get("repo")
        files = corpus.repo_files(repo) if repo else {}
        found.append((f"corpus-{case.name}", files, case.answer))
    for replay in sorted((ROOT / "tasks" / "examples").glob("*/replay.jsonl")):
        repo = replay.parent / "repo"
        files = {p.relative_to(repo).as_posix(): p.read_text() for p in repo.rglob("*.py")}
        prompt = "".join(f"{path}\n```python\n{text}```\n\n" for path, text in files.items())
        for number, line in enumerate(replay.read_text().splitlines(), start=1):
            answer = json.loads(line)["answer"]
            found.append((f"{replay.parent.name}-{number}", files, answer))
            # as `ooda serve --answer-as` rewrites it: whole files, bare definitions
            for style in ("whole-file", "definitions"):
                restyled = restyle(answer, prompt, style)
                if restyled != answer:
                    found.append((f"{replay.parent.name}-{number}-{style}", files, restyled))
    return found


def test_recorded_answers_never_halt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "agent" / "edits"))
    answers = corpus_answers()
    assert len(answers) > 60
    halted = [(name, found) for name, files, answer in answers
              if (found := stream(watchdog_for(files), answer, chunk=3)) is not None]
    assert halted == []


# ----------------------------------------------------------------------------- behaviour

SHELL_BASE = "import subprocess\n\n\ndef run(cmd):\n    return subprocess.run(cmd)\n"
SHELL_ANSWER = """The fix:

tool.py
<<<<<<< SEARCH
    return subprocess.run(cmd)
=======
    return subprocess.run(cmd, shell=True)
>>>>>>> REPLACE
"""


def test_the_finding_says_rule_line_why_and_instead() -> None:
    found = stream(watchdog_for({"tool.py": SHELL_BASE}), SHELL_ANSWER)
    assert found is not None
    assert (found.code, found.name, found.path) == ("S602", "shell-true", "tool.py")
    assert found.line == "return subprocess.run(cmd, shell=True)"
    text = found.feedback()
    for part in ("tool.py", "S602 shell-true", "return subprocess.run(cmd, shell=True)",
                 found.why, found.instead):
        assert part in text


def test_halts_at_the_line_whatever_the_chunking() -> None:
    ends = set()
    for chunk in (1, 2, 7, 50, len(SHELL_ANSWER)):
        found = stream(watchdog_for({"tool.py": SHELL_BASE}), SHELL_ANSWER, chunk)
        assert found is not None
        ends.add(found.end)
    assert ends == {SHELL_ANSWER.index(">>>>>>>")}


def test_an_unfinished_line_waits_for_its_newline() -> None:
    watchdog = watchdog_for({"tool.py": SHELL_BASE})
    cut = SHELL_ANSWER.index("shell=True") + len("shell=True)")
    assert watchdog.observe(SHELL_ANSWER[:cut]) is None
    assert watchdog.observe(SHELL_ANSWER[: cut + 1]) is not None


@pytest.mark.parametrize("answer", [
    # the SEARCH part quotes the base, it adds nothing
    "tool.py\n<<<<<<< SEARCH\n    x = eval(text)\n=======\n    x = int(text)\n>>>>>>> REPLACE\n",
    # prose and a diff's removed lines add nothing
    "Never call eval(text) or pickle.loads(data) here.\n\n```diff\n--- a/tool.py\n"
    "+++ b/tool.py\n@@ -1 +1 @@\n-x = eval(text)\n+x = int(text)\n```\n",
    # comments and strings are not code
    "```python\ndef f(text):\n    # eval(text) would be unsafe\n    return 'eval(text)'\n```\n",
    # a method named eval, ast.literal_eval
    "```python\ndef f(model, text):\n    model.eval()\n    return ast.literal_eval(text)\n```\n",
    # a parameter default, not a call
    "```python\ndef run(cmd, shell=True):\n    return cmd\n```\n",
    # SQL with parameters; SQL words in a plain message
    "```python\ndef f(cur, x):\n    cur.execute('SELECT a FROM t WHERE b = %s', (x,))\n"
    "    print('select one item from the menu')\n```\n",
    # a reasoning model's thinking, before its answer
    "<think>\nCould I just call eval(text)?\n```python\nx = eval(text)\n```\nNo.\n</think>\n"
    "```python\ndef f(text):\n    return int(text)\n```\n",
    # code that is not Python
    "```bash\neval \"$(ssh-agent -s)\"\n```\n\nnotes.md\n<<<<<<< SEARCH\n=======\n"
    "Use `yaml.load(f)` never.\n>>>>>>> REPLACE\n",
])
def test_what_is_not_an_added_finding(answer: str) -> None:
    assert stream(watchdog_for({"tool.py": "x = eval(text)\n"}), answer) is None


def test_a_secret_in_any_file_halts_and_is_not_repeated() -> None:
    key = "AKIA" + "Q7RT2ZXW4PLM9NBV"
    answer = f"config.ini\n<<<<<<< SEARCH\n=======\n[aws]\nkey = {key}\n>>>>>>> REPLACE\n"
    found = stream(watchdog_for({}), answer)
    assert found is not None and found.name == "aws-access-key-id"
    assert key not in found.feedback()


def test_a_block_replacing_a_finding_with_the_same_finding_is_the_base() -> None:
    base = {"tool.py": "import yaml\n\n\ndef load(f):\n    return yaml.load(f)\n"}
    answer = ("tool.py\n<<<<<<< SEARCH\n    return yaml.load(f)\n=======\n"
              "    data = yaml.load(f)\n    return data\n>>>>>>> REPLACE\n")
    assert stream(watchdog_for(base), answer) is None
    second = answer + answer.replace("    return yaml.load(f)\n=======", "=======", 1)
    assert stream(watchdog_for(base), second) is not None


def test_a_kept_finding_makes_no_room_for_a_new_one() -> None:
    """A diff's context line with the base's eval stays in the file: an added eval is new
    (the stage counts two against the base's one), unlike one that replaces a removed line."""
    base = {"tool.py": "def f(x):\n    return eval(x)\n"}
    added = ("```diff\n--- a/tool.py\n+++ b/tool.py\n@@ -1,2 +1,4 @@\n def f(x):\n"
             "     return eval(x)\n+def g(y):\n+    return eval(y)\n```\n")
    assert stream(watchdog_for(base), added) is not None
    replaced = ("```diff\n--- a/tool.py\n+++ b/tool.py\n@@ -1,2 +1,2 @@\n def f(x):\n"
                "-    return eval(x)\n+    return eval(x, {})\n```\n")
    assert stream(watchdog_for(base), replaced) is None
    key = "AKIA" + "Q7RT2ZXW4PLM9NBV"
    secret_base = {"c.py": f'A = "{key}"\n'}
    kept_secret = ("```diff\n--- a/c.py\n+++ b/c.py\n@@ -1 +1,2 @@\n"
                   f' A = "{key}"\n+B = "{key[:-1]}X"\n```\n')
    assert stream(watchdog_for(secret_base), kept_secret) is not None


def test_a_multiline_call_is_judged_whole() -> None:
    base = {"conf.py": "import yaml\n"}
    safe = ("```python\ndef load(f):\n    return yaml.load(\n        f,\n"
            "        Loader=yaml.SafeLoader,\n    )\n```\n")
    assert stream(watchdog_for(base), safe) is None
    unsafe = safe.replace("yaml.SafeLoader", "yaml.FullLoader")
    found = stream(watchdog_for(base), unsafe)
    assert found is not None and found.line == "return yaml.load("


def test_per_task_rules_select_the_call_rules() -> None:
    assert {r.name for r in rules_for(None, RULES)} >= {"eval", "sql-format", "shell-true"}
    assert [r.name for r in rules_for(["S506"], RULES)] == ["yaml-load"]
    assert {r.name for r in rules_for(["S6"], RULES)} == {"shell-true", "shell-true-call",
                                                          "os-system", "sql-format"}
    assert [r.name for r in rules_for(["S602"], RULES)] == ["shell-true"]
    assert rules_for([], RULES) == ()
    watchdog = watchdog_for({"tool.py": SHELL_BASE}, call_rules=rules_for(["S506"], RULES))
    assert stream(watchdog, SHELL_ANSWER) is None
    no_secrets = watchdog_for({}, secrets=False)
    assert stream(no_secrets, "```\n-----BEGIN RSA PRIVATE KEY-----\n```\n") is None


STAGE_ONLY = {
    # names the watchdog cannot resolve from one statement: the stage (ruff) can
    "from-import": ("import yaml\n", "from yaml import load\n\n\ndef read(f):\n"
                    "    return load(f)\n", "S506"),
    "alias": ("import pickle as pk\n", "import pickle as pk\n\n\ndef read(b):\n"
              "    return pk.loads(b)\n", "S301"),
    "ssh-client-policy": ("import paramiko\n", "import paramiko\n\n\ndef connect(h):\n"
                          "    c = paramiko.SSHClient()\n"
                          "    c.set_missing_host_key_policy(paramiko.AutoAddPolicy())\n"
                          "    return c\n", "S507"),
}


@pytest.mark.parametrize("name", list(STAGE_ONLY))
def test_what_only_the_stage_catches(tmp_path: Path, name: str) -> None:
    """Documented in docs/SECURITY.md: the watchdog lets these stream; the stage fails them."""
    base, after, code = STAGE_ONLY[name]
    change = Change(name, "mod.py", base, after, code, formats=("whole_file",))
    answer = f"mod.py\n```python\n{after}```\n"
    assert stream(watchdog_for({"mod.py": base}), answer) is None
    test_the_security_stage_agrees_with_each_label(tmp_path, change)


def test_the_answer_after_a_thinking_block_is_watched() -> None:
    answer = ("<think>\nplan</think>The fix:\n```python\ndef f(text):\n    return eval(text)\n"
              "```\n")
    found = stream(watchdog_for({}), answer)
    assert found is not None and found.name == "eval"


@pytest.mark.parametrize(("line", "rule"), [
    ("subprocess.Popen(cmd, shell=1)", "shell-true"),  # ruff: a truthy shell
    ("os.popen2(cmd)", "os-system"),
    ("yaml.load(s, yaml.Loader)", "yaml-load"),
])
def test_shapes_ruff_reports_are_halted(line: str, rule: str) -> None:
    found = stream(watchdog_for({}), f"```python\ndef f(s, cmd):\n    {line}\n```\n")
    assert found is not None and found.name == rule


@pytest.mark.parametrize("line", [
    "yaml.unsafe_load(s)",  # ruff does not report these: neither does the watchdog
    "yaml.full_load(s)",
    "subprocess.run(cmd, shell=bool(s))",
    "requests.get(s, verify=0)",
])
def test_shapes_ruff_does_not_report_are_not_halted(line: str) -> None:
    assert stream(watchdog_for({}), f"```python\ndef f(s, cmd):\n    {line}\n```\n") is None

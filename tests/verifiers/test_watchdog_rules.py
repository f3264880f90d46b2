"""The watchdog's call rules against ruff itself: every probe statement the watchdog halts on is
one ruff reports with the rule's code (the security stage would fail it), and the probes meant
to halt do. One ruff run over all the probes, each in its own function of one module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ooda.verifiers.security_check import RULES
from ooda.verifiers.watchdog import BaseCode, Watchdog

IMPORTS = """\
import os
import pickle
import shelve
import ssl
import subprocess
import tempfile
import marshal
import telnetlib
import ftplib

import httpx
import jinja2
import requests
import yaml
"""

HALT = [
    "subprocess.run(cmd, shell=True)",
    "subprocess.Popen(\n        cmd,\n        shell=True,\n    )",
    "subprocess.check_output('ls ' + cmd, shell=1)",
    "foo(cmd, shell=True)",
    "os.system(cmd)",
    "os.popen(cmd).read()",
    "os.popen2(cmd)",
    "subprocess.getoutput(cmd)",
    "pickle.loads(data)",
    "pickle.load(data)",
    "pickle.Unpickler(data)",
    "shelve.open(cmd)",
    "marshal.loads(data)",
    "yaml.load(data)",
    "yaml.load(data, Loader=yaml.Loader)",
    "yaml.load(data, Loader=yaml.FullLoader)",
    "yaml.load(data, Loader=yaml.BaseLoader)",
    "yaml.load(\n        data,\n        Loader=yaml.UnsafeLoader,\n    )",
    "requests.get(url, verify=False)",
    "requests.post(url, json={}, timeout=5, verify=False)",
    "requests.request('GET', url, verify=False)",
    "httpx.get(url, verify=False)",
    "httpx.Client(verify=False)",
    "ssl._create_unverified_context()",
    "ssl.wrap_socket(sock, ssl_version=ssl.PROTOCOL_TLSv1)",
    "eval(data)",
    "eval(compile(data, 'f', 'eval'))",
    "exec(data)",
    "cur.execute(f\"SELECT * FROM users WHERE id = {data}\")",
    "cur.execute(\"SELECT * FROM users WHERE name = '\" + data + \"'\")",
    "cur.execute(\"SELECT * FROM users WHERE name = '%s'\" % data)",
    "cur.execute(\"DELETE FROM users WHERE id = {}\".format(data))",
    "cur.execute(\"UPDATE users SET a = 1 WHERE b = \" + data)",
    "cur.execute(\"INSERT INTO users VALUES ('%s')\" % data)",
    "q = f\"\"\"\n        SELECT id\n        FROM users WHERE id = {data}\n    \"\"\"",
    "msg = f'select an item from the list {data}'",
    "tempfile.mktemp()",
    "jinja2.Environment(autoescape=False)",
    "telnetlib.Telnet(url)",
    "ftplib.FTP(url)",
]
"""Statements the watchdog halts on (and ruff reports)."""

PASS = [
    "subprocess.run([cmd], shell=False)",
    "subprocess.run(cmd, shell=bool(data))",
    "pickle.dumps(data)",
    "yaml.safe_load(data)",
    "yaml.load(data, Loader=yaml.SafeLoader)",
    "yaml.load(data, yaml.SafeLoader)",
    "yaml.load(data, Loader=yaml.CSafeLoader)",
    "yaml.load_all(data)",
    "yaml.unsafe_load(data)",
    "requests.get(url, timeout=5)",
    "requests.Session().get(url, verify=False)",
    "requests.get(url, verify=0)",
    "ssl.SSLContext(protocol=ssl.PROTOCOL_TLSv1)",
    "jinja2.Template('x', autoescape=False)",
    "model.eval()",
    "frame.eval('a + b')",
    "ast.literal_eval(data)",
    "cur.execute('SELECT * FROM users WHERE id = ?', (data,))",
    "cur.execute('SELECT * FROM t WHERE a LIKE %s', (f'%{data}%',))",
    "log.info(f'deleted {data} rows')",
    "x = 'select' + data + 'from y'",
    "x = 'Selected ' + data + ' from the list'",
    "print('never call eval(data) or pickle.loads(data)')",
    "# subprocess.run(cmd, shell=True)",
    "ftplib.FTP_TLS(url)",
]
"""Statements the watchdog lets stream (ruff reports none of them, or the stage has no rule)."""


def module(probes: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """A module with each probe in its own function; each probe's (first, last) line."""
    lines = IMPORTS.splitlines()
    spans = []
    for number, probe in enumerate(probes):
        lines += ["", "", f"def probe_{number}(cmd, data, url, cur, sock, model, frame, ast, "
                  "log, foo):"]
        body = ("    " + probe).splitlines()
        spans.append((len(lines) + 1, len(lines) + len(body)))
        lines += [*body, "    pass"]  # a probe that is only a comment is no body
    return "\n".join(lines) + "\n", spans


def ruff_lines(source: str, tmp_path: Path) -> dict[int, set[str]]:
    path = tmp_path / "probes.py"
    path.write_text(source)
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--ignore-noqa", "--select",
         ",".join(RULES), "--output-format", "json", str(path)],
        capture_output=True, text=True, check=False)
    found: dict[int, set[str]] = {}
    for diag in json.loads(proc.stdout or "[]"):
        found.setdefault(diag["location"]["row"], set()).add(diag["code"])
    return found


def watchdog_finding(probe: str) -> str | None:
    """The code the watchdog halts a whole-file answer holding the probe on, or None."""
    source, _ = module([probe])
    answer = f"probes.py\n```python\n{source}```\n"
    found = Watchdog(BaseCode(lambda path: None, list)).observe(answer)
    return found.code if found else None


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> list[set[str]]:
    """Per probe of HALT + PASS: the codes ruff reports in its lines."""
    source, spans = module(HALT + PASS)
    lines = ruff_lines(source, tmp_path_factory.mktemp("ruff"))
    return [set().union(*(lines.get(n, set()) for n in range(a, b + 1))) for a, b in spans]


@pytest.mark.parametrize("number", range(len(HALT)), ids=HALT)
def test_halted_and_reported_by_ruff(number: int, reported: list[set[str]]) -> None:
    code = watchdog_finding(HALT[number])
    assert code is not None, "not halted"
    assert code in reported[number], f"ruff reports {reported[number] or 'nothing'}"


@pytest.mark.parametrize("number", range(len(PASS)), ids=PASS)
def test_not_halted(number: int, reported: list[set[str]]) -> None:
    code = watchdog_finding(PASS[number])
    assert code is None, f"halted on {code}; ruff reports {reported[len(HALT) + number]}"

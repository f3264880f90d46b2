"""The security findings ooda knows, as data: the secret formats the security stage scans text
for, and the line rules the stream watchdog (verifiers/watchdog/) halts an answer on.

Both checks share them so that they agree: the security stage (security_check.py: ruff's `S`
rules and the secret scan, after the tests) is the complete check; the watchdog is the fast
one, run on the lines an answer adds while it streams. Each watchdog rule anticipates one stage
code (`code`: a ruff `S` rule, or SECRET) and matches only what that code reports — checked
against ruff itself by tests/verifiers/test_watchdog_rules.py — so that a halted answer is one
the stage would have failed, and a task's `security_rules` select both.

Sources: the call rules follow ruff's flake8-bandit port (its documented rule semantics, checked
against `ruff check --select S` output), the token formats are the published prefixes of each
provider's keys (as detect-secrets and gitleaks list them); CodeShield's Insecure Code Detector
was read as a reference for which classes matter in generated code. No code is copied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("aws-access-key-id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA)[A-Z0-9]{16}\b")),
    (
        "aws-secret-access-key",
        re.compile(r"(?i)aws.{0,20}secret.{0,20}[=:]\s*[\"'][A-Za-z0-9/+=]{40}[\"']"),
    ),
    ("private-key", re.compile(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY(?: BLOCK)?-----")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{60,})")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("stripe-live-key", re.compile(r"\b[rs]k_live_[A-Za-z0-9]{20,}")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    (
        "credential-literal",
        re.compile(
            r"(?i)\b\w*(?:password|passwd|secret|api_?key|access_?key|auth_?token|private_?key)"
            r"\w*\s*[:=]\s*[\"']([^\"'\s]{12,})[\"']"
        ),
    ),
)
"""(kind, pattern) of the secret scan: fixed token formats, then one keyword rule."""

_PLACEHOLDER = re.compile(r"(?i)example|dummy|changeme|placeholder|your[_-]|<|\*{3}|x{6}|\$\{")
"""A credential-literal match that reads like a placeholder is not reported."""

_SECRET_HINT = re.compile(
    r"AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|(?i:secret|private|passw|api_?key|access_?key|"
    r"auth_?token)|gh[pousr]_|github_pat_|xox|k_live_|AIza")
"""A cheap first look: a line without any of these holds none of the secrets above."""


def find_secret(line: str) -> tuple[str, int, int] | None:
    """(kind, start, end) of the first secret-like literal on `line`, or None."""
    if not _SECRET_HINT.search(line):
        return None
    for kind, pattern in SECRET_PATTERNS:
        match = pattern.search(line)
        if match is None:
            continue
        if kind == "credential-literal" and _PLACEHOLDER.search(match.group(1)):
            continue
        return kind, match.start(), match.end()
    return None


SECRET_ADVICE: dict[str, tuple[str, str]] = {
    "aws-access-key-id": (
        "an AWS access key id written into the code: anyone who reads the repository can use it",
        "read it from the environment (os.environ['AWS_ACCESS_KEY_ID']) or let boto3 find "
        "the credentials itself"),
    "aws-secret-access-key": (
        "an AWS secret access key written into the code: anyone who reads the repository can "
        "use it", "read it from the environment (os.environ['AWS_SECRET_ACCESS_KEY']) or let "
        "boto3 find the credentials itself"),
    "private-key": (
        "a private key written into the repository: it is no longer private",
        "load the key from a file outside the repository or a secret store, named by "
        "configuration or an environment variable"),
    "github-token": ("a GitHub token written into the code", "read it from the environment"),
    "slack-token": ("a Slack token written into the code", "read it from the environment"),
    "stripe-live-key": ("a live Stripe key written into the code",
                        "read it from the environment"),
    "google-api-key": ("a Google API key written into the code", "read it from the environment"),
    "credential-literal": (
        "a credential (password, secret, API key or token) written into the code as a literal",
        "read it from the environment or the application's configuration"),
}
"""kind -> (why it is a problem, what to write instead)."""


Match = Literal["code", "sql"]
"""What a call rule's pattern is matched against: the statement's code with string contents
masked and comments dropped ("code"), or its string literals as SQL (the S608 rule)."""


@dataclass(frozen=True)
class CallRule:
    """A rule on Python code: one ruff `S` code's finding, matched on a whole statement."""

    name: str
    codes: tuple[str, ...]
    """The ruff rule(s) the security stage reports it as (the first is named); the rule is on
    when a task's `security_rules` select any of them."""
    trigger: re.Pattern[str]
    """A physical line must hold this (in its masked code) for the rule to be looked at."""
    pattern: re.Pattern[str]
    """The finding, on the statement's masked code (strings as `""`, f-strings with
    placeholders as `"^"`, comments dropped), its lines joined by spaces."""
    why: str
    instead: str
    unless: re.Pattern[str] | None = None
    """A statement matching this is no finding (judged once the statement is complete)."""
    call: re.Pattern[str] | None = None
    """Set: `pattern` counts only after this (the call a keyword argument belongs to). Found
    first, then `pattern` searched from its end: two linear searches, never a `.*` between
    them that could backtrack over a long statement."""


def _call(names: str) -> str:
    """A call of one of `names` (a regex alternation), not as an attribute of something else."""
    return rf"(?<![\w.])(?:{names})\s*\("


_SHELL_WHY = ("a command run through the shell (shell=True): text from the input becomes shell "
              "syntax, so `; rm -rf ~` in a file name runs")
_SHELL_INSTEAD = ("pass the command as a list of arguments without shell=True: "
                  "subprocess.run([\"git\", \"log\", path], check=True); shlex.split a fixed "
                  "command")

CALL_RULES: tuple[CallRule, ...] = (
    CallRule(
        "shell-true", ("S602",),
        re.compile(r"\bshell\s*=\s*(?:True|[1-9])"),
        re.compile(r"\bshell\s*=\s*(?:True|[1-9][0-9]*)\b"),  # a truthy literal, as ruff
        _SHELL_WHY, _SHELL_INSTEAD,
        call=re.compile(_call(r"subprocess\.\w+"))),
    CallRule(
        "shell-true-call", ("S604",),  # any other call with a shell
        re.compile(r"\bshell\s*=\s*(?:True|[1-9])"),
        re.compile(r"\bshell\s*=\s*(?:True|[1-9][0-9]*)\b"),
        _SHELL_WHY, _SHELL_INSTEAD,
        call=re.compile(r"\A(?!\s*(?:async\s+)?def\b)[^(]*\(")),
    CallRule(
        "os-system", ("S605",),
        re.compile(r"\bos\.(?:system|popen)|\bgetoutput|\bgetstatusoutput"),
        re.compile(_call(r"os\.system|os\.popen[234]?|subprocess\.getoutput|"
                         r"subprocess\.getstatusoutput")),
        "a command started through the shell (os.system / os.popen / getoutput): input in it "
        "becomes shell syntax",
        "subprocess.run([...], check=True) with the arguments as a list, no shell"),
    CallRule(
        "pickle-loads", ("S301",),
        re.compile(r"pickle|dill|shelve|jsonpickle|read_pickle"),
        re.compile(_call(r"(?:c?[Pp]ickle|_pickle|dill)\.(?:loads?|Unpickler)|shelve\.open|"
                         r"jsonpickle\.decode|(?:pd|pandas)\.read_pickle")),
        "unpickling data (pickle/dill/shelve): a crafted payload runs arbitrary code while "
        "it is loaded",
        "store and read plain data: json.loads / json.load (or a schema'd format) for anything "
        "that can come from outside"),
    CallRule(
        "marshal-loads", ("S302",),
        re.compile(r"marshal"),
        re.compile(_call(r"marshal\.loads?")),
        "marshal.load(s) on data: the format is not safe against crafted input",
        "json.loads for data"),
    CallRule(
        "yaml-load", ("S506",),
        re.compile(r"yaml"),
        re.compile(_call(r"yaml\.load")),
        "yaml.load without a safe loader builds arbitrary Python objects from the document",
        "yaml.safe_load(stream) (or yaml.load(stream, Loader=yaml.SafeLoader))",
        unless=re.compile(r"(?:Loader\s*=\s*|,\s*)(?:yaml\.(?:loader\.)?)?C?SafeLoader\b")),
    CallRule(
        "verify-false", ("S501",),
        re.compile(r"\bverify\s*=\s*False\b"),
        re.compile(r"\bverify\s*=\s*False\b"),
        "TLS certificate checks turned off (verify=False): anyone on the network path can "
        "read and change the traffic",
        "keep verify on (the default); for a private CA pass its bundle: verify=\"/path/ca.pem\"",
        call=re.compile(_call(r"(?:requests|httpx)\.(?:get|options|head|post|put|patch|delete|"
                              r"request|stream|Client|AsyncClient)"))),
    CallRule(
        "unverified-context", ("S323",),
        re.compile(r"_create_unverified_context"),
        re.compile(_call(r"ssl\._create_unverified_context")),
        "an SSL context that checks no certificate and no host name",
        "ssl.create_default_context() (add cafile= for a private CA)"),
    CallRule(
        "eval", ("S307",),
        re.compile(r"\beval\b"),
        re.compile(_call(r"eval")),
        "eval() runs any expression the text holds: input reaching it is code execution",
        "ast.literal_eval for literals, or parse the input explicitly (int(), float(), json)"),
    CallRule(
        "exec", ("S102",),
        re.compile(r"\bexec\b"),
        re.compile(_call(r"exec")),
        "exec() runs any code the text holds",
        "call the code directly; look names up in an explicit dict instead of generating code"),
    CallRule(
        "sql-format", ("S608",),
        re.compile(r"(?i)\b(?:select|delete|insert|replace|update)\b|%|\.format|\+|\{"),
        re.compile(r"(?i)\b(?:select|delete|insert|replace|update)\s"),  # see looks_like_sql
        "SQL built by formatting values into the query text (f-string, %, .format or +): a "
        "quote in the input rewrites the query (SQL injection)",
        "pass the values as query parameters: cur.execute(\"SELECT * FROM users WHERE id = ?\", "
        "(user_id,)) (%s for psycopg/MySQL drivers)"),
    CallRule(
        "mktemp", ("S306",),
        re.compile(r"mktemp"),
        re.compile(_call(r"tempfile\.mktemp")),
        "tempfile.mktemp returns a name another process can create first",
        "tempfile.NamedTemporaryFile / tempfile.mkstemp / tempfile.TemporaryDirectory"),
    CallRule(
        "jinja-autoescape", ("S701",),
        re.compile(r"\bautoescape\s*=\s*False\b"),
        re.compile(r"\bautoescape\s*=\s*False\b"),
        "jinja2 templates with autoescape off: values render as raw HTML (XSS)",
        "jinja2.Environment(autoescape=jinja2.select_autoescape())",
        call=re.compile(_call(r"jinja2\.Environment"))),
    CallRule(
        "insecure-tls-version", ("S502",),
        re.compile(r"SSLv|TLSv1\b|TLSv1_1|_METHOD"),
        re.compile(r"(?<![\w.])(?:ssl_version|method)\s*=\s*(?:ssl\.|SSL\.)?"
                   r"(?:PROTOCOL_SSLv2|PROTOCOL_SSLv3|PROTOCOL_TLSv1|PROTOCOL_TLSv1_1|"
                   r"SSLv2_METHOD|SSLv23_METHOD|SSLv3_METHOD|TLSv1_METHOD|TLSv1_1_METHOD)\b"),
        "a broken TLS/SSL protocol version (SSLv2/3, TLS 1.0/1.1)",
        "ssl.create_default_context() (TLS 1.2 or later)",
        call=re.compile(r"\(")),
    CallRule(
        "telnet", ("S312",),
        re.compile(r"telnetlib"),
        re.compile(_call(r"telnetlib\.Telnet")),
        "telnet sends everything, passwords too, in clear text",
        "SSH (paramiko, asyncssh) or another encrypted protocol"),
    CallRule(
        "ftp", ("S321",),
        re.compile(r"ftplib"),
        re.compile(_call(r"ftplib\.FTP")),
        "FTP sends everything, passwords too, in clear text",
        "SFTP (paramiko) or HTTPS"),
)
"""The watchdog's rules on Python code: the classes of the security stage's default ruff
rules that a single statement shows (ruff's findings that need a whole file's names, such as
an imported `load` called bare, are left to the stage)."""

_SQL_PAIRS = (
    (re.compile(r"(?i)\bselect\s"), re.compile(r"(?i)\sfrom\s")),
    (re.compile(r"(?i)\bdelete\s+from\s"), None),
    (re.compile(r"(?i)\b(?:insert|replace)\s"), re.compile(r"(?i)\svalues\s")),
    (re.compile(r"(?i)\bupdate\s"), re.compile(r"(?i)\sset\s")),
)


def looks_like_sql(text: str) -> bool:
    """ruff's (bandit's) test of a formatted string for SQL — `select … from`, `delete from`,
    `insert|replace … values`, `update … set`, any text between, across lines — as at most two
    linear searches each: the first keyword, then its partner after it (a regex with `.*`
    between the two backtracks quadratically on a long string of keywords)."""
    for first, then in _SQL_PAIRS:
        match = first.search(text)
        if match is not None and (then is None or then.search(text, match.end()) is not None):
            return True
    return False


SQL_FORMATTING = re.compile(r'"\^"|"\^?"\s*(?:%(?!=)|\.format\b|\+)|\+\s*[rRbBuUfF]*"')
"""An expression of masked code (strings as `""`, f-strings with a placeholder as `"^"`) that
formats or concatenates a string literal."""


def selected(codes: tuple[str, ...], selection: tuple[str, ...]) -> bool:
    """Whether any of the ruff rules `codes` is on for a task whose ruff `S` rules are
    `selection` (codes or prefixes, as ruff reads them: S6 selects S602)."""
    return any(code.startswith(prefix) for code in codes for prefix in selection)

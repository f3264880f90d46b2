"""The security watchdog: reads an answer as it streams and names the first security finding
in a line the answer adds, so that the stream can be halted there and corrected at once.

Pure and cheap (no network, no sandbox, no parse of the whole answer): `Watchdog.observe(text)`
looks only at the lines completed since its last call. Each line an edit adds
(agent/edits/stream_lines.py: REPLACE parts, `+` lines, code blocks; never prose, SEARCH parts
or `-` lines) is checked by

- the secret scan of the security stage (verifiers/security_rules.find_secret), in any file;
- in Python files, the call rules (security_rules.CALL_RULES), on whole statements: a tiny
  lexer follows strings (docstrings too), comments and brackets, so a rule sees a call across
  its lines, never the inside of a string or comment, and `yaml.load(` waits for its `Loader=`.

Baseline-relative, like the security stage: a finding whose added lines are all code the
repository already has (`BaseCode`: the same line, stripped, in the file the edit names; for a
code block that names no readable file, in any of the repository's Python files) is no finding,
and neither is one that replaces a line with the same finding the answer quotes from the same
file (a SEARCH part's or a `-` line's). Such code is the base's, and the stage would not charge
it either.
"""

from ooda.verifiers.watchdog.base_code import BaseCode
from ooda.verifiers.watchdog.scan import Finding, Watchdog, rules_for

__all__ = ["BaseCode", "Finding", "Watchdog", "rules_for"]

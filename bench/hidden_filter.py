#!/usr/bin/env python3
"""bench/hidden_filter: the hidden-test output filter (verifiers/hidden.py) on real tasks, both
ways: how many lines of the repositories' own source it would withhold although they carry no
hidden line (false alarms: feedback lost), and how many transformed hidden lines it catches.

    bench/hidden_filter.py TASKS_DIR [...]      # imported SWE-bench tasks (task.toml + repo/)

For each task: the hidden lines (tasks/hidden.py, from its test patch); every line of the base
repository's Python files outside the test patch's files is a line the model may legitimately
be shown (a traceback quotes them), so a withheld one is a false alarm; each hidden line is then
sent through transformations the filter was designed for (ROT13, Atbash, a random substitution,
reversal, base32, zlib+base64, base85, percent-encoding, cut into 3-character lines) and one it
was not (XOR with a key, then hex), and the share caught is printed per transformation.
"""

from __future__ import annotations

import argparse
import base64
import codecs
import random
import string
import sys
import time
import urllib.parse
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from ooda.tasks.hidden import hidden_tests
from ooda.tasks.loader import load_task
from ooda.verifiers import hidden as hidden_module
from ooda.verifiers.hidden import MARKER, HiddenText, _norm

SHUFFLED = "".join(random.Random(33).sample(string.ascii_lowercase, 26))


def _atbash(text: str) -> str:
    return text.lower().translate(str.maketrans(string.ascii_lowercase, string.ascii_lowercase[::-1]))


def _xor_hex(text: str) -> str:
    return bytes(b ^ 0x5A for b in text.encode()).hex()


TRANSFORMS: dict[str, Callable[[str], str]] = {
    "rot13": lambda t: codecs.encode(t, "rot13"),
    "atbash": _atbash,
    "substitution": lambda t: t.lower().translate(str.maketrans(string.ascii_lowercase, SHUFFLED)),
    "reversed": lambda t: t[::-1],
    "base32": lambda t: base64.b32encode(t.encode()).decode(),
    "zlib+base64": lambda t: base64.b64encode(zlib.compress(t.encode())).decode(),
    "base85": lambda t: base64.b85encode(t.encode()).decode(),
    "percent": lambda t: urllib.parse.quote(t, safe=""),
    "cut in 3-char lines": lambda t: "\n".join(f"E   {t[i:i + 3]}" for i in range(0, len(t), 3)),
    "xor+hex (not designed for)": _xor_hex,
}


def _scan_sources(repo: Path, test_files: set[str], text: HiddenText, plain: HiddenText,
                  examples: list[str], name: str) -> tuple[int, int, int]:
    """The repository's source lines outside the test patch's files: (how many, how many
    withheld, how many of those hold a hidden line's letters as written); the first lines
    withheld only by substitution or decoding join `examples` (5 in all)."""
    lines_seen = withheld = exact = 0
    for path in sorted(repo.rglob("*.py")):
        rel = path.relative_to(repo).as_posix()
        if rel in test_files or "/." in f"/{rel}":
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            lines_seen += 1
            if text.holds(line):
                withheld += 1
                if plain._in(_norm(line)):
                    exact += 1
                elif len(examples) < 5:
                    examples.append(f"{name}: {rel}: {line.strip()[:90]}")
    return lines_seen, withheld, exact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--iso-chars", type=int, default=hidden_module.ISO_MIN_CHARS)
    parser.add_argument("--iso-repeats", type=int, default=hidden_module.ISO_MIN_REPEATS)
    args = parser.parse_args()
    hidden_module.ISO_MIN_CHARS, hidden_module.ISO_MIN_REPEATS = args.iso_chars, args.iso_repeats
    lines_seen = withheld = exact = tasks = hidden_total = 0
    caught: Counter[str] = Counter()
    examples: list[str] = []
    started = time.perf_counter()
    for task_dir in sorted(d for root in args.dirs for d in root.iterdir() if (d / "task.toml").is_file()):
        try:
            task = load_task(task_dir)
            hidden = hidden_tests(task)
        except Exception as exc:  # noqa: BLE001 - a task that does not load: say so, go on
            print(f"{task_dir.name}: skipped ({exc})", file=sys.stderr)
            continue
        text = HiddenText(hidden.lines)
        if not text:
            continue
        plain = HiddenText(hidden.lines)
        plain.shapes = []  # the letters-and-digits match alone (the filter before round four)
        tasks += 1
        seen, held, as_written = _scan_sources(task.repo, set(hidden.files), text, plain,
                                               examples, task_dir.name)
        lines_seen, withheld, exact = lines_seen + seen, withheld + held, exact + as_written
        for line in hidden.lines:
            if len(line.strip()) < 16:
                continue
            hidden_total += 1
            for name, transform in TRANSFORMS.items():
                if MARKER in text.withhold("E   " + transform(line.strip())):
                    caught[name] += 1
    took = time.perf_counter() - started
    print(f"{tasks} tasks, {lines_seen} source lines outside the test patch's files: {withheld} "
          f"withheld ({withheld / max(lines_seen, 1):.4%}), {exact} of them holding a hidden line's "
          f"letters as written (a line the test patch adds elsewhere too), {withheld - exact} only "
          f"by substitution or decoding [{took:.1f} s]")
    for example in examples:
        print(f"  withheld only by substitution or decoding: {example}")
    print(f"{hidden_total} hidden lines (16+ characters), share caught per transformation:")
    for name in TRANSFORMS:
        print(f"  {name:28s} {caught[name] / max(hidden_total, 1):7.1%}")


if __name__ == "__main__":
    main()

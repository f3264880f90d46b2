"""A spec's optional test dependencies (a conda environment file's packages, `EnvSpec.optional`):
the build steps that install them and then leave out any that would break the test suite.

Each is allowed to fail to install (optional_script). One that installs but cannot be imported
(its C library is not in the image: xarray's `cfgrib` raises RuntimeError "Cannot find the
ecCodes library") is worse than a missing one: a test suite guards an optional import with
`except ImportError` (xarray's `_importorskip`), so any other error stops every test module
that imports the guard. `check_script` runs after the repository's install, imports each
optional distribution's top-level modules in a fresh interpreter, and uninstalls those whose
import fails with anything but ImportError; each is said in the build log.
"""

from __future__ import annotations

import shlex

from ooda.agent.sandbox.environments.spec import EnvSpec

OPTIONAL_TIMEOUT_S = 300
"""Bound on one pip resolution of optional packages: pip can backtrack for a very long time
(aiobotocore's exact botocore pins against boto3 in xarray's list)."""
IMPORT_TIMEOUT_S = 120
"""Bound on importing one optional module in the check (numba, distributed take seconds)."""

CHECK_SOURCE = r"""
import importlib.metadata as md, re, subprocess, sys
broken = []
for given in sys.argv[2:]:
    name = re.split(r"[<>=!~\[;@ ]", given, 1)[0]
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    tops = (dist.read_text("top_level.txt") or "").split()
    if not tops:
        found = set()
        for f in dist.files or []:
            path = str(f)
            top = path.split("/")[0]
            if "/" not in path and top.endswith(".py"):
                found.add(top[:-3])
            elif "/" in path and not top.endswith((".dist-info", ".data", ".libs", ".egg-info")):
                found.add(top)
        tops = sorted(found)
    for module in [t for t in tops if t.isidentifier() and not t.startswith("_")]:
        try:
            run = subprocess.run([sys.executable, "-c", "import " + module], capture_output=True,
                                 text=True, timeout=float(sys.argv[1]))
        except subprocess.TimeoutExpired:
            continue
        last = (run.stderr.strip().splitlines() or [""])[-1]
        if run.returncode and not last.startswith(("ImportError", "ModuleNotFoundError")):
            print("ooda: optional package %s left out: import %s: %s" % (name, module, last[:200]))
            broken.append(name)
            break
if broken:
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *broken], check=True)
"""


def optional_script(spec: EnvSpec) -> str:
    """Install the spec's optional packages under its pins: all at once, or, when that fails
    or takes longer than OPTIONAL_TIMEOUT_S (one has no release for this Python, or pip
    backtracks), each alone within the same bound, skipping those that fail."""
    q = shlex.quote
    pins = "".join(f"{p}\n" for p in spec.pip if "==" in p)
    names = " ".join(q(p) for p in spec.optional)
    pip = f"timeout {OPTIONAL_TIMEOUT_S} python3 -m pip install -q -c /tmp/ooda-pins.txt"
    return "\n".join([
        f"printf %s {q(pins)} > /tmp/ooda-pins.txt",
        f"{pip} {names} || for p in {names}; do {pip} \"$p\" "
        "|| echo \"ooda: optional package $p not installed\"; done",
    ])


def check_script(spec: EnvSpec) -> str:
    """After the repository's install: uninstall the optional packages whose import fails
    with anything but ImportError (the build fails only if pip cannot uninstall them)."""
    q = shlex.quote
    return (f"python3 -c {q(CHECK_SOURCE)} {IMPORT_TIMEOUT_S} "
            + " ".join(q(p) for p in spec.optional))

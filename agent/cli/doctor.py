"""`ooda doctor`: check the machine (Docker engine, image, bubblewrap, endpoint), say what to do."""

from __future__ import annotations


def doctor() -> None:
    """Check the machine (Docker engine, image, bubblewrap, endpoint) and say what to do."""
    from ooda.agent.app.doctor import diagnose

    checks = diagnose()
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        line = f"[{mark}] {check.name}: {check.detail}"
        if not check.ok and check.fix:
            line += f"\n       fix: {check.fix}"
        print(line)
    raise SystemExit(0 if all(c.ok for c in checks) else 1)

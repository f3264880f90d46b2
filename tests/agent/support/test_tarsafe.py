"""agent/support/tarsafe.py: the "data" extraction rules with tarfile's filter (Python >=
3.11.4) and without it (Debian 12's 3.11.2, which CI's environment runs on): both paths are
run here, whatever this Python has."""

from __future__ import annotations

import io
import stat
import tarfile
from pathlib import Path

import pytest

from ooda.agent.support.tarsafe import UnsafeMember, extract_all


def archive(*members: tuple[str, bytes | None, dict[str, object]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data, attrs in members:
            info = tarfile.TarInfo(name)
            for key, value in attrs.items():
                setattr(info, key, value)
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


GOOD = ("pkg/mod.py", b"x = 1\n", {"mode": 0o4777})
BAD = {
    "dotdot": ("../evil.py", b"x", {}),
    "link_out": ("pkg/passwd", None, {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}),
    "device": ("pkg/dev", None, {"type": tarfile.CHRTYPE}),
}


@pytest.fixture(params=["filter", "fallback"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "fallback":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no tarfile extraction filters")
    return str(request.param)


@pytest.mark.parametrize("stream", [False, True])
def test_files_land_inside_with_sane_modes(mode: str, stream: bool, tmp_path: Path) -> None:
    data = archive(GOOD, ("/abs/top.py", b"y = 2\n", {}))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|" if stream else "r") as tar:
        extract_all(tar, tmp_path)
    assert (tmp_path / "pkg" / "mod.py").read_bytes() == b"x = 1\n"
    assert (tmp_path / "abs" / "top.py").is_file()  # a leading / is stripped, as tar does
    bits = stat.S_IMODE((tmp_path / "pkg" / "mod.py").stat().st_mode)
    assert not bits & (stat.S_ISUID | stat.S_IWGRP | stat.S_IWOTH)


@pytest.mark.parametrize("bad", sorted(BAD))
def test_members_out_of_bounds_are_refused_or_skipped(mode: str, bad: str, tmp_path: Path) -> None:
    data = archive(GOOD, BAD[bad])
    with tarfile.open(fileobj=io.BytesIO(data)) as tar, pytest.raises(tarfile.TarError):
        extract_all(tar, tmp_path / "strict")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        extract_all(tar, tmp_path / "lenient", skip_unsafe=True)
    assert (tmp_path / "lenient" / "pkg" / "mod.py").is_file()
    assert not (tmp_path / "evil.py").exists()
    assert not (tmp_path / "lenient" / "pkg" / "passwd").exists()
    assert issubclass(UnsafeMember, tarfile.TarError)

"""Capture a command's output with a size cap: keep the head and the tail, drop the middle."""

from __future__ import annotations

DEFAULT_CAP_BYTES = 256 * 1024


class CappedBuffer:
    """Collects bytes; past `cap` it keeps the first and last cap/2 bytes and counts the rest."""

    def __init__(self, cap: int = DEFAULT_CAP_BYTES) -> None:
        self.cap = cap
        self._head = bytearray()
        self._tail = bytearray()
        self.dropped = 0

    def write(self, data: bytes) -> None:
        half = self.cap // 2
        room = half - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        self._tail += data
        if len(self._tail) > half:
            extra = len(self._tail) - half
            self.dropped += extra
            del self._tail[:extra]

    def text(self) -> str:
        head = self._head.decode("utf-8", "replace")
        tail = self._tail.decode("utf-8", "replace")
        if self.dropped:
            return f"{head}\n[... {self.dropped} bytes of output elided ...]\n{tail}"
        return head + tail

"""Progress on long runs: one updating line on a terminal, a line per step otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()
        self.start = time.monotonic()
        self._last = 0.0

    def step(self, message: str, done: int = 0, total: int = 0, force: bool = False) -> None:
        """Report progress; off a terminal, at most one line every 5 s unless ``force``."""
        if not self.enabled:
            return
        now = time.monotonic()
        count = f" {done}/{total}" if total else ""
        line = f"[{now - self.start:6.1f}s] {message}{count}"
        if self.tty:
            self.stream.write("\r\033[K" + line[:150])
            self.stream.flush()
        elif force or now - self._last >= 5.0:
            self.stream.write(line + "\n")
            self.stream.flush()
            self._last = now

    def done(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()

"""What cases emit besides their outcome: log records (e.g. a session's "placement: 1 of 1
nodes do not run on cpu (host-only: ...)" note for each ONNX node test computed on the
host), warnings and, with a log file, anything written to the process's stderr (a driver's
compiler saying "1 warning generated."). Kept off the terminal, written to the log file
with the case each came from, and counted."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import warnings
from types import TracebackType
from typing import IO, Any, TextIO


class Diagnostics(logging.Handler):
    """A root-logger handler for the duration of a run (``with Diagnostics(path) as d``).

    With ``path``, file descriptor 2 is redirected for the run too (so native libraries'
    output is caught); ``terminal`` is then the real stderr, for progress lines. Without a
    path stderr is left alone: a crashing driver's last words must stay visible somewhere.
    """

    def __init__(self, path: str | None = None) -> None:
        super().__init__(logging.NOTSET)
        self.path = path
        self.count = 0
        self.terminal: TextIO = sys.stderr
        self._pending: list[str] = []
        self._file: TextIO | None = None
        self._warnings: Any = None
        self._saved_fd: int | None = None
        self._captured: IO[bytes] | None = None
        self._read = 0  # bytes of the captured stderr already attributed
        self._partial = b""  # a captured line not finished yet

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is still a diagnostic
            message = str(record.msg)
        self._pending.append(f"{record.levelname} {record.name}: {message}")

    def _warning(self, message: Any, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
        self.acquire()
        try:
            self._pending.append(f"{category.__name__} {filename}:{lineno}: {message}")
        finally:
            self.release()

    def _drain_stderr(self, final: bool = False) -> None:
        if self._captured is None:
            return
        sys.stderr.flush()
        fd = self._captured.fileno()
        data = self._partial
        while chunk := os.pread(fd, 1 << 16, self._read):
            self._read += len(chunk)
            data += chunk
        lines = data.split(b"\n")
        self._partial = b"" if final else lines.pop()
        found = [f"stderr: {x.decode(errors='replace').rstrip()}" for x in lines if x.strip()]
        self.acquire()
        try:
            self._pending += found
        finally:
            self.release()

    def attribute(self, label: str) -> None:
        """Write what was emitted since the last call, each line prefixed with ``label``."""
        self._drain_stderr()
        self.acquire()
        try:
            pending, self._pending = self._pending, []
        finally:
            self.release()
        self.count += len(pending)
        if self._file is not None:
            for line in pending:
                self._file.write(f"{label}: {line}\n")

    def open(self) -> None:
        """Create the log file (raises OSError); ``with`` does it when not done yet."""
        if self.path and self._file is None:
            self._file = open(self.path, "w", encoding="utf-8")

    def __enter__(self) -> Diagnostics:
        self.open()
        if self._file is not None and hasattr(os, "pread"):  # (not on Windows)
            sys.stderr.flush()
            self._saved_fd = os.dup(2)
            self.terminal = os.fdopen(os.dup(self._saved_fd), "w", encoding="utf-8",
                                      errors="replace")
            self._captured = tempfile.TemporaryFile(mode="a+b")  # appends, whoever writes
            os.dup2(self._captured.fileno(), 2)
        logging.getLogger().addHandler(self)
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("always")  # every case's own, not only the first of a kind
        warnings.showwarning = self._warning
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._warnings.__exit__(kind, exc, tb)
        logging.getLogger().removeHandler(self)
        if self._saved_fd is not None:
            sys.stderr.flush()
            os.dup2(self._saved_fd, 2)
            os.close(self._saved_fd)
            self._saved_fd = None
            self._drain_stderr(final=True)
            self.terminal.close()
            self.terminal = sys.stderr
        self.attribute("(between cases)")
        if self._captured is not None:
            self._captured.close()
            self._captured = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def describe(self) -> str:
        """One line for the summary."""
        if not self.count:
            return "diagnostics: none logged"
        if self.path:
            return (f"diagnostics: {self.count} log record(s), warning(s) and stderr line(s) "
                    f"emitted while cases ran, in {self.path}")
        return (f"diagnostics: {self.count} log record(s) and warning(s) emitted while cases "
                "ran, not shown (--log FILE keeps them, with stderr)")

"""The model hub: fetch files by URL into a local cache, verified and written atomically.

``fetch(url, sha256=None)`` returns a local path. Files live under ``<cache>/hub/``, where
``<cache>`` is ``$SPAWNML_CACHE`` (default ``$XDG_CACHE_HOME/spawnml`` or
``~/.cache/spawnml``). A download goes to a temporary file that is renamed into place only
once complete and verified, so a crash never leaves a partial file under the final name. The
digest of every download is recorded next to it (``<name>.sha256``); an entry whose bytes no
longer match (corrupted, truncated, edited) is fetched again. A dropped connection resumes
with an HTTP Range request when the server supports it, else the download restarts.
Concurrent fetches of one URL (threads or processes) are serialised by a lock file, so one
downloads and the others find the verified file. ``SPAWNML_OFFLINE=1`` forbids network
access: a missing entry then raises :class:`OfflineError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

from .errors import SpawnMLError

__all__ = [
    "HubError", "OfflineError", "ChecksumError", "ProgressBar", "cache_dir", "fetch",
    "file_sha256", "is_offline", "cached_path",
]

CHUNK = 1 << 20


class HubError(SpawnMLError):
    """A file could not be fetched (network error, HTTP error, bad server response)."""


class OfflineError(HubError):
    """SPAWNML_OFFLINE forbids the download a fetch needs."""


class ChecksumError(HubError):
    """The fetched bytes do not have the expected sha256."""


# ------------------------------------------------------------------------------ locations


def cache_dir() -> Path:
    """spawnml's cache folder: ``$SPAWNML_CACHE``, else the user cache dir + ``/spawnml``."""
    root = os.environ.get("SPAWNML_CACHE")
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "spawnml"


def is_offline() -> bool:
    """True when ``SPAWNML_OFFLINE`` forbids network access."""
    return os.environ.get("SPAWNML_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def cached_path(url: str, filename: str | None = None) -> Path:
    """Where ``fetch(url)`` keeps its file (whether or not it is there yet)."""
    name = filename or Path(urllib.parse.urlparse(url).path).name or "download"
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    return cache_dir() / "hub" / digest / name


# ------------------------------------------------------------------------------ progress


class ProgressBar:
    """A dependency-free text progress bar on stderr (drawn only where it is wanted).

    ``enabled=None`` draws when the stream is a terminal or ``SPAWNML_PROGRESS=1``."""

    def __init__(
        self,
        total: int | None,
        desc: str,
        *,
        unit: str = "B",
        enabled: bool | None = None,
        stream: IO[str] | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = os.environ.get("SPAWNML_PROGRESS") == "1" or bool(
                getattr(self.stream, "isatty", lambda: False)()
            )
        self.enabled = enabled
        self.total = total
        self.desc = desc
        self.unit = unit
        self.n = 0
        self._start = time.monotonic()
        self._drawn = 0.0

    def _fmt(self, n: float) -> str:
        if self.unit != "B":
            return f"{int(n)}"
        for suffix in ("B", "KiB", "MiB", "GiB"):
            if n < 1024 or suffix == "GiB":
                return f"{n:.1f} {suffix}" if suffix != "B" else f"{int(n)} B"
            n /= 1024
        return f"{n}"  # pragma: no cover - the loop always returns

    def reset(self) -> None:
        self.n = 0

    def update(self, n: int) -> None:
        self.n += n
        now = time.monotonic()
        if self.enabled and now - self._drawn >= 0.1:
            self._drawn = now
            self._draw(final=False)

    def _draw(self, final: bool) -> None:
        elapsed = max(time.monotonic() - self._start, 1e-9)
        rate = self.n / elapsed
        if self.total:
            frac = min(self.n / self.total, 1.0)
            bar = "#" * int(frac * 30)
            line = (
                f"{self.desc}: {frac * 100:5.1f}% |{bar:<30}| {self._fmt(self.n)}/"
                f"{self._fmt(self.total)} {self._fmt(rate)}/s {elapsed:.1f}s"
            )
        else:
            line = f"{self.desc}: {self._fmt(self.n)} {self._fmt(rate)}/s {elapsed:.1f}s"
        if self.unit != "B":  # steps and tiles: counts and time, no rate
            line = line.rsplit(" ", 2)[0] + f" {elapsed:.1f}s"
        self.stream.write("\r" + line + ("\n" if final else ""))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(final=True)

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------------ hashing

_verified: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> digest
_verified_lock = threading.Lock()


def file_sha256(path: Path) -> str:
    """The sha256 of a file (memoised per path, size and modification time)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _verified_lock:
        if key in _verified:
            return _verified[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    digest = h.hexdigest()
    with _verified_lock:
        _verified[key] = digest
    return digest


def _valid_entry(path: Path, sha256: str | None) -> bool:
    """Whether the cached file exists and matches its recorded (and expected) digest."""
    record = path.with_name(path.name + ".sha256")
    if not path.is_file() or not record.is_file():
        return False
    recorded = record.read_text().strip().lower()
    if sha256 and recorded != sha256.lower():
        return False
    return file_sha256(path) == recorded


def _remove_entry(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".sha256")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock on ``<path>.lock`` (POSIX; elsewhere the atomic
    rename alone keeps the entry valid, at the cost of duplicate downloads)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


# ------------------------------------------------------------------------------ download


def _download(
    url: str, dest: IO[bytes], *, timeout: float, retries: int, progress: ProgressBar
) -> str:
    """Stream ``url`` into ``dest``; resume with Range after a drop. Returns the sha256."""
    h = hashlib.sha256()
    received = 0
    last_error: BaseException | None = None
    for _attempt in range(retries + 1):
        headers = {"User-Agent": "spawnml-hub"}
        if received:
            headers["Range"] = f"bytes={received}-"
        try:
            with urllib.request.urlopen(
                urllib.request.Request(url, headers=headers), timeout=timeout
            ) as resp:
                status = getattr(resp, "status", 200)
                if received and status != 206:
                    # The server ignored the Range request: start over.
                    dest.seek(0)
                    dest.truncate()
                    h = hashlib.sha256()
                    received = 0
                    progress.reset()
                length = resp.headers.get("Content-Length")
                expected = received + int(length) if length is not None else None
                if progress.total is None and expected is not None:
                    progress.total = expected
                while True:
                    chunk = resp.read(CHUNK)
                    if not chunk:
                        break
                    dest.write(chunk)
                    h.update(chunk)
                    received += len(chunk)
                    progress.update(len(chunk))
                if expected is not None and received < expected:
                    raise http.client.IncompleteRead(b"", expected - received)
            return h.hexdigest()
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and received:  # range beyond the end: restart cleanly
                dest.seek(0)
                dest.truncate()
                h, received = hashlib.sha256(), 0
                last_error = exc
                continue
            if exc.code < 500:
                raise HubError(f"cannot fetch {url}: HTTP {exc.code} {exc.reason}") from exc
            last_error = exc
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            last_error = exc
    raise HubError(
        f"cannot fetch {url}: {last_error!r} (after {retries + 1} attempts, "
        f"{received} bytes received)"
    ) from last_error


def fetch(
    url: str,
    sha256: str | None = None,
    *,
    filename: str | None = None,
    progress: bool | None = None,
    timeout: float = 60.0,
    retries: int = 3,
) -> Path:
    """Return the local path of ``url``, downloading it into the cache when needed.

    ``sha256`` (hex) is checked on download and on every cache hit; ``filename`` names the
    cached file (default: the URL's last path segment); ``progress`` draws a progress bar on
    stderr (default: when stderr is a terminal or ``SPAWNML_PROGRESS=1``). ``file://`` URLs
    work too. Raises :class:`OfflineError`, :class:`ChecksumError` or :class:`HubError`."""
    path = cached_path(url, filename)
    if _valid_entry(path, sha256):
        return path

    def download(f: IO[bytes]) -> str:
        if is_offline():
            raise OfflineError(
                f"SPAWNML_OFFLINE is set, so {url} cannot be downloaded and it is not in the "
                f"cache (expected at {path}); unset SPAWNML_OFFLINE or copy the file there"
            )
        with ProgressBar(None, f"fetch {path.name}", enabled=progress) as bar:
            return _download(url, f, timeout=timeout, retries=retries, progress=bar)

    return _publish(path, sha256, download, what=url)


def store(sha256: str, filename: str, chunks: Callable[[], Iterable[bytes]]) -> Path:
    """A content-addressed cache entry: the local path of the file whose sha256 is
    ``sha256``, written from ``chunks()`` only when no valid copy is cached yet.

    Concurrent callers (several processes on one machine) write it once; the digest is
    checked when written and on every hit, and a mismatch raises :class:`ChecksumError`
    without caching anything. Used to ship model files to workers (spawnml-ray)."""
    digest = sha256.lower()
    path = cache_dir() / "blobs" / digest[:2] / digest / filename
    if _valid_entry(path, digest):
        return path

    def write(f: IO[bytes]) -> str:
        h = hashlib.sha256()
        for chunk in chunks():
            f.write(chunk)
            h.update(chunk)
        return h.hexdigest()

    return _publish(path, digest, write, what=filename)


def _publish(
    path: Path, sha256: str | None, write: Callable[[IO[bytes]], str], *, what: str
) -> Path:
    """Fill the cache entry ``path`` under its lock: ``write`` streams the data into a
    temporary file and returns its sha256, checked against ``sha256``; the file and its
    ``.sha256`` record are then renamed into place, the record last."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        if _valid_entry(path, sha256):  # another process finished it while we waited
            return path
        _remove_entry(path)  # a stale or corrupted entry
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "w+b") as f:
                digest = write(f)
                f.flush()
                os.fsync(f.fileno())
            if sha256 and digest != sha256.lower():
                raise ChecksumError(
                    f"{what}: sha256 {digest} does not match the expected {sha256.lower()}; "
                    "the file was not cached"
                )
            record = path.with_name(path.name + ".sha256")
            record_tmp = tmp.with_suffix(".sha256.part")
            record_tmp.write_text(digest + "\n")
            # The data first, then its record: a reader that sees the record sees the data.
            os.replace(tmp, path)
            os.replace(record_tmp, record)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            with contextlib.suppress(FileNotFoundError):
                tmp.with_suffix(".sha256.part").unlink()
    return path

"""spawnml.hub against a local HTTP server on 127.0.0.1 (good, dropping and lying servers)."""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spawnml import hub

PAYLOAD = bytes(range(256)) * 4096 + b"tail"  # 1 MiB + 4 bytes, several read chunks
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    """Routes: /ok (Range support), /drop (drops half-way once, then serves ranges),
    /drop-norange (drops once, ignores Range), /wrong (other bytes), /slow, /missing."""

    server: _Server

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        route = self.path.split("?")[0]
        self.server.requests.append((route, self.headers.get("Range")))
        if route == "/missing":
            self.send_error(404, "no such model")
            return
        body = PAYLOAD if route != "/wrong" else PAYLOAD[::-1]
        start = 0
        rng = self.headers.get("Range")
        if rng and route in ("/ok", "/drop", "/slow"):
            start = int(rng.removeprefix("bytes=").split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
            self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        data = body[start:]
        first = sum(1 for r, _ in self.server.requests if r == route) == 1
        if route in ("/drop", "/drop-norange") and first:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if route == "/slow":
            for i in range(0, len(data), 1 << 16):
                self.wfile.write(data[i : i + (1 << 16)])
                time.sleep(0.02)
            return
        self.wfile.write(data)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    requests: list[tuple[str, str | None]]


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.requests = []
    srv.timeout = 5
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPAWNML_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SPAWNML_OFFLINE", raising=False)
    return tmp_path / "cache"


def url(srv: _Server, route: str) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}{route}"


def leftovers(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.endswith(".part"))


def test_fetch_downloads_verifies_and_caches(server: _Server, cache: Path) -> None:
    path = hub.fetch(url(server, "/ok"), DIGEST)
    assert path.read_bytes() == PAYLOAD
    assert path.is_relative_to(cache / "hub")
    assert hub.fetch(url(server, "/ok"), DIGEST) == path
    assert hub.fetch(url(server, "/ok")) == path  # no checksum given: the recorded one holds
    assert len(server.requests) == 1
    assert leftovers(path) == []


def test_dropped_connection_resumes_with_a_range_request(server: _Server) -> None:
    path = hub.fetch(url(server, "/drop"), DIGEST)
    assert path.read_bytes() == PAYLOAD
    (first, second) = server.requests
    assert first == ("/drop", None)
    assert second[0] == "/drop" and second[1] == f"bytes={len(PAYLOAD) // 2}-"


def test_dropped_connection_without_range_support_refetches(server: _Server) -> None:
    path = hub.fetch(url(server, "/drop-norange"), DIGEST)
    assert path.read_bytes() == PAYLOAD
    assert [r for r, _ in server.requests] == ["/drop-norange"] * 2


def test_checksum_mismatch_raises_and_caches_nothing(server: _Server) -> None:
    with pytest.raises(hub.ChecksumError, match="does not match"):
        hub.fetch(url(server, "/wrong"), DIGEST)
    path = hub.cached_path(url(server, "/wrong"))
    assert not path.exists()
    assert leftovers(path) == []


def test_http_error_is_reported_without_retrying(server: _Server) -> None:
    with pytest.raises(hub.HubError, match="HTTP 404"):
        hub.fetch(url(server, "/missing"))
    assert len(server.requests) == 1


def test_connection_refused_is_a_hub_error() -> None:
    with pytest.raises(hub.HubError, match="cannot fetch"):
        hub.fetch("http://127.0.0.1:9/none.onnx", retries=1, timeout=2)


@pytest.mark.parametrize("damage", ["corrupt", "truncate", "no-record"])
def test_damaged_cache_entry_is_fetched_again(server: _Server, damage: str) -> None:
    path = hub.fetch(url(server, "/ok"))
    if damage == "corrupt":
        data = bytearray(path.read_bytes())
        data[1000] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "truncate":
        path.write_bytes(PAYLOAD[:1000])
    else:
        path.with_name(path.name + ".sha256").unlink()
    again = hub.fetch(url(server, "/ok"))
    assert again == path and path.read_bytes() == PAYLOAD
    assert len(server.requests) == 2


def test_expected_checksum_change_refetches(server: _Server) -> None:
    hub.fetch(url(server, "/ok"))
    with pytest.raises(hub.ChecksumError):
        hub.fetch(url(server, "/ok"), "0" * 64)
    assert len(server.requests) == 2


def test_offline_mode(server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPAWNML_OFFLINE", "1")
    with pytest.raises(hub.OfflineError, match="SPAWNML_OFFLINE") as info:
        hub.fetch(url(server, "/ok"), DIGEST)
    assert url(server, "/ok") in str(info.value)
    assert server.requests == []
    monkeypatch.delenv("SPAWNML_OFFLINE")
    path = hub.fetch(url(server, "/ok"), DIGEST)
    monkeypatch.setenv("SPAWNML_OFFLINE", "1")
    assert hub.fetch(url(server, "/ok"), DIGEST) == path  # a valid cache entry is enough
    path.write_bytes(b"garbage")
    with pytest.raises(hub.OfflineError):  # corrupted and offline: refuse, do not use it
        hub.fetch(url(server, "/ok"), DIGEST)
    assert len(server.requests) == 1


def test_progress_bar_is_drawn(server: _Server, capsys: pytest.CaptureFixture[str]) -> None:
    hub.fetch(url(server, "/ok"), progress=True)
    err = capsys.readouterr().err
    assert "fetch ok" in err and "100.0%" in err and "1.0 MiB" in err


def test_file_url(tmp_path: Path) -> None:
    src = tmp_path / "model.onnx"
    src.write_bytes(PAYLOAD)
    path = hub.fetch(src.as_uri(), DIGEST)
    assert path.read_bytes() == PAYLOAD and path != src


def test_concurrent_fetches_from_two_processes_leave_one_valid_file(
    server: _Server, cache: Path
) -> None:
    code = (
        "import sys; from spawnml import hub; "
        f"p = hub.fetch(sys.argv[1], {DIGEST!r}); print(p)"
    )
    env = dict(os.environ, SPAWNML_CACHE=str(cache))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, url(server, "/slow")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    paths = {out.strip() for out, _ in outs}
    assert len(paths) == 1
    path = Path(paths.pop())
    assert path.read_bytes() == PAYLOAD
    assert leftovers(path) == []
    assert [r for r, _ in server.requests] == ["/slow"]  # the lock let only one download

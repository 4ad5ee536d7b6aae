"""``spawnml batch`` as a user runs it: a fresh process starting its own local Ray cluster."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spawnml_ray import read_results


def _batch(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spawnml", "batch", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_batch_command_classifies_a_folder_and_resumes(tmp_path, make_images) -> None:
    make_images(tmp_path / "in", 6, seed=11)
    out = tmp_path / "out"
    args = ["classify", str(tmp_path / "in"), str(out), "--actors", "2", "-b", "cpu",
            "--cluster-cpus", "2", "--batch-size", "2", "-k", "3"]
    done = _batch(*args)
    assert done.returncode == 0, done.stderr
    assert "batch classify: 6 processed (0 errors), 0 already done, of 6" in done.stderr
    assert "images/s" in done.stderr
    table = read_results(out)
    assert table.num_rows == 6 and set(table.column("backend").to_pylist()) == {"cpu"}
    again = _batch(*args)
    assert again.returncode == 0, again.stderr
    assert "0 processed (0 errors), 6 already done, of 6" in again.stderr


@pytest.mark.parametrize(("args", "code", "message"), [
    (["bogus", "in", "out"], 2, "invalid choice: 'bogus'"),
    (["classify", "{tmp}/missing", "{tmp}/out"], 1, "no such folder or file"),
    (["classify", "{tmp}", "{tmp}/out"], 1, "no images found"),
    (["classify", "{tmp}/list.txt", "{tmp}/out"], 1, "expected a folder of images, a .parquet"),
    (["classify", "{tmp}/nopath.csv", "{tmp}/out"], 1, "no 'path' column"),
    (["classify", "in", "out", "--actors", "0"], 2, "--actors: must be > 0"),
    (["classify", "in", "out", "--batch-size", "x"], 2, "--batch-size: invalid"),
    (["classify", "in", "out", "--ship", "ftp"], 2, "--ship: invalid choice"),
])
def test_batch_command_rejects_bad_arguments(tmp_path, args, code, message) -> None:
    (tmp_path / "list.txt").write_text("a.png\n")
    (tmp_path / "nopath.csv").write_text("file\na.png\n")
    done = _batch(*[a.format(tmp=tmp_path) for a in args], timeout=60)
    assert done.returncode == code, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_batch_command_reports_actors_that_cannot_start(tmp_path, make_images) -> None:
    make_images(tmp_path / "in", 2, seed=12, nested=False)
    done = _batch("classify", str(tmp_path / "in"), str(tmp_path / "out"), "-b", "nope",
                  "--cluster-cpus", "2")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("spawnml: error: the classify actors cannot start: "
                           "BackendUnavailableError: none of the backends nope"), last
    assert read_results(tmp_path / "out").num_rows == 0  # nothing recorded as done


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_session(sid: int) -> None:
    """Kill every process of the session ``sid`` (a Ray head and all it started)."""
    import os
    import signal

    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    os.kill(int(entry), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@pytest.mark.slow
def test_batch_command_over_ray_client(tmp_path, make_images) -> None:
    """``--address ray://`` to a separately started head (token authentication on, as Ray
    sets it up): the pass runs on the cluster, the results come back to this machine."""
    import os
    import time
    from pathlib import Path

    ray_cli = Path(sys.executable).with_name("ray")
    port, client = _free_port(), _free_port()
    head = subprocess.Popen(
        [str(ray_cli), "start", "--head", "--block", "--num-cpus", "2", "--include-dashboard",
         "false", "--node-ip-address", "127.0.0.1", "--port", str(port),
         "--ray-client-server-port", str(client), "--min-worker-port", "30000",
         "--max-worker-port", "30999"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        cwd=tmp_path)
    try:
        make_images(tmp_path / "in", 4, seed=14, nested=False)
        env = {**os.environ, "RAY_AUTH_MODE": "token"}
        args = [sys.executable, "-m", "spawnml", "batch", "classify", str(tmp_path / "in"),
                str(tmp_path / "out"), "--address", f"ray://127.0.0.1:{client}", "-b", "cpu"]
        deadline = time.monotonic() + 120
        while True:  # the head takes a few seconds to listen
            done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
            if done.returncode == 0 or time.monotonic() > deadline or \
                    "cannot start or reach Ray" not in done.stderr:
                break
            time.sleep(3)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "4 processed (0 errors)" in done.stderr
        assert read_results(tmp_path / "out").num_rows == 4
        # --address local starts its own cluster even while `ray start` has one running
        local = _batch("classify", str(tmp_path / "in"), str(tmp_path / "out-local"), "-b",
                       "cpu", "--cluster-cpus", "2")
        assert local.returncode == 0, local.stderr[-2000:]
        assert "4 processed (0 errors)" in local.stderr
    finally:
        _stop_session(head.pid)
        head.wait(timeout=30)

"""Fixtures for spawnml-core's tests."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spawnml.plugins import reset_plugin_manager

REPO = Path(__file__).resolve().parents[2]
CLI = Path(sysconfig.get_path("scripts")) / "spawnml"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The monorepo's root folder (holds every package folder)."""
    return REPO


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Forget loaded plugins before and after the test (it may set SPAWNML_PLUGINS)."""
    reset_plugin_manager()
    yield monkeypatch
    monkeypatch.undo()
    reset_plugin_manager()


RunCLI = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_cli() -> RunCLI:
    """Run the installed ``spawnml`` console script; ``env`` entries override os.environ."""

    def run(
        *args: str, env: dict[str, str] | None = None, python: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        command = [python, "-m", "spawnml", *args] if python else [str(CLI), *args]
        full_env = {k: v for k, v in os.environ.items() if k != "SPAWNML_PLUGINS"}
        full_env.update(env or {})
        return subprocess.run(
            command, capture_output=True, text=True, env=full_env, timeout=120, check=False
        )

    assert CLI.exists() or sys.platform == "win32", f"console script missing: {CLI}"
    return run

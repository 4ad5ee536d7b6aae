"""Acceptance: a third-party plugin distribution, pip-installed, is found by its entry point.

Two throw-away distributions are built in a temp dir and pip-installed into a new virtual
environment that sees this environment's packages (spawnml and the built-in plugins) through
a .pth file: one registers a backend named ``example``, the other raises at import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

EXAMPLE_PLUGIN = """
from spawnml import hookimpl
from spawnml.backend import BackendInfo, DeviceKind
from spawnml.pending import PendingRuntime


class ExampleBackend(PendingRuntime):
    name = "example"
    runtime_issue = "a third-party example"

    @classmethod
    def probe(cls):
        return BackendInfo("example", True, device="an example device",
                           device_kind=DeviceKind.EMULATED)


@hookimpl
def spawnml_register_backends(register):
    register(ExampleBackend)
"""
BROKEN_PLUGIN = """
raise ImportError("libexample.so.3: cannot open shared object file")
"""


def write_distribution(root: Path, dist: str, entry_point: str, module_source: str) -> Path:
    module = dist.replace("-", "_")
    project = root / dist
    (project / "src" / module).mkdir(parents=True)
    (project / "src" / module / "__init__.py").write_text(textwrap.dedent(module_source))
    (project / "pyproject.toml").write_text(
        textwrap.dedent(f"""
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{dist}"
        version = "1.2.3"

        [project.entry-points.spawnml]
        {entry_point} = "{module}"

        [tool.setuptools.packages.find]
        where = ["src"]
        """)
    )
    return project


@pytest.fixture(scope="module")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with both throw-away plugins pip-installed; returns its python."""
    root = tmp_path_factory.mktemp("third-party")
    example = write_distribution(root, "spawnml-example-plugin", "example", EXAMPLE_PLUGIN)
    broken = write_distribution(root, "spawnml-broken-plugin", "broken", BROKEN_PLUGIN)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    venv_site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # addsitedir (not a bare path) so the parent's editable installs (.pth files) work too
    parent_site = sysconfig.get_path("purelib")
    Path(venv_site, "parent-env.pth").write_text(f"import site; site.addsitedir({parent_site!r})\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-build-isolation", str(example), str(broken)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return python


def spawnml(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPAWNML_PLUGINS"}
    return subprocess.run(
        [str(python), "-m", "spawnml", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


def test_the_plugin_is_installed_in_the_new_venv_only(plugin_venv: Path) -> None:
    code = "from importlib import metadata; print(metadata.version('spawnml-example-plugin'))"
    done = subprocess.run([plugin_venv, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "1.2.3"
    here = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert here.returncode != 0  # not in the environment running the tests


def test_backends_lists_the_third_party_backend(plugin_venv: Path) -> None:
    done = spawnml(plugin_venv, "backends", "--json")
    assert done.returncode == 0, done.stderr
    infos = {b["name"]: b for b in json.loads(done.stdout)}
    assert infos["example"] == {
        "name": "example",
        "available": True,
        "device": "an example device",
        "device_kind": "emulated",
        "reason": "",
        "plugin": "example",
    }
    assert infos["cpu"]["available"]  # the built-ins still load beside it
    assert "plugin 'broken' failed: ImportError: libexample.so.3" in done.stderr


def test_a_plugin_that_raises_at_import_shows_its_error(plugin_venv: Path) -> None:
    done = spawnml(plugin_venv, "plugins", "--json")
    assert done.returncode == 0, done.stderr
    records = {p["name"]: p for p in json.loads(done.stdout)}
    broken = records["broken"]
    assert broken["distribution"] == "spawnml-broken-plugin"
    assert broken["version"] == "1.2.3"
    assert not broken["loaded"]
    assert broken["error"].startswith(
        "ImportError: libexample.so.3: cannot open shared object file ("
    )
    assert records["example"]["loaded"] and records["example"]["hooks"] == [
        "spawnml_register_backends"
    ]
    table = spawnml(plugin_venv, "plugins")
    assert table.returncode == 0
    assert any(
        line.startswith("broken") and "libexample.so.3" in line
        for line in table.stdout.splitlines()
    )

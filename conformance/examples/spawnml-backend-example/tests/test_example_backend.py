"""The example backend inherits spawnml's standard conformance tests."""

from __future__ import annotations

from spawnml_conformance.kit import BackendConformance


class TestExampleBackend(BackendConformance):
    backend_name = "example"
    max_cases_per_op = 12  # a plugin's own CI samples; the runner can check everything

"""The example third-party backend (conformance/examples) runs the whole kernel suite.

Its own test suite (inheriting the standard tests) runs where it is installed; this checks
its interpreter without installing it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spawnml.testing.kernel_suite import CASES
from spawnml_conformance.checks import run_kernel_case

EXAMPLE = Path(__file__).parents[1] / "examples" / "spawnml-backend-example" / "src"


@pytest.fixture(scope="module")
def example_backend():
    sys.path.insert(0, str(EXAMPLE))
    try:
        from spawnml_backend_example import ExampleBackend

        yield ExampleBackend()
    finally:
        sys.path.remove(str(EXAMPLE))


def test_the_example_interpreter_passes_the_kernel_suite(example_backend) -> None:
    failures = [o for o in (run_kernel_case(example_backend, c) for c in CASES)
                if o.status != "pass"]
    assert not failures, [(o.case, o.detail) for o in failures]

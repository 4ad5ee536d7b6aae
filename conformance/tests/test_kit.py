"""The plugin-author kit: overriding a standard test needs an xfail with a reason, and the
inherited tests run through the pytest plugin."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from spawnml_conformance.kit import BackendConformance


def test_overriding_a_standard_test_without_xfail_is_refused() -> None:
    with pytest.raises(TypeError, match="overrides a standard conformance test"):

        class TestQuiet(BackendConformance):
            backend_name = "cpu"

            def test_kernel_suite(self, backend, kernel_case):  # a "fix" that hides failures
                pass


def test_an_xfail_needs_a_reason() -> None:
    with pytest.raises(TypeError):

        class TestNoReason(BackendConformance):
            backend_name = "cpu"

            @pytest.mark.xfail
            def test_kernel_suite(self, backend, kernel_case):
                pass


def test_an_override_with_xfail_and_reason_is_accepted() -> None:
    class TestHonest(BackendConformance):
        backend_name = "cpu"

        @pytest.mark.xfail(reason="this target has no f16 (example)")
        def test_upload_download_roundtrip(self, backend, dt):
            raise AssertionError

        def test_something_new(self):  # new tests are always welcome
            pass

    assert TestHonest.backend_name == "cpu"


def test_a_subclass_inherits_the_standard_tests(tmp_path) -> None:
    test_file = tmp_path / "test_inherit.py"
    test_file.write_text(textwrap.dedent("""
        from spawnml_conformance.kit import BackendConformance

        class TestCpu(BackendConformance):
            backend_name = "cpu"
            ops = []  # the kernel suite and the contract tests only: fast
    """))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file),
         "--rootdir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    passed = int(done.stdout.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    assert passed >= 112 + 3  # every kernel-suite case plus the contract tests

"""Every error spawnml raises on purpose derives from SpawnMLError, one class per failure."""

from __future__ import annotations

import inspect

import pytest

from spawnml import errors


def _error_classes() -> list[type[BaseException]]:
    return [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, BaseException) and obj.__module__ == errors.__name__
    ]


def test_every_error_derives_from_spawnml_error() -> None:
    classes = _error_classes()
    assert len(classes) >= 12
    for cls in classes:
        assert issubclass(cls, errors.SpawnMLError), cls
        assert cls.__doc__, f"{cls.__name__} has no docstring"


def test_builtin_bases_keep_except_clauses_working() -> None:
    assert issubclass(errors.InvalidInputError, ValueError)
    assert issubclass(errors.OutOfMemoryError, MemoryError)
    for cls in (errors.KernelSyntaxError, errors.KernelTypeError, errors.KernelCompileError):
        assert issubclass(cls, errors.KernelError)


def test_kernel_compile_error_carries_source_and_log() -> None:
    err = errors.KernelCompileError("build failed", source="kernel void f() {}", log="1: oops")
    assert err.source == "kernel void f() {}"
    assert err.log == "1: oops"
    assert "--- compiler log ---\n1: oops" in str(err)
    assert str(errors.KernelCompileError("no log")) == "no log"


def test_public_errors_are_exported_from_the_package() -> None:
    import spawnml

    for name in ("SpawnMLError", "InvalidInputError", "BackendUnavailableError"):
        assert getattr(spawnml, name) is getattr(errors, name)
    with pytest.raises(errors.SpawnMLError):
        raise errors.PluginError("x")

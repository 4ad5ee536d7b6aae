"""Constructs outside the language raise KernelSyntaxError / KernelTypeError with file:line."""

from __future__ import annotations

import inspect

import bad_kernels as bad
import pytest

from spawnml.errors import KernelSyntaxError, KernelTypeError
from spawnml.kernel import kernel

F32 = ((4,), "float32")


def _line_of(fn, needle: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    for i, text in enumerate(lines):
        if needle in text:
            return first + i
    raise AssertionError(needle)


SYNTAX = [
    (bad.scatter_write, "x[0] = 1.0", "scatter writes"),
    (bad.while_loop, "while i < 3", "while loops"),
    (bad.python_call, "print(", "only intrinsics"),
    (bad.attribute_call, "x.sum()", "method calls"),
    (bad.lambda_use, "f = lambda", "lambda"),
    (bad.no_annotation, "def no_annotation", "must be annotated"),
    (bad.two_outputs, "def two_outputs", "exactly one Output"),
    (bad.string_constant, '"hello"', "constant 'hello'"),
    (bad.break_stmt, "        break", "break is not allowed"),
    (bad.list_literal, "[1, 2]", "lists are not allowed"),
    (bad.comprehension, "sum(v for", "sum"),
    (bad.try_block, "try:", "try/except"),
    (bad.unknown_attribute, "x.data", "x.data does not exist"),
    (bad.bare_return, "    return\n", "return needs a value"),
    (bad.import_inside, "import math", "imports are not allowed"),
]


@pytest.mark.parametrize("fn,needle,message", SYNTAX, ids=[s[0].__name__ for s in SYNTAX])
def test_syntax_error_names_file_line_and_construct(fn, needle, message):
    with pytest.raises(KernelSyntaxError) as info:
        kernel(fn)
    text = str(info.value)
    assert f"bad_kernels.py:{_line_of(fn, needle)}" in text, text
    assert message in text
    assert repr(fn.__name__) in text


TYPES = [
    (bad.mixed_types, "return x.flat", "types f32 and i32", KernelTypeError),
    (bad.int_true_division, "out.flat / 2", "use '//'", KernelTypeError),
    (bad.missing_return, "def missing_return", "without returning", KernelSyntaxError),
    (bad.non_bool_condition, "if out.flat", "must be a bool", KernelTypeError),
    (bad.wrong_rank, "x[out.flat]", "has 2 dimensions", KernelTypeError),
    (bad.runtime_tuple_index, "x.shape[out.flat]", "compile-time integers", KernelTypeError),
    (bad.returns_wrong_type, "return out.flat", "the kernel returns i32", KernelTypeError),
    (bad.runtime_static_range, "static_range(out.flat)", "compile-time integers", KernelTypeError),
    (bad.assign_loop_var, "i = 2", "loop variable", KernelSyntaxError),
]


@pytest.mark.parametrize("fn,needle,message,cls", TYPES, ids=[t[0].__name__ for t in TYPES])
def test_specialisation_error_names_file_line(fn, needle, message, cls):
    k = kernel(fn)
    shape = ((4, 3), "float32") if fn is bad.wrong_rank else F32
    with pytest.raises(cls) as info:
        k.specialize([shape], F32)
    text = str(info.value)
    assert f"bad_kernels.py:{_line_of(fn, needle)}" in text, text
    assert message in text, text


def test_recursion_is_rejected():
    import recursive_helpers

    with pytest.raises(KernelSyntaxError, match="recursion is not allowed"):
        recursive_helpers.recursive.specialize([F32], F32)


def test_kernel_cannot_be_called_directly():
    from spawnml.testing.suite_kernels import relu

    with pytest.raises(RuntimeError, match="specialise it"):
        relu(1.0)


def test_missing_and_unknown_constants():
    from spawnml.testing.suite_kernels import clip, leaky_relu

    with pytest.raises(KernelTypeError, match="missing constant 'hi'"):
        clip.specialize([F32], F32, lo=0.0)
    with pytest.raises(KernelTypeError, match="unknown constants"):
        leaky_relu.specialize([F32], F32, beta=1.0)
    with pytest.raises(KernelTypeError, match="must be a float"):
        leaky_relu.specialize([F32], F32, alpha="x")


def test_unsupported_dtype_is_rejected():
    from spawnml.testing.suite_kernels import relu

    with pytest.raises(KernelTypeError, match="float8_e4m3fn"):
        relu.specialize([((4,), "float8_e4m3fn")], F32)

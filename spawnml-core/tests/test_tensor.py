"""DeviceTensor on the cpu backend: round trips, ownership, close, views."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.dtypes import DType
from spawnml.errors import InvalidInputError, TensorClosedError
from spawnml.tensor import DeviceTensor
from spawnml_backend_cpu import CPUBackend


@pytest.fixture
def cpu() -> CPUBackend:
    return CPUBackend()


@pytest.mark.parametrize(
    "array",
    [
        np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        np.array([[1, -2], [3, 2**40]], dtype=np.int64),
        np.array([True, False, True]),
        np.float16([0.5, -1.25, 65504]),
        np.zeros((0, 5), np.float32),
        np.array(3.5, np.float64),  # a scalar
    ],
    ids=["f32-3d", "i64", "bool", "f16", "empty", "scalar"],
)
def test_numpy_round_trip(cpu: CPUBackend, array: np.ndarray) -> None:
    with DeviceTensor.from_numpy(cpu, array) as t:
        assert t.shape == array.shape
        assert t.dtype is DType(array.dtype.name)
        out = t.numpy()
    assert out.dtype == array.dtype
    np.testing.assert_array_equal(out, array)


def test_numpy_returns_a_copy(cpu: CPUBackend) -> None:
    t = DeviceTensor.from_numpy(cpu, np.ones(4, np.float32))
    host = t.numpy()
    host[:] = 7
    np.testing.assert_array_equal(t.numpy(), np.ones(4, np.float32))


def test_non_contiguous_input_is_uploaded_in_logical_order(cpu: CPUBackend) -> None:
    array = np.arange(12, dtype=np.int32).reshape(3, 4).T
    with DeviceTensor.from_numpy(cpu, array) as t:
        np.testing.assert_array_equal(t.numpy(), array)


def test_context_manager_closes_and_returns_the_buffer_to_the_pool(cpu: CPUBackend) -> None:
    with DeviceTensor.from_numpy(cpu, np.zeros(1000, np.float32)) as t:
        handle = t.buffer.handle
    assert t.closed
    assert cpu.pool.cached_bytes > 0
    with DeviceTensor.empty(cpu, (1000,), "float32") as again:
        assert again.buffer.handle is handle  # reused, not reallocated


def test_use_after_close_raises_a_clear_error(cpu: CPUBackend) -> None:
    t = DeviceTensor.from_numpy(cpu, np.ones((2, 2), np.float32))
    t.close()
    t.close()  # idempotent
    with pytest.raises(TensorClosedError, match=r"shape=\(2, 2\).*after close"):
        t.numpy()
    with pytest.raises(TensorClosedError):
        t.reshape((4,))
    assert "closed" in repr(t)


def test_reshape_is_a_view_over_the_same_buffer(cpu: CPUBackend) -> None:
    t = DeviceTensor.from_numpy(cpu, np.arange(6, dtype=np.float32))
    view = t.reshape((2, 3))
    assert view.buffer is t.buffer
    np.testing.assert_array_equal(view.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
    cpu.upload(np.full(6, 9, np.float32), t.buffer)  # a write through the owner...
    np.testing.assert_array_equal(view.numpy(), np.full((2, 3), 9, np.float32))  # ...shows here
    view.close()  # closing a view detaches it; the owner's buffer stays allocated
    assert view.closed and not t.closed
    assert cpu.pool.cached_bytes == 0
    np.testing.assert_array_equal(t.numpy(), np.full(6, 9, np.float32))


def test_view_of_a_closed_owner_is_closed(cpu: CPUBackend) -> None:
    t = DeviceTensor.from_numpy(cpu, np.arange(6, dtype=np.float32))
    view = t.reshape((3, 2)).reshape((6, 1))
    t.close()
    assert view.closed
    with pytest.raises(TensorClosedError):
        view.numpy()


def test_reshape_to_a_different_size_is_rejected(cpu: CPUBackend) -> None:
    with (
        DeviceTensor.from_numpy(cpu, np.zeros(6, np.float32)) as t,
        pytest.raises(InvalidInputError, match=r"cannot reshape \(6,\)"),
    ):
        t.reshape((4,))

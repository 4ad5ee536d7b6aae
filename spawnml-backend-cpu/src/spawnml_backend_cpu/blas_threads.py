"""BLAS runs with the backend's own thread count while a cpu kernel calls it.

OpenBLAS's results depend on its thread count (a threaded matrix-vector product splits its
sums), and that count comes from the environment: Ray sets ``OMP_NUM_THREADS=1`` in its
workers, so a model run in an actor differed from the same run in its driver. Pinned to
``CPUBackend.threads`` (``SPAWNML_CPU_THREADS``, else the cores this process may use), the
bits of every result depend on that one setting only, and BLAS never runs more threads than
the backend was given. The process's own setting is restored after each call.

The count is one setting of the whole process, so kernels that pin it take turns (a lock):
two threads running sessions at once no longer change each other's count mid-call. And it
is set through the library itself, not threadpoolctl's guarded setter: threadpoolctl (3.6+)
lets only the first thread that set OpenBLAS's count change it and silently ignores the
rest. A Ray Data actor measured kernel choices in ``__init__`` on its main thread, which so
became that thread; its ``__call__`` thread's pins were then ignored and its BLAS ran at
Ray's ``OMP_NUM_THREADS=1``, so its remove-bg masks differed from the driver's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@functools.cache
def _blas_libraries() -> tuple[Any, ...]:
    """threadpoolctl's controllers of the BLAS libraries loaded (numpy's OpenBLAS)."""
    from threadpoolctl import ThreadpoolController

    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


_TURNS = threading.RLock()
"""Held while a kernel runs with the count pinned (the count is process-wide)."""


def _setter(lib: Any) -> Callable[[int], Any]:
    """The library's own thread-count setter: threadpoolctl's OpenBLAS controller guards
    ``set_num_threads`` to its first calling thread; ``_real_set_num_threads`` is the call
    it makes for that thread (other libraries' setters have no such guard)."""
    return getattr(lib, "_real_set_num_threads", lib.set_num_threads)


def with_blas_threads(fn: F, threads: int) -> F:
    """``fn`` running with every loaded BLAS at ``threads`` threads, from any thread."""
    libraries = _blas_libraries()
    if not libraries:
        return fn
    setters = [_setter(lib) for lib in libraries]

    def pinned(*args: Any, **kwargs: Any) -> Any:
        with _TURNS:
            before = [lib.get_num_threads() for lib in libraries]
            for set_threads, n in zip(setters, before):
                if n != threads:
                    set_threads(threads)
            try:
                return fn(*args, **kwargs)
            finally:
                for set_threads, n in zip(setters, before):
                    if n != threads:
                        set_threads(n)

    return pinned  # type: ignore[return-value]

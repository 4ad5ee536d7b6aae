"""BLAS runs with the backend's own thread count while a cpu kernel calls it.

OpenBLAS's results depend on its thread count (a threaded matrix-vector product splits its
sums), and that count comes from the environment: Ray sets ``OMP_NUM_THREADS=1`` in its
workers, so a model run in an actor differed from the same run in its driver. Pinned to
``CPUBackend.threads`` (``SPAWNML_CPU_THREADS``, else the cores this process may use), the
bits of every result depend on that one setting only, and BLAS never runs more threads than
the backend was given. The process's own setting is restored after each call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@functools.cache
def _blas_libraries() -> tuple[Any, ...]:
    """threadpoolctl's controllers of the BLAS libraries loaded (numpy's OpenBLAS)."""
    from threadpoolctl import ThreadpoolController

    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


def with_blas_threads(fn: F, threads: int) -> F:
    """``fn`` running with every loaded BLAS at ``threads`` threads."""
    libraries = _blas_libraries()
    if not libraries:
        return fn

    def pinned(*args: Any, **kwargs: Any) -> Any:
        before = [lib.get_num_threads() for lib in libraries]
        for lib, n in zip(libraries, before):
            if n != threads:
                lib.set_num_threads(threads)
        try:
            return fn(*args, **kwargs)
        finally:
            for lib, n in zip(libraries, before):
                if n != threads:
                    lib.set_num_threads(n)

    return pinned  # type: ignore[return-value]

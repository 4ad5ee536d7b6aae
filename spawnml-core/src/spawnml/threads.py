"""How many worker threads a backend uses by default."""

from __future__ import annotations

import os


def default_threads(env_var: str) -> int:
    """``env_var`` if set (at least 1), else the cores this process may run on."""
    env = os.environ.get(env_var)
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def split_range(n: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """``[0, n)`` as at most ``parts`` consecutive ranges, each a multiple of ``align`` long
    but the last (so a vector loop in every range but the last runs without a tail)."""
    if parts <= 1 or n <= align:
        return [(0, n)]
    step = (-(-n // parts) + align - 1) // align * align
    return [(lo, min(lo + step, n)) for lo in range(0, n, step)]

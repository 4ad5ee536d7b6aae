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

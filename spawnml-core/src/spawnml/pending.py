"""A base for backends whose probe is real but whose runtime is not written yet."""

from __future__ import annotations

from typing import Any, ClassVar

from .backend import Backend
from .errors import BackendUnavailableError


class PendingRuntime(Backend):
    """Probes for real; constructing it raises :class:`BackendUnavailableError`.

    The error names the issue that will implement the runtime, so nothing ever pretends to
    compute. A backend drops this base class (for :class:`Backend`) when its runtime lands.
    """

    runtime_issue: ClassVar[str]
    """The issue that implements this backend's runtime, e.g. ``"issue #4"``."""

    def __new__(cls, *args: Any, **kwargs: Any) -> PendingRuntime:
        raise BackendUnavailableError(
            f"the {cls.name} runtime is not implemented yet ({cls.runtime_issue})"
        )

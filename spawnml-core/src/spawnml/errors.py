"""The exceptions spawnml raises: one base class, one subclass per kind of failure."""

from __future__ import annotations


class SpawnMLError(Exception):
    """Base class of every error spawnml raises on purpose."""


class InvalidModelError(SpawnMLError):
    """A model is malformed, truncated, inconsistent or unsafe to load."""


class InvalidInputError(SpawnMLError, ValueError):
    """A feed or argument has the wrong name, dtype, rank, shape or value."""


class UnsupportedOpError(SpawnMLError):
    """An operator, opset or attribute value is not implemented (where it was asked for)."""


class BackendUnavailableError(SpawnMLError):
    """A backend cannot run here: its library, driver or device is missing."""


class BackendError(SpawnMLError):
    """A backend runtime failed while executing work it had accepted."""


class KernelError(SpawnMLError):
    """Base class of kernel-language errors."""


class KernelSyntaxError(KernelError):
    """A kernel uses a construct outside the kernel language."""


class KernelTypeError(KernelError):
    """A kernel is ill-typed for the shapes, dtypes or constants it was specialised with."""


class KernelCompileError(KernelError):
    """A backend compiler rejected generated kernel source; carries the compiler log."""

    def __init__(self, message: str, *, source: str = "", log: str = "") -> None:
        super().__init__(message if not log else f"{message}\n--- compiler log ---\n{log}")
        self.source = source
        self.log = log


class ExportError(SpawnMLError):
    """A model cannot be exported for a target: a step the exported form cannot hold."""


class TensorClosedError(SpawnMLError):
    """A DeviceTensor was used after close()."""


class OutOfMemoryError(SpawnMLError, MemoryError):
    """A buffer larger than the backend allows, or than its memory holds, was requested."""


class PluginError(SpawnMLError):
    """A plugin is malformed (for example, a misspelled hook implementation)."""


class MissingDependencyError(SpawnMLError, ImportError):
    """An optional dependency a feature needs is not installed."""

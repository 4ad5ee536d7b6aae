"""Compile-only checking for a backend without its device (CUDA here: NVRTC, no GPU).

A backend package that can check its generated code without the device exports
``compile_check(kernel_ir)`` (``spawnml_backend_cuda.compile_check``). Every kernel the
kernel suite and the ops' lowerings produce is specialised exactly as on a device (through
``PreparedLowering``) and handed to it, once per distinct specialisation.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from spawnml.backend import Backend, Buffer, Capabilities
from spawnml.dtypes import DType
from spawnml.execute import PreparedLowering
from spawnml.kernel.ir import KernelIR
from spawnml.op import HostOnly
from spawnml.registry import backend_classes
from spawnml.testing.kernel_suite import KernelCase, unsupported_reason

from .cases import ConformanceCase
from .checks import FAIL, HOST, NOT_IMPLEMENTED, PASS, SKIP, Outcome, exclusion

ALL_DTYPES = Capabilities(dtypes=frozenset(DType) - {DType.bfloat16})


def find_compile_check(name: str) -> tuple[Callable[[KernelIR], Any], Capabilities] | None:
    """The backend's ``compile_check`` and declared capabilities, if its package has one."""
    entry = backend_classes().get(name)
    if entry is None:
        return None
    module = sys.modules[entry[0].__module__]
    package = importlib.import_module(module.__name__.split(".")[0])
    check = getattr(package, "compile_check", None) or getattr(module, "compile_check", None)
    if check is None:
        return None
    caps = getattr(module, "CAPABILITIES", None) or getattr(package, "CAPABILITIES", None)
    return check, caps if isinstance(caps, Capabilities) else ALL_DTYPES


class CompileCheckBackend(Backend):
    """Host memory plus a target's compile check: compiling is the whole check, and
    launches do nothing. Each distinct specialisation is checked once."""

    name = "compile-check"

    def __init__(self, target: str, check: Callable[[KernelIR], Any], caps: Capabilities) -> None:
        self.target, self._check, self._caps = target, check, caps
        self.checked: set[str] = set()

    @classmethod
    def probe(cls) -> Any:  # pragma: no cover - never registered
        raise NotImplementedError

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    def _allocate(self, nbytes: int) -> np.ndarray:
        return np.empty(nbytes, np.uint8)

    def _release(self, handle: Any) -> None:
        pass

    def _write(self, handle: np.ndarray, data: np.ndarray) -> None:
        handle[: data.nbytes] = data.reshape(-1).view(np.uint8)

    def _read(self, handle: np.ndarray, nbytes: int) -> np.ndarray:
        return handle[:nbytes].copy()

    def compile(self, kernel: KernelIR) -> KernelIR:
        key = kernel.key or kernel.fingerprint()
        if key not in self.checked:
            self._check(kernel)  # raises KernelCompileError with the compiler's log
            self.checked.add(key)
        return kernel

    def launch(self, program: Any, output: Buffer, inputs: Sequence[Buffer]) -> None:
        pass


def _failure(case: str, exc: Exception) -> Outcome:
    return Outcome(FAIL, case, None, f"{type(exc).__name__}: {exc}"[:500])


def check_kernel_case(backend: CompileCheckBackend, case: KernelCase) -> Outcome:
    reason = unsupported_reason(backend, case)
    if reason:
        return Outcome(SKIP, case.name, None, reason)
    try:
        spec = case.kernel.specialize(case.inputs, (case.out_shape, case.out_dtype), **case.consts)
        backend.compile(spec)
    except Exception as exc:  # noqa: BLE001 - reported as this case's failure
        return _failure(case.name, exc)
    return Outcome(PASS, case.name)


def check_op_case(backend: CompileCheckBackend, case: ConformanceCase) -> Outcome:
    """Lower the case as a session would and compile every launch."""
    if case.infer_error:
        return Outcome(FAIL, case.name, None, case.infer_error)
    reason = exclusion(backend, case)
    if reason:
        return Outcome(SKIP, case.name, None, reason.replace(backend.name, backend.target))
    if case.op.host_only:
        return Outcome(HOST, case.name, None, "declared host_only: computed by its reference")
    from spawnml.dtypes import dtype as as_dtype
    from spawnml.errors import UnsupportedOpError
    from spawnml.op import TensorInfo

    infos = [None if a is None else TensorInfo(as_dtype(a.dtype), tuple(a.shape))
             for a in case.inputs]
    values = [a if i in case.op.value_inputs else None for i, a in enumerate(case.inputs)]
    try:
        lowering = case.op.lower(case.node, infos, case.outputs, values)
        PreparedLowering(backend, lowering, infos, case.outputs).close()
    except HostOnly as exc:
        return Outcome(HOST, case.name, None, f"HostOnly: {exc}")
    except UnsupportedOpError as exc:
        return Outcome(NOT_IMPLEMENTED, case.name, None, str(exc))
    except Exception as exc:  # noqa: BLE001
        return _failure(case.name, exc)
    return Outcome(PASS, case.name)

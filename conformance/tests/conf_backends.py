"""Throw-away backends registered through a throw-away plugin, for the suite's own tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from spawnml import hookimpl, registry
from spawnml.backend import BackendInfo, Capabilities, DeviceKind
from spawnml.dtypes import DType
from spawnml.errors import InvalidInputError
from spawnml.kernel import ir
from spawnml.plugins import get_plugin_manager
from spawnml_backend_cpu.backend import CPUBackend


def _adds_two_loads(kernel: ir.KernelIR) -> bool:
    return any(isinstance(e, ir.Binary) and e.op == "add" and e.type.is_float
               and isinstance(e.a, ir.Load) and isinstance(e.b, ir.Load)
               for e in ir.all_exprs(kernel.body))


class WrongAddBackend(CPUBackend):
    """cpu, except that a kernel adding two float tensors is off by 1e-3 (a planted bug)."""

    name = "wrong-add"

    @classmethod
    def probe(cls) -> BackendInfo:
        return BackendInfo(cls.name, True, device="cpu with a planted Add bug",
                           device_kind=DeviceKind.EMULATED)

    def compile(self, kernel: ir.KernelIR) -> Any:
        return super().compile(kernel), kernel

    def launch(self, program: Any, output: Any, inputs: Any) -> None:
        compiled, kernel = program
        super().launch(compiled, output, inputs)
        if _adds_two_loads(kernel) and kernel.output.dtype is DType.float32:
            values = output.handle[: kernel.output.size * 4].view(np.float32)
            values += np.float32(1e-3)


class NarrowBackend(CPUBackend):
    """cpu declaring only float32/int32/uint8 and lowering nothing (no float16, no int64):
    the suite must derive its exclusions from these capabilities."""

    name = "narrow"
    _CAPS = Capabilities(dtypes=frozenset({DType.float32, DType.int32, DType.uint8}))

    def storage_dtype(self, dt: DType) -> DType:
        if dt not in self._CAPS.dtypes:
            raise InvalidInputError(f"backend {self.name!r} cannot store dtype {dt}")
        return dt

    @classmethod
    def probe(cls) -> BackendInfo:
        return BackendInfo(cls.name, True, device="cpu, narrow dtypes",
                           device_kind=DeviceKind.EMULATED)


@contextlib.contextmanager
def plugin_backends(*classes: type) -> Iterator[None]:
    """Register ``classes`` through a throw-away plugin for the duration of the block."""

    class Plugin:
        @staticmethod
        @hookimpl
        def spawnml_register_backends(register: Any) -> None:
            for cls in classes:
                register(cls)

    pm = get_plugin_manager()
    plugin = Plugin()
    pm.register(plugin, "throwaway_test_backends")
    registry.reset()
    try:
        yield
    finally:
        pm.pm.unregister(plugin)
        pm.records = [r for r in pm.records if r.name != "throwaway_test_backends"]
        registry.reset()

"""Checks wasmtime: an engine, a SIMD128 module compiled, instantiated and run."""

from __future__ import annotations

from importlib import metadata

from spawnml.backend import BackendInfo, DeviceKind
from spawnml.probing import available, cached_probe, cpu_model, import_failure, unavailable

NAME = "wasm"
# Kernels are rendered with SIMD128, so the probe needs it too: (1,2,3,4)+(5,6,7,8), lane 3.
_SIMD_PROBE = """
(module (func (export "probe") (result i32)
  (i32x4.extract_lane 3 (i32x4.add (v128.const i32x4 1 2 3 4) (v128.const i32x4 5 6 7 8)))))
"""


@cached_probe(NAME)
def probe() -> BackendInfo:
    """Import wasmtime, compile and run a SIMD128 function on a fresh engine."""
    try:
        import wasmtime
    except ImportError as exc:
        return unavailable(NAME, import_failure(exc, "wasmtime"))
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    try:
        module = wasmtime.Module(engine, _SIMD_PROBE)
        result = wasmtime.Instance(store, module, []).exports(store)["probe"](store)
    except wasmtime.WasmtimeError as exc:
        return unavailable(NAME, f"wasmtime cannot run SIMD128 code: {exc}")
    if result != 12:
        return unavailable(NAME, f"wasmtime computed {result} for 4 + 8 in a SIMD128 lane")
    version = metadata.version("wasmtime")
    return available(NAME, f"wasmtime {version} (SIMD128) on {cpu_model()}", DeviceKind.EMULATED)

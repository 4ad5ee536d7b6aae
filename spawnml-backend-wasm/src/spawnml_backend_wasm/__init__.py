"""spawnml's wasm backend: WebAssembly (SIMD128) kernels run by wasmtime."""

from .backend import WasmBackend
from .probe import probe

__all__ = ["WasmBackend", "probe"]

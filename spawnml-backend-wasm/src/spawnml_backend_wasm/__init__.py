"""spawnml's wasm backend: WebAssembly (SIMD128) kernels run by wasmtime."""

from .backend import WasmBackend

__all__ = ["WasmBackend"]

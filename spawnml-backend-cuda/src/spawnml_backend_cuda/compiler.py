"""CUDA C++ -> PTX with NVRTC (cuda-bindings), or nvcc when NVRTC is not installed.

Neither needs a GPU, which is what lets CI compile-check every generated kernel.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from spawnml.errors import BackendUnavailableError, KernelCompileError
from spawnml.kernel.disk_cache import KernelDiskCache

from .probe import nvrtc_version

DEFAULT_ARCH = (7, 5)
"""Compute capability compile-only checks target: the oldest NVRTC 13 still accepts."""

_disk = KernelDiskCache("cuda", "ptx")


def target_arch(device: tuple[int, int]) -> tuple[int, int]:
    """The newest virtual architecture the compiler accepts that the device can run (PTX is
    JIT-compiled forward by the driver)."""
    try:
        from cuda.bindings import nvrtc

        _, archs = nvrtc.nvrtcGetSupportedArchs()
    except ImportError:
        return device
    fitting = [a for a in archs if a <= device[0] * 10 + device[1]]
    if not fitting:
        raise BackendUnavailableError(
            f"NVRTC supports compute {min(archs) // 10}.{min(archs) % 10} and newer; "
            f"this GPU is compute {device[0]}.{device[1]}"
        )
    return divmod(max(fitting), 10)


def compiler_version() -> str:
    """"nvrtc 13.0", "nvcc" or raises BackendUnavailableError when neither is present."""
    version = nvrtc_version()
    if version is not None:
        return f"nvrtc {version}"
    if shutil.which("nvcc"):
        return "nvcc"
    raise BackendUnavailableError(
        "neither NVRTC (pip install cuda-bindings nvidia-cuda-nvrtc) nor nvcc is installed"
    )


def compile_ptx(source: str, arch: tuple[int, int] = DEFAULT_ARCH, what: str = "kernel",
                *, cache: bool = True) -> str:
    """PTX for compute capability ``arch``; KernelCompileError with the log.

    With ``cache`` the PTX is kept on disk, keyed by source hash, arch and compiler version.
    """
    compiler = compiler_version()
    key = (hashlib.sha256(source.encode()).hexdigest(), f"sm_{arch[0]}{arch[1]}", compiler)
    cached = _disk.get(*key) if cache else None
    if cached is not None:
        return cached.decode()
    if compiler == "nvcc":
        ptx = _nvcc(source, arch, what)
    else:
        ptx = _nvrtc(source, arch, what)
    _disk.put(ptx.encode(), *key)
    return ptx


def _nvrtc(source: str, arch: tuple[int, int], what: str) -> str:
    from cuda.bindings import nvrtc

    def check(result: tuple) -> tuple:
        if result[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise KernelCompileError(f"NVRTC failed ({result[0].name}) on {what}", source=source)
        return result[1:]

    (program,) = check(nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], []))
    try:
        options = [f"--gpu-architecture=compute_{arch[0]}{arch[1]}".encode(), b"--std=c++17"]
        (result,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
        (log_size,) = check(nvrtc.nvrtcGetProgramLogSize(program))
        log = b""
        if log_size > 1:  # the size counts the terminating NUL: 1 means no log
            log = b" " * log_size
            check(nvrtc.nvrtcGetProgramLog(program, log))
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise KernelCompileError(
                f"NVRTC could not compile {what} for sm_{arch[0]}{arch[1]}",
                source=source,
                log=log.rstrip(b"\0").decode(errors="replace").strip(),
            )
        (size,) = check(nvrtc.nvrtcGetPTXSize(program))
        ptx = b" " * size
        check(nvrtc.nvrtcGetPTX(program, ptx))
        return ptx.rstrip(b"\0").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def _nvcc(source: str, arch: tuple[int, int], what: str) -> str:
    with tempfile.TemporaryDirectory(prefix="spawnml-cuda-") as tmp:
        src, out = Path(tmp, "kernel.cu"), Path(tmp, "kernel.ptx")
        src.write_text(source, encoding="utf-8")
        done = subprocess.run(
            ["nvcc", "--ptx", f"-arch=compute_{arch[0]}{arch[1]}", "-o", str(out), str(src)],
            capture_output=True, text=True, check=False,
        )
        if done.returncode != 0:
            raise KernelCompileError(
                f"nvcc could not compile {what} for sm_{arch[0]}{arch[1]}",
                source=source, log=(done.stderr or done.stdout).strip(),
            )
        return out.read_text(encoding="utf-8")

"""The webgl backend: GLSL ES 3.00 shaders on an OpenGL ES 3.0 context (the WebGL2 feature set).

Buffers are R32UI textures (``textures.py``); a kernel is a fragment shader drawn over the
output texture's rows, one fragment per output element (measured twice as fast as transform
feedback on llvmpipe, see README.md). GL queues draws; reads wait for them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from spawnml.backend import Backend, BackendInfo, Buffer, Capabilities
from spawnml.dtypes import DType
from spawnml.errors import (
    BackendError,
    BackendUnavailableError,
    InvalidInputError,
    KernelCompileError,
)
from spawnml.kernel import ir
from spawnml.probing import ensure_xdg_runtime_dir

from .layout import TextureLayout
from .packing import Packer, SlotPlan, plan_slots
from .probe import probe
from .readback import PixelReader
from .renderer import VERTEX_SHADER, GLSLRenderer
from .textures import TextureBuffer, read_words, write_words

WEBGL2_TEXTURE_UNITS = 16
"""Fragment-shader texture units every WebGL2 implementation offers (MAX_TEXTURE_IMAGE_UNITS)."""
_ES3 = 300


@dataclass
class WebGLProgram:
    """A compiled kernel: the GL program, its empty vertex array, and where inputs go."""

    kernel: ir.KernelIR
    source: str
    program: Any
    vao: Any
    plan: SlotPlan

    @property
    def key(self) -> str:
        """The specialisation's key (one program per key on a backend)."""
        return self.kernel.key


class WebGLBackend(Backend):
    """GLSL ES 3.00 shaders on an OpenGL ES 3.0 context (the WebGL2 feature set)."""

    name = "webgl"

    @classmethod
    def probe(cls) -> BackendInfo:
        return probe()

    def __init__(
        self, texture_width: int | None = None, max_texture_units: int | None = None,
        portable: bool = False,
    ) -> None:
        """``texture_width``/``max_texture_units`` lower the WebGL2 limits (tests use this);
        ``portable=True`` plans for any WebGL2 context (``export-web``): 16 texture units and
        none of this context's own workarounds (llvmpipe's loop limit), so its results here
        may differ."""
        info = probe()
        if not info.available:
            raise BackendUnavailableError(f"webgl: {info.reason}")
        ensure_xdg_runtime_dir()
        import moderngl

        from .egl import EGLContext

        self._egl = EGLContext(3, 0)
        self._egl.make_current()
        self.ctx = moderngl.create_context(require=_ES3, context=self._egl)
        self.reader = PixelReader(self._egl.load_opengl_function)
        limit = self.reader.get_integer(0x0D33)  # GL_MAX_TEXTURE_SIZE
        llvmpipe = "llvmpipe" in self.ctx.info["GL_RENDERER"]
        units = self.reader.get_integer(0x8872)  # GL_MAX_TEXTURE_IMAGE_UNITS
        units = min(units, WEBGL2_TEXTURE_UNITS)
        if portable:
            max_texture_units = min(max_texture_units or WEBGL2_TEXTURE_UNITS, WEBGL2_TEXTURE_UNITS)
        self.texture_units = max(1, min(units, max_texture_units or units))
        self.layout = TextureLayout.for_limit(limit, texture_width)
        self._caps = Capabilities(
            dtypes=frozenset({DType.float32, DType.int32, DType.uint32}),
            float16_arithmetic=False,
            max_buffer_bytes=self.layout.max_words * 4,
            max_kernel_inputs=1024,  # more than texture_units are packed (packing.py)
            extras={
                "max_texture_size": limit,
                "texture_width": self.layout.width,
                "max_texture_units": self.texture_units,
                "texture_format": "R32UI",
                "output": "fragment",
                "flushes_denormals": True,  # llvmpipe does; GLSL ES 3.00 4.5.1 allows it
                "renderer": self.ctx.info["GL_RENDERER"],
                # llvmpipe silently ends shaders after 65535 loop iterations.
                "max_loop_iterations": 65535 if llvmpipe and not portable else None,
            },
        )
        self.reader.clear_errors()  # ctx.info asks for desktop-only enums
        self._programs: dict[str, WebGLProgram] = {}
        # GL objects of programs no longer referenced (dropped from the bounded program
        # cache and by every plan), released on the next compile with the context current:
        # a finalizer may run on any thread, and GL calls belong to the context's own.
        self._unused: list[tuple[Any, Any]] = []
        self._finalizers: list[weakref.finalize] = []
        self._packer: Packer | None = None
        self._pack: TextureBuffer | None = None

    def _current(self) -> Any:
        """The moderngl context, after making its EGL context current on this thread."""
        if self._egl.handle is None:
            raise BackendError("the webgl backend was closed")
        if not self._egl.is_current():
            self._egl.make_current()
        return self.ctx

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    # -- raw memory ---------------------------------------------------------------------
    def _allocate(self, nbytes: int) -> TextureBuffer:
        return TextureBuffer(self._current(), self.layout, -(-nbytes // 4))

    def _release(self, handle: TextureBuffer) -> None:
        if self._egl.handle is not None:
            self._current()
            handle.release()

    def _write(self, handle: TextureBuffer, data: Any) -> None:
        self._current()
        write_words(handle, self.layout, data)

    def _read(self, handle: TextureBuffer, nbytes: int) -> Any:
        return read_words(self._current(), self.reader, handle, self.layout, nbytes)

    # -- kernels ------------------------------------------------------------------------
    def renderer(self, plan: SlotPlan) -> GLSLRenderer:
        return GLSLRenderer(self.storage_dtype, self.layout, plan.slots())

    source_suffix = "frag"

    def check_limits(self, kernel: ir.KernelIR) -> None:
        super().check_limits(kernel)
        if kernel.size > self.layout.max_words:
            raise KernelCompileError(
                f"webgl: {kernel.name} has {kernel.size} output elements, more than one "
                f"texture holds ({self.layout.max_words})"
            )

    def renderer_for(self, kernel: ir.KernelIR) -> GLSLRenderer:
        return self.renderer(plan_slots(kernel, self.texture_units, self.layout))

    def build(self, kernel: ir.KernelIR, source: str, renderer: GLSLRenderer) -> WebGLProgram:
        ctx = self._current()
        self._release_unused()
        plan = plan_slots(kernel, self.texture_units, self.layout)  # as renderer_for made it
        try:
            program = ctx.program(vertex_shader=VERTEX_SHADER, fragment_shader=source)
        except Exception as exc:  # moderngl.Error carries the GLSL compiler's log
            raise KernelCompileError(
                f"webgl: the GLSL ES shader of {kernel.name} ({kernel.source}) failed to "
                f"compile:\n{exc}\n--- source ---\n{source}"
            ) from exc
        units = {f"sp_tex{u}": u for u, _ in plan.slots().values()}
        for uniform, unit in units.items():
            if uniform in program:  # unused inputs are optimised away
                program[uniform] = unit
        compiled = WebGLProgram(kernel, source, program, ctx.vertex_array(program, []), plan)
        self._finalizers = [f for f in self._finalizers if f.alive]
        self._finalizers.append(
            weakref.finalize(compiled, self._unused.append, (compiled.vao, compiled.program)))
        return compiled

    def _release_unused(self) -> None:
        while self._unused:
            for gl_object in self._unused.pop():
                gl_object.release()

    def launch(self, program: WebGLProgram, output: Buffer, inputs: Sequence[Buffer]) -> None:
        import moderngl

        ctx = self._current()
        k, plan = program.kernel, program.plan
        _check_buffers(k, output, inputs)
        handles: list[TextureBuffer] = [b.handle for b in inputs]
        if plan.packed:
            self._pack_inputs(plan, handles)
        for unit, slot in enumerate(plan.direct):
            handles[slot].texture.use(unit)
        target: TextureBuffer = output.handle
        # Sampling the texture being rendered into is a feedback loop (undefined in GL):
        # render into a fresh texture and swap it in.
        aliased = any(h is target for h in handles)
        if aliased:
            target = TextureBuffer(ctx, self.layout, target.rows * self.layout.width)
        framebuffer = target.framebuffer(ctx)
        framebuffer.use()
        framebuffer.viewport = self.layout.viewport(k.size)
        program.vao.render(mode=moderngl.TRIANGLES, vertices=3)
        if aliased:
            output.handle.swap(target)
            target.release()

    # -- recorded plans ----------------------------------------------------------------------
    device_timing = "queries"

    def _timer(self) -> Any:
        """A reusable GL timer query (EXT_disjoint_timer_query) for profiles."""
        query = self.__dict__.get("_timer_query")
        if query is None:
            query = self.__dict__["_timer_query"] = self._current().query(time=True)
        return query

    def bind(
        self, program: WebGLProgram, output: Buffer, inputs: Sequence[Buffer]
    ) -> Callable[[], None]:
        """The draw with its checks, texture units and viewport resolved once (textures and
        framebuffers are read from the handles per draw: an aliased launch swaps them).
        Packed inputs and an input that is the output keep the per-launch path."""
        k, plan = program.kernel, program.plan
        handles: list[TextureBuffer] = [b.handle for b in inputs]
        if plan.packed or any(h is output.handle for h in handles):
            return super().bind(program, output, inputs)
        _check_buffers(k, output, inputs)
        import moderngl

        return _Draw(self, [(unit, handles[slot]) for unit, slot in enumerate(plan.direct)],
                     output.handle, self.layout.viewport(k.size),
                     program.vao, moderngl.TRIANGLES)  # fmt: skip

    def sequence(self, bound: Sequence[Callable[[], None]]) -> Callable[[], None]:
        draws = tuple(bound)
        if len(draws) < 2 or not all(isinstance(d, _Draw) for d in draws):
            return super().sequence(draws)
        current = self._current
        calls = tuple(d.draw for d in draws)  # type: ignore[attr-defined]

        def run() -> None:
            ctx = current()  # one make-current check for the whole run
            for draw in calls:
                draw(ctx)

        return run

    def _pack_inputs(self, plan: SlotPlan, handles: list[TextureBuffer]) -> None:
        ctx = self.ctx
        if self._packer is None:
            self._packer = Packer(ctx, self.layout)
        rows = self.layout.rows(plan.pack_words)
        if self._pack is None or self._pack.rows < rows:
            if self._pack is not None:
                self._pack.release()
            self._pack = TextureBuffer(ctx, self.layout, plan.pack_words)
        self._packer.pack(plan, handles, self._pack)
        self._pack.texture.use(plan.pack_unit)

    def synchronize(self) -> None:
        self._current().finish()

    def close(self) -> None:
        if self._egl.handle is None:
            return
        self._current()
        super().close()
        for finalizer in self._finalizers:  # every program still alive, cached or not
            finalizer()
        self._finalizers.clear()
        self._release_unused()
        self._programs.clear()
        if self._packer is not None:
            self._packer.release()
        if self._pack is not None:
            self._pack.release()
        self.ctx.release()
        self._egl.release()


class _Draw:
    """One bound draw: input textures to units, render into the output over a viewport."""

    __slots__ = ("backend", "units", "target", "viewport", "vao", "mode")

    def __init__(self, backend: WebGLBackend, units: list[tuple[int, TextureBuffer]],
                 target: TextureBuffer, viewport: tuple[int, int, int, int], vao: Any,
                 mode: int) -> None:  # fmt: skip
        self.backend, self.units, self.target = backend, units, target
        self.viewport, self.vao, self.mode = viewport, vao, mode

    def draw(self, ctx: Any) -> None:
        for unit, handle in self.units:
            handle.texture.use(unit)
        framebuffer = self.target.framebuffer(ctx)
        framebuffer.use()
        framebuffer.viewport = self.viewport
        self.vao.render(mode=self.mode, vertices=3)

    def __call__(self) -> None:
        self.draw(self.backend._current())

    def profiled(self) -> float:
        """Draw once inside a GL timer query; the device time it reports, in seconds."""
        ctx = self.backend._current()
        query = self.backend._timer()
        with query:
            self.draw(ctx)
        return query.elapsed * 1e-9


def _check_buffers(k: ir.KernelIR, output: Buffer, inputs: Sequence[Buffer]) -> None:
    """A launch's buffers match its kernel: the input count, and room for every element."""
    if len(inputs) != len(k.inputs):
        raise BackendError(f"webgl: {k.name} takes {len(k.inputs)} inputs, got {len(inputs)}")
    for buffer, spec in zip((output, *inputs), (k.output, *k.inputs), strict=True):
        if buffer.nbytes < spec.size * 4:
            raise InvalidInputError(
                f"webgl: {k.name} needs {spec.size} words for {spec.name!r}; its buffer "
                f"holds {buffer.nbytes} bytes"
            )

"""A pipeline as recorded plans: what ``spawnml export-web --pipeline TASK`` writes.

A :class:`RecordingDevice` stands in for a pipeline's :class:`~.device.Device`: each image
operation compiles its kernel for the backend and appends the launch to a
:class:`spawnml.export.RecordedModel` instead of running it, and each model run splices the
model's own recorded plan in. So a page runs exactly the kernels the Python pipeline runs,
for one image size fixed at export, with every step on the device.

A pipeline takes part by implementing ``record(dev, image)``: it calls its own device
methods on the :class:`PlanTensor` ``image`` and names the outputs with ``dev.output``. A
second ``dev.stage(name)`` starts another plan that the page runs on the first one's outputs
(depth's colour map: a new map without a new inference).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spawnml.backend import Backend
from spawnml.dtypes import DType, dtype as as_dtype
from spawnml.errors import ExportError, InvalidInputError
from spawnml.export import ExportLaunch, RecordedModel, record_model
from spawnml.kernel import Kernel
from spawnml.tensor import DeviceTensor

from .base import Pipeline
from .device import Device


@dataclass(frozen=True)
class PlanTensor:
    """A tensor of the plan being recorded: a numbered buffer of the current stage with its
    shape and dtype (what a pipeline's image operations see in place of a DeviceTensor).
    Closing the tensor that owns an intermediate buffer lets a later launch reuse it
    (launches run in order); a reshaped view owns nothing."""

    shape: tuple[int, ...]
    dtype: DType
    buffer: int
    owner: RecordingDevice | None = field(default=None, compare=False, repr=False)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def reshape(self, shape: Sequence[int]) -> PlanTensor:
        shape = tuple(int(d) for d in shape)
        if int(np.prod(shape, dtype=np.int64)) != self.size:
            raise InvalidInputError(f"cannot reshape {self.shape} to {shape}")
        return PlanTensor(shape, self.dtype, self.buffer)

    def close(self) -> None:
        if self.owner is not None:
            self.owner.release(self.buffer)

    def numpy(self) -> np.ndarray:
        raise ExportError("a recorded pipeline keeps every step on the device; this step "
                          "reads a tensor on the host")


@dataclass
class PipelineRecording:
    """The plans of one pipeline on one backend: ``stages`` in the order a page runs them
    (the first takes the image), and ``page``: what the page needs besides (labels...)."""

    task: str
    image_size: tuple[int, int]
    stages: dict[str, RecordedModel] = field(default_factory=dict)
    page: dict[str, Any] = field(default_factory=dict)


class RecordingDevice(Device):
    """A Device that records launches into the current stage's plan instead of running
    them; model runs splice the model's recorded plan (its weights are added once)."""

    def __init__(self, backend: Backend, model: Any, recording: PipelineRecording) -> None:
        super().__init__(backend)
        self.model = model
        self.recording = recording
        self.page = recording.page
        self._model_plan: RecordedModel | None = None
        self._shared: dict[int, int] = {}
        self._free: dict[int, list[int]] = {}  # nbytes -> released intermediate buffers
        self.plan = RecordedModel(backend)
        self.stage("main")

    def stage(self, name: str) -> None:
        """Start the plan of stage ``name``: later inputs, launches and outputs go there."""
        if name in self.recording.stages:
            raise ExportError(f"stage {name!r} is recorded twice")
        self.plan = RecordedModel(self.backend)
        self.recording.stages[name] = self.plan
        self._free = {}

    def release(self, buffer: int) -> None:
        """A closed intermediate: later launches of this stage may write its buffer."""
        if self.plan.buffers[buffer].kind != "intermediate":
            return  # inputs, outputs and constants keep their buffers
        free = self._free.setdefault(self.plan.buffers[buffer].nbytes, [])
        if buffer not in free:
            free.append(buffer)

    def _intermediate(self, nbytes: int) -> int:
        free = self._free.get(nbytes)
        return free.pop() if free else self.plan.add_buffer(nbytes)

    def input(self, name: str, shape: Sequence[int], dtype: DType | str | np.dtype
              ) -> PlanTensor:
        """A new input of the current stage."""
        t = self.plan.add_input(name, as_dtype(dtype), tuple(int(d) for d in shape))
        return PlanTensor(t.shape, t.dtype, t.buffer)

    def output(self, name: str, tensor: PlanTensor) -> None:
        """Name ``tensor`` an output of the current stage."""
        self.plan.add_output(name, tensor.dtype, tensor.shape, tensor.buffer)

    def put(self, array: np.ndarray) -> PlanTensor:  # type: ignore[override]
        """A constant of the plan: its bytes as this backend stores them."""
        with DeviceTensor.from_numpy(self.backend, np.ascontiguousarray(array)) as t:
            data = self.backend.read_bytes(t.buffer)
            buffer = self.plan.add_buffer(t.buffer.nbytes, "weight", data)
            return PlanTensor(tuple(t.shape), t.dtype, buffer)

    def run(self, k: Kernel, inputs: Sequence[Any], shape: Sequence[int],
            dtype: DType | str | np.dtype, **consts: Any) -> PlanTensor:  # type: ignore[override]
        dt = as_dtype(dtype)
        tensors = [a if isinstance(a, PlanTensor) else self.put(np.asarray(a)) for a in inputs]
        shape = tuple(int(d) for d in shape)
        spec = k.specialize([(t.shape, t.dtype) for t in tensors], (shape, dt), **consts)
        nbytes = int(np.prod(shape, dtype=np.int64)) * self.backend.storage_dtype(dt).itemsize
        out = PlanTensor(shape, dt, self._intermediate(nbytes), self)
        self.launches.append(k.name)
        if nbytes:
            self.plan.launches.append(ExportLaunch(self.backend.compile(spec), out.buffer,
                                                   tuple(t.buffer for t in tensors), k.name))
        return out

    def run_model(self, session: Any, input_name: str, x: Any, output: str  # type: ignore[override]
                  ) -> PlanTensor:
        if not isinstance(x, PlanTensor):
            raise ExportError("a recorded model run takes a tensor of the plan")
        if self._model_plan is None:
            self._model_plan = record_model(self.model, self.backend, {input_name: x.shape})
        model = self._model_plan
        if [t.name for t in model.inputs] != [input_name]:
            raise ExportError(f"the pipeline feeds only {input_name!r}; the model takes "
                              f"{[t.name for t in model.inputs]}")
        want = next((t for t in model.outputs if t.name == output), None)
        if want is None:
            raise ExportError(f"the model has no output {output!r}")
        shared = self._shared if self.plan is self.recording.stages["main"] else {}
        buffers = self.plan.splice(model, {input_name: x.buffer}, shared)
        for name, buffer in buffers.items():
            if name != output:  # written by the model, never read: scratch for later launches
                self.release(buffer)
        return PlanTensor(want.shape, want.dtype, buffers[output], self)

    def get(self, tensor: Any, close: bool = True) -> np.ndarray:  # type: ignore[override]
        raise ExportError("a recorded pipeline keeps every step on the device; this step "
                          "reads a tensor on the host")


def record_pipeline(pipeline: Pipeline, image_size: tuple[int, int]) -> PipelineRecording:
    """Record ``pipeline`` (built on the backend to record for) for RGB images of
    ``image_size`` (height, width): its ``record`` method's stages, as plans."""
    h, w = (int(d) for d in image_size)
    if h < 1 or w < 1:
        raise InvalidInputError(f"image size must be positive, got {image_size}")
    if getattr(pipeline, "record", None) is None:
        raise ExportError(f"the {pipeline.task} pipeline cannot be recorded for a page")
    recording = PipelineRecording(pipeline.task, (h, w))
    dev = RecordingDevice(pipeline.device.backend, str(pipeline.model_path), recording)
    real = pipeline.device
    pipeline.device = dev
    try:
        pipeline.record(dev, dev.input("image", (h, w, 3), DType.uint8))
    finally:
        pipeline.device = real
    for name, plan in recording.stages.items():
        if not plan.outputs:
            raise ExportError(f"stage {name!r} of the {pipeline.task} pipeline has no outputs")
    return recording

"""What every pipeline shares: model resolution, the session, the pixel device, metadata."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from spawnml.backend import Backend
from spawnml.errors import InvalidInputError
from spawnml.hub import ProgressBar
from spawnml.registry import get_available_backends
from spawnml.session import InferenceSession
from spawnml.tensor import DeviceTensor

from .device import Device
from .models import resolve_model

ModelRef = str | os.PathLike | None
BackendRef = str | Backend | Sequence[str | Backend] | None
Floats = str | Sequence[float] | None  # "a,b,c" or a sequence


def backend_list(backend: BackendRef) -> list[str | Backend]:
    """The session's backends: the named one(s) then cpu (which runs what a device cannot,
    as the session's placement reports); all available ones when None."""
    if backend is None:
        return list(get_available_backends())
    names = [backend] if isinstance(backend, str | Backend) else list(backend)
    return names if "cpu" in names else [*names, "cpu"]


def read_metadata(path: Path) -> dict[str, str]:
    """The model's ``metadata_props`` (without loading external weights)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return {p.key: p.value for p in model.metadata_props}


def floats(text: Floats, n: int, what: str) -> tuple[float, ...] | None:
    """Parse "a,b,c" (or a sequence) into ``n`` floats."""
    if text is None:
        return None
    values = [float(v) for v in text.split(",")] if isinstance(text, str) else list(text)
    if len(values) == 1:
        values = values * n
    if len(values) != n:
        raise InvalidInputError(f"{what}: expected {n} values, got {values}")
    return tuple(float(v) for v in values)


class Pipeline:
    """Base class: owns an InferenceSession and the Device its pixel kernels run on.

    ``model`` is a path, a URL or a known name; ``backend`` a backend name (or a list, in
    preference order); ``progress`` draws progress bars on stderr (default: on a terminal)."""

    task: ClassVar[str]
    default_model: ClassVar[str]

    def __init__(
        self,
        model: ModelRef = None,
        backend: BackendRef = None,
        *,
        progress: bool | None = None,
    ) -> None:
        self.model_path = resolve_model(model or self.default_model)
        self.session = InferenceSession(str(self.model_path), backends=backend_list(backend))
        self.device = Device(self.session.backends[0])
        self.metadata = read_metadata(self.model_path)
        self.progress = progress
        self.model_runs = 0
        inputs = self.session.get_inputs()
        if not inputs:
            raise InvalidInputError(f"{self.model_path}: the model has no inputs")
        self.input_name = inputs[0].name
        self.input_shape = inputs[0].shape or []
        self.output_name = self.session.get_outputs()[0].name

    @property
    def backend(self) -> str:
        return self.device.name

    def fixed_size(self) -> tuple[int, int] | None:
        """The model's (height, width) when its input declares fixed spatial dims."""
        dims = self.input_shape[-2:]
        if len(dims) == 2 and all(isinstance(d, int) and d > 0 for d in dims):
            return int(dims[0]), int(dims[1])  # type: ignore[arg-type]
        return None

    def run_model(self, x: DeviceTensor | np.ndarray, output: str | None = None) -> DeviceTensor:
        """One model run; the result stays on the device."""
        self.model_runs += 1
        return self.device.run_model(self.session, self.input_name, x,
                                     output or self.output_name)

    def predict_plane(self, img: Any, size: tuple[int, int], mean: Sequence[float],
                      std: Sequence[float], step: Callable[[int], object] = lambda n: None
                      ) -> DeviceTensor:
        """The model's one-plane output (a mask, a depth map) for an HWC image resized to
        ``size`` and normalised, upscaled bilinearly to the image's own size; on the device.
        ``step(1)`` is called after the model and after the upscaling."""
        from . import imageops as ops

        h, w = img.shape[:2]
        x = ops.to_nchw(self.device, img, size, None, mean, std)
        try:
            pred = self.run_model(x)
        finally:
            x.close()
        step(1)
        try:
            plane = pred.reshape(pred.shape[-2:]) if pred.ndim > 2 else pred
            return ops.resize_plane(self.device, plane, (h, w))
        finally:
            pred.close()
            step(1)

    def steps(self, n: int) -> ProgressBar:
        """A progress bar over the ``n`` stages of one call (pre, model, post...)."""
        return ProgressBar(n, f"{self.task} on {self.backend}", unit="step",
                           enabled=self.progress)

    def meta(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(f"spawnml.{key}", default)

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""Model files shipped to Ray workers: once per node, verified by sha256.

The driver resolves the model (a path, or a pipeline's known name, generated or fetched
once) and either puts its bytes in Ray's object store or names a path every node sees. A
worker turns the :class:`ShippedModel` into a local file with :meth:`ShippedModel.local_path`:
from the object store, it lands in the node's spawnml cache (``spawnml.hub.store``), written
once per node however many actors ask, and checked against the digest on every use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from spawnml import hub
from spawnml.errors import InvalidInputError

Via = Literal["object-store", "shared-path"]


class ModelShippingError(InvalidInputError):
    """A model cannot be shipped to the workers, or what a worker received is not it."""


@dataclass(frozen=True)
class ShippedModel:
    """A model file on its way to the workers: its name, sha256 and size, with either an
    object-store reference to its bytes or a path on a filesystem every node mounts."""

    name: str
    sha256: str
    size: int
    ref: Any = None  # ray.ObjectRef of a uint8 array holding the file
    shared_path: str | None = None

    def local_path(self) -> Path:
        """The model as a local file on this node, verified against :attr:`sha256`."""
        if self.shared_path is not None:
            path = Path(self.shared_path)
            if not path.is_file():
                raise ModelShippingError(
                    f"model {self.name}: {path} is not a file on this node; with "
                    "via='shared-path' every node must see the same path")
            found = hub.file_sha256(path)
            if found != self.sha256:
                raise ModelShippingError(
                    f"model {self.name}: {path} on this node has sha256 {found}, the driver "
                    f"shipped {self.sha256}")
            return path
        if self.ref is None:
            raise ModelShippingError(f"model {self.name}: neither an object nor a path shipped")
        return hub.store(self.sha256, self.name, self._chunks)

    def _chunks(self) -> list[memoryview]:
        import ray

        data = ray.get(self.ref)  # zero-copy from the node's object store
        return [memoryview(data)]


def has_external_data(path: Path) -> bool:
    """Whether the ONNX file keeps tensors in side files (which one object cannot carry)."""
    import onnx
    from onnx.external_data_helper import uses_external_data

    model = onnx.load(str(path), load_external_data=False)
    return any(uses_external_data(t) for t in model.graph.initializer)


def ship_model(path: str | os.PathLike, via: Via = "object-store") -> ShippedModel:
    """Ship the model file at ``path`` to the workers (Ray must be initialised).

    ``object-store``: the bytes are put once into Ray's object store; each node copies them
    into its cache on first use. ``shared-path``: nothing is copied; every node opens
    ``path`` itself (a shared filesystem), still checked against the driver's digest."""
    path = Path(path)
    if not path.is_file():
        raise ModelShippingError(f"model {path}: no such file")
    digest = hub.file_sha256(path)
    if via == "shared-path":
        return ShippedModel(path.name, digest, path.stat().st_size,
                            shared_path=str(path.resolve()))
    if via != "object-store":
        raise ModelShippingError(f"via={via!r}: expected 'object-store' or 'shared-path'")
    if has_external_data(path):
        raise ModelShippingError(
            f"model {path} keeps its weights in external data files; ship it with "
            "via='shared-path' from a filesystem every node mounts")
    import numpy as np
    import ray

    data = np.fromfile(path, dtype=np.uint8)
    return ShippedModel(path.name, digest, int(data.size), ref=ray.put(data))

"""spawnml on Ray Data: batch inference with one spawnml session or pipeline per actor.

    import os, ray, spawnml_ray
    labels = ray.data.read_binary_files(os.path.abspath("images"), include_paths=True).map_batches(
        spawnml_ray.PipelinePredictor, fn_constructor_kwargs={"task": "classify"},
        compute=ray.data.ActorPoolStrategy(size=2), num_cpus=1)

``spawnml batch TASK INPUT OUTPUT`` (see :func:`run_batch`) does the same for a folder,
resumably, writing Parquet and images.
"""

from __future__ import annotations

from .job import BatchError, BatchReport, list_inputs, read_results, run_batch
from .predictors import PipelinePredictor, SessionPredictor, node_backends
from .shipping import ModelShippingError, ShippedModel, ship_model

__all__ = [
    "PipelinePredictor", "SessionPredictor", "node_backends",
    "ShippedModel", "ship_model", "ModelShippingError",
    "run_batch", "BatchReport", "BatchError", "list_inputs", "read_results",
]

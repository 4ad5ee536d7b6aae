"""Recorded plans on generated models: the replayed runs give exactly the first (normal
path) run's outputs, which match onnxruntime, on every available backend; the profile
counts the recording's launches against the model's node count."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml import InferenceSession, get_available_backends
from spawnml.testing.models import GENERATED, generated_model, mismatches

ort = pytest.importorskip("onnxruntime")

MODELS = ["bert_encoder", "mobilenetv2", "transformer_net"]
# Seconds on the default run; these take half a minute to minutes on the emulated devices.
SLOW = {("transformer_net", b) for b in ("opencl", "wasm", "webgpu", "webgl")} | {
    (m, "webgl") for m in MODELS
}


def _cases() -> list:
    return [
        pytest.param(m, b, marks=[pytest.mark.slow] if (m, b) in SLOW else [])
        for m in MODELS
        for b in get_available_backends()
    ]


@pytest.mark.parametrize(("model", "backend"), _cases())
def test_replays_equal_the_first_run_and_onnxruntime(model: str, backend: str) -> None:
    path = str(generated_model(model))
    feeds = GENERATED[model].inputs()
    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in reference.get_outputs()]
    with InferenceSession(path, backends=[backend]) as sess:
        first = sess.run(None, feeds)
        profile = sess.profile(feeds, runs=2)
        replayed = sess.run(None, feeds)
        plan = sess._runner.last_plan
        assert plan is not None
        recordings = [r for r in plan.recordings.values() if r is not None]
        assert recordings, plan.not_recorded
        assert profile.replayed_runs == 2
        assert profile.launches_per_run == recordings[0].n_launches
        kinds = set(sess.placement().kinds.values()) - {"host", "reference", "control"}
        if len(kinds) == 1:  # all portable (fused) or all backend kernels: one per node at
            # most; a mix (the cpu's measured choice: BLAS beside compiled kernels) may run a
            # multi-launch lowering unfused next to a BLAS node
            assert recordings[0].n_launches <= profile.model_nodes
    for got, want in zip(replayed, first):
        np.testing.assert_array_equal(got, want)
    assert not mismatches(replayed, reference.run(None, feeds), names, rel=1e-3)

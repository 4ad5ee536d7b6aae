"""Dynamic shapes in practice: one session fed a BERT-style encoder's batch sizes (1-8) and
sequence lengths (7-384) in turn matches onnxruntime for each, builds one plan per shape
set and reuses it when the shapes return; symbolic dims shared between inputs are checked
against each other."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml import InferenceSession, InvalidInputError, get_available_backends
from spawnml.graph.runtime import Runner
from spawnml.testing.models.transformer import EncoderConfig, bert_encoder

ort = pytest.importorskip("onnxruntime")

CFG = EncoderConfig(vocab=512, hidden=64, heads=4, layers=2, intermediate=128,
                    max_positions=512, dynamic=True)  # fmt: skip
SHAPES = [(1, 7), (8, 384), (3, 100), (8, 7), (1, 7), (8, 384)]
BACKENDS = [b for b in ("cpu", "wasm") if b in get_available_backends()]


def _feeds(batch: int, length: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(batch * 1000 + length)
    mask = np.ones((batch, length), np.int64)
    for row in range(batch):  # each row padded differently, as a real batch is
        mask[row, length - row * length // (2 * batch) :] = 0
    return {"input_ids": rng.integers(0, CFG.vocab, (batch, length), dtype=np.int64),
            "attention_mask": mask}  # fmt: skip


@pytest.fixture(scope="module")
def model() -> bytes:
    return bert_encoder(seed=3, cfg=CFG).SerializeToString()


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_and_sequence_sizes_in_turn_match_and_reuse_plans(
    model: bytes, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[tuple] = []
    original = Runner._build

    def counted(self: Runner, feeds: dict, outer_consts: dict | None):  # type: ignore[no-untyped-def]
        builds.append(tuple(sorted((n, i.shape) for n, i in feeds.items())))
        return original(self, feeds, outer_consts)

    monkeypatch.setattr(Runner, "_build", counted)
    reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    sess = InferenceSession(model, backends=[backend])
    for batch, length in SHAPES:
        feeds = _feeds(batch, length)
        want = reference.run(None, feeds)
        got = sess.run(None, feeds)
        assert got[0].shape == (batch, length, CFG.hidden) and got[1].shape == (batch, CFG.hidden)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-4)
    assert len(builds) == len(set(SHAPES)), builds  # returning shapes reuse their plan
    assert len(sess._runner.plans) == len(set(SHAPES))


def test_shared_symbolic_dims_are_checked_against_each_other(model: bytes) -> None:
    sess = InferenceSession(model, backends=["cpu"])
    feeds = _feeds(2, 7)
    feeds["attention_mask"] = np.ones((2, 8), np.int64)
    with pytest.raises(InvalidInputError, match=r"'sequence'.*input_ids.*= 7"):
        sess.run(None, feeds)
    feeds["attention_mask"] = np.ones((3, 7), np.int64)
    with pytest.raises(InvalidInputError, match=r"'batch'"):
        sess.run(None, feeds)

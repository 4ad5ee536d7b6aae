"""The per-input-shape plan cache is a bounded LRU: evicted plans release their device
buffers and recordings, come back correct when their shapes return, and 200 distinct
shapes do not grow the process (issue #20)."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from spawnml import InferenceSession, SessionOptions
from spawnml.errors import InvalidInputError
from spawnml.graph.runtime import DEFAULT_MAX_PLANS

sys.path.insert(0, str(Path(__file__).parent / "graph"))
from graph_helpers import chain_model, chain_reference


def rss_bytes() -> int:
    """The resident set size of this process now."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def session(**options: object) -> InferenceSession:
    return InferenceSession(chain_model(3).SerializeToString(), backends=["cpu"],
                            options=SessionOptions(**options))  # type: ignore[arg-type]  # fmt: skip


def run_checked(sess: InferenceSession, n: int, runs: int = 3) -> None:
    """Run shape (n, 4) ``runs`` times (normal path, recording, replay) against numpy."""
    x = np.linspace(-3, 3, n * 4, dtype=np.float32).reshape(n, 4)
    for _ in range(runs):
        (y,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, chain_reference(x), rtol=1e-6, atol=1e-6)


def test_the_cache_holds_at_most_its_bound_and_evicts_the_least_recently_used() -> None:
    sess = session(max_cached_plans=3)
    runner = sess._runner
    for n in (1, 2, 3):
        run_checked(sess, n)
    first = runner.plans[next(iter(runner.plans))]
    assert first.recordings  # recorded on its second run
    run_checked(sess, 1)  # used again: now the most recent
    run_checked(sess, 4)  # evicts shape 2, the least recently used
    assert [key[0][1].shape for key in runner.plans] == [(3, 4), (1, 4), (4, 4)]
    assert first is runner.plans[next(k for k in runner.plans if k[0][1].shape == (1, 4))]


def test_an_evicted_plan_is_released_and_rebuilt_when_its_shape_returns() -> None:
    sess = session(max_cached_plans=2)
    run_checked(sess, 5)
    plan = sess._runner.last_plan
    assert plan is not None and plan.recordings
    pool = sess.backends[0].pool
    held = pool.live_bytes
    run_checked(sess, 6)
    run_checked(sess, 7)  # evicts shape 5
    assert plan.evicted and not plan.recordings and not plan.device_consts
    assert len(sess._runner.plans) == 2
    run_checked(sess, 5)  # rebuilt, correct, recorded again
    rebuilt = sess._runner.last_plan
    assert rebuilt is not plan and rebuilt is not None and rebuilt.recordings
    assert pool.live_bytes <= 2 * held  # two plans' buffers, never every plan's


def test_200_distinct_shapes_keep_memory_flat() -> None:
    sess = session()
    for n in range(1000, 1020):  # warm-up: fills the cache
        run_checked(sess, n)
    gc.collect()
    before = rss_bytes()
    for n in range(1020, 1220):
        run_checked(sess, n)
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 10 << 20, f"RSS grew {grown / 2**20:.1f} MiB over 200 shapes"
    assert len(sess._runner.plans) <= DEFAULT_MAX_PLANS == 16
    run_checked(sess, 1000)  # long evicted: rebuilt correctly


def test_a_plan_in_use_is_closed_when_its_run_ends() -> None:
    """Evicting a plan another run is still using defers its close to that run's end."""
    sess = session(max_cached_plans=1)
    run_checked(sess, 2)
    runner = sess._runner
    busy = runner.last_plan
    assert busy is not None
    busy.users += 1  # as if a run were in progress on another thread
    run_checked(sess, 3)
    assert busy.evicted and busy.recordings  # evicted, not closed under the running run
    runner._leave(busy)
    assert not busy.recordings and not busy.users


@pytest.mark.parametrize("bad", [0, -1, 2.5, "4"])
def test_max_cached_plans_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="max_cached_plans must be a positive int"):
        SessionOptions(max_cached_plans=bad)  # type: ignore[arg-type]


# -- compiled programs: bounded too ------------------------------------------------------------
DEVICES = [b for b in ("opencl", "webgpu", "webgl", "wasm")
           if b in __import__("spawnml").get_available_backends()]


@pytest.mark.parametrize("backend", DEVICES)
def test_compiled_programs_are_a_bounded_lru_and_unused_ones_are_freed(backend, monkeypatch):
    """Every shape compiles new kernels; with SPAWNML_MAX_PROGRAMS=4 and two cached plans,
    the backend's program cache (and webgpu's device pipelines, wasm's modules and Store
    instances) stay within 4, and a program neither cached nor used by a plan is freed."""
    import weakref

    monkeypatch.setenv("SPAWNML_MAX_PROGRAMS", "4")
    sess = InferenceSession(chain_model(3).SerializeToString(), backends=[backend],
                            options=SessionOptions(max_cached_plans=2))
    device = sess.backends[0]
    run_checked(sess, 1, runs=1)
    first = [weakref.ref(p) for p in device._programs.values()]
    for n in range(2, 14):
        run_checked(sess, n)
        assert len(device._programs) <= 4
    gc.collect()
    assert first and not any(ref() is not None for ref in first)
    if backend == "webgpu":
        assert len(device.ctx.pipelines) <= 4
    if backend == "wasm":
        assert len(device.runtime._modules) <= 4
        assert len(device.runtime._local.instances) <= 4
    sess.close()

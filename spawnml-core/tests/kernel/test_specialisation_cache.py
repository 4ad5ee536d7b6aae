"""A kernel's specialisations are a bounded LRU: a session fed ever new shapes does not grow
the cache past ``MAX_SPECIALISATIONS`` (issue #20), and the shapes in use stay cached."""

from __future__ import annotations

from spawnml.kernel import Output, Tensor, kernel, specialize as specialize_module


@kernel
def doubled(x: Tensor, out: Output):
    return x.flat[out.flat] * 2.0


def spec(n: int):
    return doubled.specialize([((n,), "float32")], ((n,), "float32"))


def test_specialisations_are_a_bounded_lru(monkeypatch) -> None:
    monkeypatch.setattr(specialize_module, "MAX_SPECIALISATIONS", 8)
    doubled._cache.clear()
    hot = spec(1)
    for n in range(2, 40):
        assert spec(1) is hot  # used between every new shape: never evicted
        spec(n)
    assert len(doubled._cache) == 8
    cold = spec(2)  # evicted long ago: built again, equal but not the same object
    assert cold.key == spec(2).key and spec(39) is spec(39)
    sizes = {ir.inputs[0].shape for ir in doubled._cache.values()}
    assert (1,) in sizes and (2,) in sizes and (3,) not in sizes

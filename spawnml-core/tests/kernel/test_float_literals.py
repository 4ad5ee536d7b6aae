"""Float literals of the C-style renderers: the shortest text that round-trips, never a
decimal beyond the type's largest finite value (WGSL compilers refuse those as
unrepresentable: FLT_MAX's shortest decimal, 3.4028235e+38, is above FLT_MAX)."""

from __future__ import annotations

import numpy as np
import pytest

from spawnml.kernel.cstyle import CStyleRenderer
from spawnml.kernel.types import ScalarType


@pytest.mark.parametrize(("t", "np_type"), [(ScalarType.f32, np.float32),
                                            (ScalarType.f16, np.float16)])
def test_every_finite_extreme_prints_within_range_and_round_trips(t, np_type):
    info = np.finfo(np_type)
    values = [info.max, -info.max, info.tiny, info.smallest_subnormal, info.eps, 0.1, 1.0,
              np.nextafter(info.max, np_type(0), dtype=np_type)]  # fmt: skip
    for v in values:
        text = CStyleRenderer.float_text(None, float(v), t)  # type: ignore[arg-type]
        assert abs(float(text)) <= float(info.max), text
        assert np_type(float(text)) == np_type(v), (text, v)


def test_the_common_case_stays_short():
    assert CStyleRenderer.float_text(None, 0.1, ScalarType.f32) == "0.1"  # type: ignore[arg-type]
    assert CStyleRenderer.float_text(None, 3.0, ScalarType.f32) == "3.0"  # type: ignore[arg-type]

"""Colour maps for depth: min/max reduction and a polynomial colour map, as kernels.

The viridis, plasma and inferno maps are the degree-6 polynomial fits of matplotlib's maps
by Matt Zucker (https://www.shadertoy.com/view/WlfXRN, CC0), within 5/255 of the tables.
"""

from __future__ import annotations

import numpy as np

from spawnml.kernel import Output, Tensor, kernel

from .resample import to_u8

# coefficient k of channel (r, g, b): value = sum_k c[ch, k] * t**k
_FITS = {
    "viridis": [
        (0.2777273272234177, 0.005407344544966578, 0.3340998053353061),
        (0.1050930431085774, 1.404613529898575, 1.384590162594685),
        (-0.3308618287255563, 0.214847559468213, 0.09509516302823659),
        (-4.634230498983486, -5.799100973351585, -19.33244095627987),
        (6.228269936347081, 14.17993336680509, 56.69055260068105),
        (4.776384997670288, -13.74514537774601, -65.35303263337234),
        (-5.435455855934631, 4.645852612178535, 26.3124352495832),
    ],
    "plasma": [
        (0.05873234392399702, 0.02333670892565664, 0.5433401826748754),
        (2.176514634195958, 0.2383834171260182, 0.7539604599784036),
        (-2.689460476458034, -7.455851135738909, 3.110799939717086),
        (6.130348345893603, 42.3461881477227, -28.51885465332158),
        (-11.10743619062271, -82.66631109428045, 60.13984767418263),
        (10.02306557647065, 71.41361770095349, -54.07218655560067),
        (-3.658713842777788, -22.93153465461149, 18.19190778539828),
    ],
    "inferno": [
        (0.0002189403691192265, 0.001651004631001012, -0.01948089843709184),
        (0.1065134194856116, 0.5639564367884091, 3.932712388889277),
        (11.60249308247187, -3.972853965665698, -15.9423941062914),
        (-41.70399613139459, 17.43639888205313, 44.35414519872813),
        (77.162935699427, -33.40235894210092, -81.80730925738993),
        (-71.31942824499214, 32.62606426397723, 73.20951985803202),
        (25.13112622477341, -12.24266895238567, -23.07032500287172),
    ],
    # grayscale as the same polynomial form: t on every channel
    "grayscale": [(0.0, 0.0, 0.0), (1.0, 1.0, 1.0)] + [(0.0, 0.0, 0.0)] * 5,
}

COLORMAPS: tuple[str, ...] = tuple(_FITS)


def colormap_coefficients(name: str) -> np.ndarray:
    """The (3, 7) float32 polynomial coefficients of a colour map, channel-major."""
    if name not in _FITS:
        raise KeyError(name)
    return np.ascontiguousarray(np.array(_FITS[name], dtype=np.float32).T)


@kernel
def rows_minmax(x: Tensor, out: Output):
    """out[h, 0] = min(x[h, :]), out[h, 1] = max(x[h, :]) of a 2-D plane."""
    h, k = out.index
    lo = x[h, 0]
    hi = x[h, 0]
    for j in range(1, x.shape[1]):
        lo = min(lo, x[h, j])
        hi = max(hi, x[h, j])
    return lo if k == 0 else hi


@kernel
def final_minmax(rows: Tensor, out: Output):
    """out = (min of rows[:, 0], max of rows[:, 1])."""
    k = out.flat
    lo = rows[0, 0]
    hi = rows[0, 1]
    for i in range(1, rows.shape[0]):
        lo = min(lo, rows[i, 0])
        hi = max(hi, rows[i, 1])
    return lo if k == 0 else hi


@kernel
def apply_colormap(x: Tensor, stats: Tensor, coeffs: Tensor, out: Output):
    """Normalise a plane by its (min, max) and map it through a polynomial colour map."""
    h, w, ch = out.index
    lo = stats.flat[0]
    span = stats.flat[1] - lo
    t = (x[h, w] - lo) / span if span > 0.0 else x[h, w] * 0.0
    v = coeffs[ch, 6]
    for k in range(5, -1, -1):
        v = v * t + coeffs[ch, k]
    return to_u8(min(max(v, 0.0), 1.0) * 255.0)

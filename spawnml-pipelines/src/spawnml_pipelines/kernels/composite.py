"""Compositing kernels for background removal: separable blur and alpha compositing."""

# ruff: noqa: F821  (intrinsics are resolved by the kernel front end)
from __future__ import annotations

from spawnml.kernel import Output, Tensor, cast, f32, kernel

from .resample import to_u8


@kernel
def gaussian_blur_axis(x: Tensor, out: Output, axis: int, radius: int, sigma: float):
    """One pass of a separable Gaussian blur of an HWC image along ``axis`` (0 rows, 1
    columns), edges clamped; float output."""
    h, w, c = out.index
    acc = 0.0
    total = 0.0
    for k in range(-radius, radius + 1):
        wt = exp(cast(k * k, f32) * (-0.5 / (sigma * sigma)))
        if axis == 0:
            v = cast(x[min(max(h + k, 0), x.shape[0] - 1), w, c], f32)
        else:
            v = cast(x[h, min(max(w + k, 0), x.shape[1] - 1), c], f32)
        acc = acc + wt * v
        total = total + wt
    return acc / total


@kernel
def alpha_to_rgba(img: Tensor, alpha: Tensor, out: Output):
    """An RGBA uint8 image: the RGB of ``img`` and ``alpha`` (0..1) as its alpha channel."""
    h, w, c = out.index
    if c < 3:
        return img[h, w, c]
    return to_u8(alpha[h, w] * 255.0)


@kernel
def composite_over(img: Tensor, alpha: Tensor, background: Tensor, out: Output):
    """img * a + background * (1 - a); ``background`` is (1, 1, 3) (a colour) or (H, W, 3)."""
    h, w, c = out.index
    a = min(max(alpha[h, w], 0.0), 1.0)
    if background.shape[0] == 1:
        bg = cast(background[0, 0, c], f32)
    else:
        bg = cast(background[h, w, c], f32)
    return to_u8(cast(img[h, w, c], f32) * a + bg * (1.0 - a))

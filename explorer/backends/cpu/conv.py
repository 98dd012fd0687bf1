"""2-D convolutions as im2col + one matrix product: the windows gathered by one compiled
loop (parallel over output rows; a window row that lies inside the image is one contiguous
run of the input, copied as such), then one BLAS product. The op row's NumPy reference
builds the same windows from views (pad, sliding window view, moveaxis, copy: about 45 us of
Python for a 2x8x8x4 batch, and one thread for a 64x32x32x3 one). Which shapes gather
(forward convolutions, and any small one) and which keep the reference: `_gathers`.
Grouped, base-dilated (transposed) and non-2-D convolutions keep the reference too.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...ir.ops import OPS
from .kernel_codegen import numba_takes
from .numba_cache import cached_njit

PARALLEL_MIN = 1 << 16  # window elements gathered at least before every core joins in
SMALL = 1 << 18  # window elements few enough to gather whatever the shape


@functools.cache
def _im2col(parallel: bool) -> Any:
    from numba import prange

    @cached_njit(parallel=parallel, error_model="numpy")
    def windows(x, cols, out_h, out_w, kh, kw, sh, sw, dh, dw, ph, pw):  # noqa: ANN001, ANN202
        n, h, w, c = x.shape
        flat = x.reshape(n, h, w * c)
        span = kw * c
        for t in prange(n * out_h):
            b, i = t // out_h, t % out_h
            for j in range(out_w):
                r = t * out_w + j
                z0 = j * sw - pw
                inside = dw == 1 and z0 >= 0 and z0 + kw <= w
                for p in range(kh):
                    y = i * sh - ph + p * dh
                    at = p * span
                    if y < 0 or y >= h:
                        for u in range(span):
                            cols[r, at + u] = 0
                    elif inside:  # the window's row: one contiguous run of the input
                        for u in range(span):
                            cols[r, at + u] = flat[b, y, z0 * c + u]
                    else:
                        for q in range(kw):
                            z = z0 + q * dw
                            for e in range(c):
                                cols[r, at + q * c + e] = x[b, y, z, e] if 0 <= z < w else 0

    return windows


def _gathers(window: int, positions: int, cells: int) -> bool:
    """Whether im2col is the method for this shape: a forward convolution (at least as many
    output positions as window elements), or any whose windows are few (`cells`, the window
    matrix's size, up to SMALL: the reference's views cost more Python than the copy). A
    large weight gradient (a window as large as the image, over a few positions) gathers
    nearly the whole input per position, and ran 3x slower through im2col than through the
    reference's einsum over window views (a CNN's gradient, 64x32x32 images: 7.3 against
    2.3 ms); transposed (base-dilated) convolutions keep the reference, whose windows are
    mostly the zeros between input elements (9.2 against 3.5 ms through im2col)."""
    return positions >= window or cells <= SMALL


def conv_general_dilated(lhs, rhs, *, window_strides, padding, dimension_numbers,  # noqa: ANN001, ANN201
                         lhs_dilation=None, rhs_dilation=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    attrs = dict(window_strides=window_strides, padding=padding,
                 dimension_numbers=dimension_numbers, lhs_dilation=lhs_dilation,
                 rhs_dilation=rhs_dilation, feature_group_count=feature_group_count,
                 batch_group_count=batch_group_count, precision=precision,
                 preferred_element_type=preferred_element_type)
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    ls, rs, os_ = (tuple(s) for s in dimension_numbers)
    if (lhs.ndim != 4 or feature_group_count != 1 or batch_group_count != 1
            or any(d != 1 for d in lhs_dilation or ()) or preferred_element_type
            or lhs.dtype.kind != "f" or not numba_takes(lhs.dtype) or lhs.dtype != rhs.dtype):
        return OPS["conv_general_dilated"].ref(lhs, rhs, **attrs)
    x = np.ascontiguousarray(np.transpose(lhs, (ls[0], ls[2], ls[3], ls[1])))  # N, H, W, C
    w = np.transpose(rhs, (rs[2], rs[3], rs[1], rs[0]))  # KH, KW, I, O
    (kh, kw, c, o), (sh, sw) = w.shape, window_strides
    dh, dw = rhs_dilation or (1, 1)
    (ph, qh), (pw, qw) = padding
    out_h = (x.shape[1] + ph + qh - (kh - 1) * dh - 1) // sh + 1
    out_w = (x.shape[2] + pw + qw - (kw - 1) * dw - 1) // sw + 1
    rows, width = x.shape[0] * out_h * out_w, kh * kw * c
    if out_h <= 0 or out_w <= 0 or rows * width == 0 \
            or not _gathers(kh * kw, out_h * out_w, rows * width):
        return OPS["conv_general_dilated"].ref(lhs, rhs, **attrs)
    cols = np.empty((rows, width), x.dtype)
    _im2col(rows * width >= PARALLEL_MIN)(x, cols, out_h, out_w, kh, kw, sh, sw, dh, dw, ph, pw)
    out = np.matmul(cols, w.reshape(width, o)).reshape(x.shape[0], out_h, out_w, o)
    return np.transpose(np.moveaxis(out, -1, 1), np.argsort(os_))  # (N, O, H, W) -> os_


REFERENCES = {"conv_general_dilated": conv_general_dilated}

"""2-D convolutions as im2col + one matrix product: the windows gathered by one compiled
loop (parallel over output rows; a window row that lies inside the image is one contiguous
run of the input, copied as such), then one BLAS product. The op row's NumPy reference
builds the same windows from views (pad, sliding window view, moveaxis, copy: about 45 us of
Python for a 2x8x8x4 batch, and one thread for a 64x32x32x3 one). Which shapes gather
(forward convolutions, and any small one, transposed ones too) and which keep the reference:
`_gathers`. Grouped and non-2-D convolutions keep the reference. A CPU program calls
`prepare`'s form, its layout worked out when the program is made.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Attrs, TensorType
from ...ir.ops import OPS
from .kernel_codegen import numba_takes
from .numba_cache import cached_njit

PARALLEL_MIN = 1 << 16  # window elements gathered at least before every core joins in
SMALL = 1 << 18  # window elements few enough to gather whatever the shape


@functools.cache
def _im2col(parallel: bool) -> Any:
    from numba import prange

    @cached_njit(parallel=parallel, error_model="numpy")
    def windows(x, cols, out_h, out_w, kh, kw, sh, sw, dh, dw, ph, pw, lh, lw):  # noqa: ANN001, ANN202
        # (lh, lw): the input's dilation; a window position between two input elements
        # (a transposed convolution's) reads 0
        n, h, w, c = x.shape
        hd, wd = (h - 1) * lh + 1, (w - 1) * lw + 1
        flat = x.reshape(n, h, w * c)
        span = kw * c
        for t in prange(n * out_h):
            b, i = t // out_h, t % out_h
            for j in range(out_w):
                r = t * out_w + j
                z0 = j * sw - pw
                inside = dw == 1 and lw == 1 and z0 >= 0 and z0 + kw <= w
                for p in range(kh):
                    yd = i * sh - ph + p * dh
                    at = p * span
                    if yd < 0 or yd >= hd or yd % lh != 0:
                        for u in range(span):
                            cols[r, at + u] = 0
                        continue
                    y = yd // lh
                    if inside:  # the window's row: one contiguous run of the input
                        for u in range(span):
                            cols[r, at + u] = flat[b, y, z0 * c + u]
                    else:
                        for q in range(kw):
                            z = z0 + q * dw
                            if 0 <= z < wd and z % lw == 0:
                                for e in range(c):
                                    cols[r, at + q * c + e] = x[b, y, z // lw, e]
                            else:
                                for e in range(c):
                                    cols[r, at + q * c + e] = 0

    return windows


def _gathers(window: int, positions: int, cells: int, dilated: bool) -> bool:
    """Whether im2col is the method for this shape: a forward convolution (at least as many
    output positions as window elements), or any whose windows are few (`cells`, the window
    matrix's size, up to SMALL: the reference's views cost more Python than the copy). A
    large weight gradient (a window as large as the image, over a few positions) gathers
    nearly the whole input per position, and ran 3x slower through im2col than through the
    reference's einsum over window views (a CNN's gradient, 64x32x32 images: 7.3 against
    2.3 ms); large transposed (base-`dilated`) convolutions keep the reference, whose windows
    are mostly the zeros between input elements (9.2 against 3.5 ms through im2col)."""
    return cells <= SMALL or positions >= window and not dilated


def prepare(types: Sequence[Any], a: Attrs) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """The convolution of inputs of these types as a function of the two arrays, its layout
    worked out now (the permutations to channels-last, the output's size, the window
    matrix's shape, serial or parallel): a call transposes, gathers the windows, multiplies
    and transposes back (at the CNN zoo's 2x8x8x2 images, 33 us a call with the layout
    worked out per call, of which the gather and the product 7). None where the reference
    is the method: grouped, not 2-D, not a float type numba takes, or `_gathers` says so."""
    if len(types) != 2 or not all(isinstance(t, TensorType) for t in types):
        return None
    lt, rt = types
    dn = a["dimension_numbers"]
    ls, rs, os_ = (tuple(d) for d in dn)
    dtype = dtypes.to_numpy(lt.dtype)
    if (lt.rank != 4 or a.get("feature_group_count", 1) != 1 or a.get("batch_group_count", 1) != 1
            or a.get("preferred_element_type") or dtype.kind != "f" or not numba_takes(dtype)
            or lt.dtype != rt.dtype):
        return None
    n, c, h, w_ = (lt.shape[d] for d in (ls[0], ls[1], ls[2], ls[3]))
    o, kh, kw = (rt.shape[d] for d in (rs[0], rs[2], rs[3]))
    (sh, sw), (dh, dw) = a["window_strides"], a.get("rhs_dilation") or (1, 1)
    lh, lw = a.get("lhs_dilation") or (1, 1)
    (ph, qh), (pw, qw) = a["padding"]
    out_h = ((h - 1) * lh + 1 + ph + qh - (kh - 1) * dh - 1) // sh + 1
    out_w = ((w_ - 1) * lw + 1 + pw + qw - (kw - 1) * dw - 1) // sw + 1
    rows, width = n * out_h * out_w, kh * kw * c
    if (out_h <= 0 or out_w <= 0 or rows * width == 0
            or not _gathers(kh * kw, out_h * out_w, rows * width, (lh, lw) != (1, 1))):
        return None
    to_nhwc = (ls[0], ls[2], ls[3], ls[1])
    keep = to_nhwc == (0, 1, 2, 3)
    to_matrix = (rs[2], rs[3], rs[1], rs[0])  # (KH, KW, I, O)
    back = tuple((0, 3, 1, 2)[k] for k in np.argsort(os_))  # (N, H, W, O) -> the output's
    gather = _im2col(rows * width >= PARALLEL_MIN)
    shape = (n, out_h, out_w, o)

    def conv(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(lhs if keep else lhs.transpose(to_nhwc))
        cols = np.empty((rows, width), dtype)
        gather(x, cols, out_h, out_w, kh, kw, sh, sw, dh, dw, ph, pw, lh, lw)
        out = np.matmul(cols, rhs.transpose(to_matrix).reshape(width, o))
        return out.reshape(shape).transpose(back)

    return conv


def conv_general_dilated(lhs, rhs, **attrs):  # noqa: ANN001, ANN201, ANN003
    """The op on two arrays: `prepare`'s form for their types, else the op row's reference."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    fn = prepare([TensorType(x.shape, dtypes.from_numpy(x.dtype)) for x in (lhs, rhs)],
                 Attrs(attrs)) if lhs.dtype.kind == "f" else None
    return fn(lhs, rhs) if fn is not None else OPS["conv_general_dilated"].ref(lhs, rhs, **attrs)


REFERENCES = {"conv_general_dilated": conv_general_dilated}

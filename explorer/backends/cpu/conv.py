"""2-D convolutions by one of two methods, chosen by shape when the program is made
(`_method`). im2col + one matrix product: the windows gathered by one compiled loop
(parallel over output rows; a window row that lies inside the image is one contiguous run of
the input, copied as such), then one BLAS product. Direct: each input channel laid out as a
padded plane (its columns split by stride phase), then one compiled loop over output rows
that adds each window offset's plane row times the weights into a channel-major row
accumulator, for a few input and output channels over wide rows (a network's first layer),
where BLAS's product of a narrow window matrix is slow. The op row's NumPy reference builds
the windows from views (pad, sliding window view, moveaxis, copy: about 45 us of Python for a
2x8x8x4 batch, and one thread for a 64x32x32x3 one); it stays the method for grouped and
non-2-D convolutions and the shapes `_method` leaves to it. A CPU program calls `prepare`'s
form, its layout worked out when the program is made.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Attrs, TensorType
from ...ir.ops import OPS
from .numba_cache import cached_njit
from .numba_dialect import numba_takes

PARALLEL_MIN = 1 << 16  # window elements gathered at least before every core joins in
SMALL = 1 << 18  # window elements few enough to gather whatever the shape
# the direct loop's shapes (`_method`): window elements times input channels, output
# channels, output row length (the innermost loop's trip count; shorter ones do not vectorize)
DIRECT_WIDTH, DIRECT_OUTPUTS, DIRECT_ROW = 32, 32, 16
BLOCK_BYTES = 64 << 10  # a direct loop's accumulator (a block of output rows): in L2


@functools.cache
def _im2col(parallel: bool) -> Any:
    from numba import prange, uint64

    @cached_njit(parallel=parallel, error_model="numpy")
    def windows(x, cols, out_h, out_w, kh, kw, sh, sw, dh, dw, ph, pw, lh, lw):  # noqa: ANN001, ANN202
        # (lh, lw): the input's dilation; a window position between two input elements
        # (a transposed convolution's) reads 0. Flat unsigned offsets: numba checks a
        # signed index for a negative value on every read (2.2 against 1.4 ms serial for a
        # 64x32x32x3 batch's 3x3 windows)
        n, h, w, c = x.shape
        hd, wd = (h - 1) * lh + 1, (w - 1) * lw + 1
        src, dst = x.reshape(-1), cols.reshape(-1)
        span = kw * c
        width = kh * span
        for t in prange(n * out_h):
            b, i = t // out_h, t % out_h
            for j in range(out_w):
                r = uint64((t * out_w + j) * width)
                z0 = j * sw - pw
                inside = dw == 1 and lw == 1 and z0 >= 0 and z0 + kw <= w
                for p in range(kh):
                    yd = i * sh - ph + p * dh
                    at = r + uint64(p * span)
                    if yd < 0 or yd >= hd or yd % lh != 0:
                        for u in range(uint64(span)):
                            dst[at + u] = 0
                        continue
                    row = uint64((b * h + yd // lh) * w * c)
                    if inside:  # the window's row: one contiguous run of the input
                        s = row + uint64(z0 * c)
                        for u in range(uint64(span)):
                            dst[at + u] = src[s + u]
                        continue
                    for q in range(kw):
                        z = z0 + q * dw
                        o = at + uint64(q * c)
                        if 0 <= z < wd and z % lw == 0:
                            s = row + uint64(z // lw * c)
                            for e in range(uint64(c)):
                                dst[o + e] = src[s + e]
                        else:
                            for e in range(uint64(c)):
                                dst[o + e] = 0

    return windows


@functools.cache
def _direct(parallel: bool) -> tuple[Any, Any]:
    from numba import prange, uint64

    @cached_njit(parallel=parallel, error_model="numpy")
    def planes(x, xp, ph, pw, lh, lw):  # noqa: ANN001, ANN202
        # x (N, H, W, C) as xp (N, C, SH, SW, HH, M): each channel's plane padded, its
        # dilation spelled out, its rows and columns split by stride phase (padded row
        # Y * SH + s at [.., s, :, Y, :]), so that every window offset reads, for a run of
        # output rows, one contiguous run of a phase plane
        n, h, w, c = x.shape
        _, _, sh, sw, hh, m = xp.shape
        hd, wd = (h - 1) * lh + 1, (w - 1) * lw + 1
        src, dst = x.reshape(-1), xp.reshape(-1)
        for t in prange(n * c):
            b, e = t // c, t % c
            for s in range(sh):
                for yy in range(hh):
                    yd = yy * sh + s - ph
                    real = 0 <= yd < hd and (lh == 1 or yd % lh == 0)
                    row = (b * h + (yd if lh == 1 else yd // lh)) * w
                    for r in range(sw):
                        at = uint64((((t * sh + s) * sw + r) * hh + yy) * m)
                        for k in range(m):
                            zd = k * sw + r - pw
                            if real and 0 <= zd < wd and (lw == 1 or zd % lw == 0):
                                z = zd if lw == 1 else zd // lw  # (no division per element)
                                dst[at + uint64(k)] = src[uint64((row + z) * c + e)]
                            else:
                                dst[at + uint64(k)] = 0

    @cached_njit(parallel=parallel, error_model="numpy", fastmath={"contract"})
    def direct(xp, wf, out, kh, kw, dh, dw, block):  # noqa: ANN001, ANN202
        # out (N, OH, OW, O), per image and block of output rows: the rows taken as one run
        # of positions i * M + j, as wide as the planes' rows (the M - OW positions past a
        # row's end are computed and dropped), so that each tap (window offset p, q and
        # input channel e) reads one contiguous run of a phase plane. Three taps into four
        # output channels per pass over the run (3 reads and 4 read-modify-writes of the
        # channel-major accumulator for 12 multiply-adds: twice the rate of one tap at a
        # time; `contract`: each multiply-add rounds once); then the block's real positions
        # copied out channels-last
        n, c, sh, sw, hh, m = xp.shape
        _, oh, ow, o = out.shape
        src, dst = xp.reshape(-1), out.reshape(-1)
        taps = kh * kw * c
        per = (oh + block - 1) // block
        for t in prange(n * per):
            b, i0 = t // per, t % per * block
            rows = min(block, oh - i0)
            span = (rows - 1) * m + ow
            acc = np.zeros((o, span), out.dtype)
            at = np.empty(taps, np.int64)  # each tap's run in the planes
            for k in range(taps):
                p, q, e = k // (kw * c), k // c % kw, k % c
                s, r = p * dh % sh, q * dw % sw
                at[k] = ((((b * c + e) * sh + s) * sw + r) * hh + i0 + p * dh // sh) * m \
                    + q * dw // sw
            for f in range(0, o - 3, 4):
                a0, a1, a2, a3 = acc[f], acc[f + 1], acc[f + 2], acc[f + 3]
                for k in range(0, taps, 3):
                    if k + 3 <= taps:
                        x0, x1, x2 = src[at[k]:], src[at[k + 1]:], src[at[k + 2]:]
                        w0, w1, w2 = wf[k], wf[k + 1], wf[k + 2]
                        for u in range(span):
                            v0, v1, v2 = x0[u], x1[u], x2[u]
                            a0[u] += v0 * w0[f] + v1 * w1[f] + v2 * w2[f]
                            a1[u] += v0 * w0[f + 1] + v1 * w1[f + 1] + v2 * w2[f + 1]
                            a2[u] += v0 * w0[f + 2] + v1 * w1[f + 2] + v2 * w2[f + 2]
                            a3[u] += v0 * w0[f + 3] + v1 * w1[f + 3] + v2 * w2[f + 3]
                    else:
                        for j in range(k, taps):
                            x0, w0 = src[at[j]:], wf[j]
                            for u in range(span):
                                v0 = x0[u]
                                a0[u] += v0 * w0[f]
                                a1[u] += v0 * w0[f + 1]
                                a2[u] += v0 * w0[f + 2]
                                a3[u] += v0 * w0[f + 3]
            for f in range(o - o % 4, o):
                a0 = acc[f]
                for k in range(taps):
                    x0, w0 = src[at[k]:], wf[k, f]
                    for u in range(span):
                        a0[u] += x0[u] * w0
            for i in range(rows):
                base = uint64((b * oh + i0 + i) * ow * o)
                for j in range(ow):
                    for f in range(o):
                        dst[base + uint64(j * o + f)] = acc[f, i * m + j]

    return planes, direct


def _method(window: int, channels: int, outputs: int, positions: int, out_w: int,
            cells: int, dilated: bool) -> str | None:
    """How to compute a convolution of this shape: "direct" (the numba loop over the
    planes) for a few input channels and output channels over wide rows: a network's first
    layer, whose window matrix is narrow (27 columns for 3x3 RGB windows) and whose product
    BLAS runs far below its speed. A 64x32x32x3 batch's 16-channel 3x3 convolution on 2
    cores: 1.2-1.6 ms alone against 2.3-3.9 through im2col + BLAS and 3.4-4.2 for jax.jit's;
    in the CNN's program 2.1 against 4.1-5.1 ms (no BLAS threads left spinning on the cores
    the next parallel loop needs). With many channels (16 in, 32 out) BLAS's product is 4x
    faster than the direct loop, which reads and writes its accumulator once for every
    three taps: hence the bounds DIRECT_WIDTH and DIRECT_OUTPUTS. "im2col" for a forward
    convolution (at least as many output positions as window elements), or any whose window
    matrix is small (`cells` up to SMALL: the reference's views cost more Python than the
    copy). None (the reference) otherwise: a large weight gradient (a window as large as the
    image, over a few positions) gathers nearly the whole input per position, and ran 3x
    slower through im2col than through the reference's einsum over window views (a CNN's
    gradient, 64x32x32 images: 7.3 against 2.3 ms); large transposed (base-`dilated`)
    convolutions, whose windows are mostly the zeros between input elements (9.2 against
    3.5 ms through im2col)."""
    if (not dilated and window * channels <= DIRECT_WIDTH and outputs <= DIRECT_OUTPUTS
            and out_w >= DIRECT_ROW and positions >= window):
        return "direct"
    if cells <= SMALL or positions >= window and not dilated:
        return "im2col"
    return None


def prepare(types: Sequence[Any], a: Attrs) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """The convolution of inputs of these types as a function of the two arrays, its layout
    and method (`_method`) worked out now (the permutations to channels-last, the output's
    size, the window matrix's or the planes' shape, serial or parallel): a call transposes,
    gathers the windows and multiplies (or lays out the planes and runs the direct loop),
    and transposes back (at the CNN zoo's 2x8x8x2 images, 33 us a call with the layout
    worked out per call, of which the gather and the product 7). None where the reference
    is the method: grouped, not 2-D, not a float type numba takes, or `_method` says so.
    The function's `method` names the method; the program's listing shows it."""
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
    method = None if out_h <= 0 or out_w <= 0 or rows * width == 0 else _method(
        kh * kw, c, o, out_h * out_w, out_w, rows * width, (lh, lw) != (1, 1))
    if method is None:
        return None
    to_nhwc = (ls[0], ls[2], ls[3], ls[1])
    keep = to_nhwc == (0, 1, 2, 3)
    to_matrix = (rs[2], rs[3], rs[1], rs[0])  # (KH, KW, I, O)
    back = tuple((0, 3, 1, 2)[k] for k in np.argsort(os_))  # (N, H, W, O) -> the output's
    shape = (n, out_h, out_w, o)
    parallel = rows * width >= PARALLEL_MIN

    def nhwc(lhs: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(lhs if keep else lhs.transpose(to_nhwc))

    if method == "direct":
        planes, direct = _direct(parallel)
        # the phase planes' rows and columns: every one a window reaches
        plane = (n, c, sh, sw, out_h + (kh - 1) * dh // sh, out_w + (kw - 1) * dw // sw)
        # output rows a block (its accumulator about BLOCK_BYTES)
        block = max(1, min(out_h, BLOCK_BYTES // (plane[-1] * o * dtype.itemsize)))

        def conv(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
            xp = np.empty(plane, dtype)
            planes(nhwc(lhs), xp, ph, pw, lh, lw)
            out = np.empty(shape, dtype)
            wf = np.ascontiguousarray(rhs.transpose(to_matrix)).reshape(width, o)
            direct(xp, wf, out, kh, kw, dh, dw, block)
            return out.transpose(back)
    else:
        gather = _im2col(parallel)

        def conv(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
            cols = np.empty((rows, width), dtype)
            gather(nhwc(lhs), cols, out_h, out_w, kh, kw, sh, sw, dh, dw, ph, pw, lh, lw)
            out = np.matmul(cols, rhs.transpose(to_matrix).reshape(width, o))
            return out.reshape(shape).transpose(back)

    conv.method = method  # type: ignore[attr-defined]
    return conv


def conv_general_dilated(lhs, rhs, **attrs):  # noqa: ANN001, ANN201, ANN003
    """The op on two arrays: `prepare`'s form for their types, else the op row's reference."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    fn = prepare([TensorType(x.shape, dtypes.from_numpy(x.dtype)) for x in (lhs, rhs)],
                 Attrs(attrs)) if lhs.dtype.kind == "f" else None
    return fn(lhs, rhs) if fn is not None else OPS["conv_general_dilated"].ref(lhs, rhs, **attrs)


REFERENCES = {"conv_general_dilated": conv_general_dilated}

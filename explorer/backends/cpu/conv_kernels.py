"""The numba loops of the CPU's convolutions (conv.py chooses among them by shape): the
im2col gather (each output position's window as one row of a matrix, for one BLAS product
after it), the direct loop over stride-phase planes (a network's first layer: a few input
and output channels), and col2im's gather-sum (after one BLAS product of every input
position with every tap of the kernel, each output position sums the taps that reach it: a
transposed convolution, a strided one's input gradient). Each is built serial or parallel
(numba's prange over output rows), flat unsigned offsets where numba would check a signed
index on every read.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .numba_cache import cached_njit


@functools.cache
def im2col(parallel: bool) -> Any:
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
def direct(parallel: bool) -> tuple[Any, Any]:
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


@functools.cache
def col2im(parallel: bool) -> Any:
    from numba import prange, uint64

    @cached_njit(parallel=parallel, error_model="numpy")
    def gather_sum(p, out, kh, kw, sh, sw, dh, dw, ph, pw, lh, lw):  # noqa: ANN001, ANN202
        # p (N, H, W, KH * KW * O): every input position times every tap's (C, O) kernel
        # matrix; out (N, OH, OW, O): each output position the sum of the taps whose window
        # element lands on an input element (in the input dilated by (lh, lw) and padded:
        # the rest read the zeros between input elements, or padding)
        n, h, w, t = p.shape
        _, oh, ow, o = out.shape
        hd, wd = (h - 1) * lh + 1, (w - 1) * lw + 1
        src, dst = p.reshape(-1), out.reshape(-1)
        for r in prange(n * oh):
            b, i = r // oh, r % oh
            base = uint64(r * ow * o)
            for u in range(uint64(ow * o)):
                dst[base + u] = 0
            for a in range(kh):
                yd = i * sh + a * dh - ph
                if yd < 0 or yd >= hd or yd % lh != 0:
                    continue
                row = (b * h + yd // lh) * w
                for j in range(ow):
                    at = base + uint64(j * o)
                    for c in range(kw):
                        xd = j * sw + c * dw - pw
                        if xd < 0 or xd >= wd or xd % lw != 0:
                            continue
                        s = uint64((row + xd // lw) * t + (a * kw + c) * o)
                        for e in range(uint64(o)):
                            dst[at + e] += src[s + e]

    return gather_sum

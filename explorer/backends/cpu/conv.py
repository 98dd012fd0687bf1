"""2-D convolutions, each by the method its shape calls for, chosen when the program is made
(`_method`) and named in the program's listing; the loops are conv_kernels.py's.

- "im2col": the windows gathered by one compiled loop (parallel over output rows; a window
  row inside the image is one contiguous run of the input, copied as such) into a matrix of
  one row per output position, then one BLAS product with the kernel as a matrix. A forward
  convolution with many channels.
- "shifted gemm": a convolution of stride 1 (its input undilated): the image padded once,
  then one BLAS product per window offset, of the padded image's rows shifted by the offset
  (a contiguous run of rows: the output is computed at every padded column, the columns past
  each row's end dropped at the end) with that offset's (C, O) kernel matrix, accumulated in
  place (gemm's beta = 1). No window matrix: im2col's copy, nine times the image for a 3x3
  window, never touches memory. Measured single-threaded (2-core AMD EPYC VM, loaded):
  32x32x32 images 16 -> 32 channels 4.8 ms against im2col's 18.9 and jax.jit's 6.0; a
  64 -> 32 input gradient 19 against 47 and 21. (Its KH * KW gemm calls are as many waits
  for BLAS's threads: on a heavily loaded VM, where a wait can cost a scheduler quantum,
  multi-threaded timings swung either way; to be re-measured quiet.)
- "gemm": a 1x1 convolution of stride 1 without padding: the image is already the window
  matrix (a reshape), one BLAS product.
- "direct": each input channel laid out as a padded plane (its columns split by stride
  phase), then one compiled loop over output rows that adds each window offset's plane row
  times the weights into a channel-major accumulator: a few input and output channels over
  wide rows (a network's first layer), where BLAS's product of a narrow window matrix is slow.
- "col2im": an input-dilated convolution (a transposed one; a strided one's input gradient):
  one BLAS product of every input position with every tap (the kernel as a (C, taps * O)
  matrix), then one compiled loop in which each output position sums the taps that land on
  an input element. im2col would gather the zeros between input elements and multiply them
  (four times the work at stride 2).
- "im2col, transposed product": a window larger than the output (a kernel's gradient: the
  forward's image convolved with its output's gradient over the few kernel positions): the
  roles of window and output positions swapped, the image's im2col matrix is gathered once
  (the forward's own, each row one kernel position of one example) and the result is its
  transpose times the output gradient as a matrix, one BLAS product whose inner dimension is
  every (example, position) pair.

Every product is SciPy's BLAS gemm (dots.scipy_matmul), as are the program's dots then
(pools.calls_scipy_blas): one OpenBLAS pool, not two fighting for the cores.
Grouped (feature or batch groups), non-2-D, preferred-type and non-float convolutions run the
op row's NumPy reference (windows from views, einsum per group); their listing line says so.
A CPU program calls `prepare`'s form, its layout worked out when the program is made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Attrs, TensorType
from ...ir.ops import OPS
from . import conv_kernels
from .dots import scipy_matmul
from .numba_dialect import numba_takes

PARALLEL_MIN = 1 << 16  # elements gathered (or summed) at least before every core joins in
# the direct loop's shapes (`_method`): window elements times input channels, output
# channels, output row length (the innermost loop's trip count; shorter ones do not vectorize)
DIRECT_WIDTH, DIRECT_OUTPUTS, DIRECT_ROW = 32, 32, 16
BLOCK_BYTES = 64 << 10  # a direct loop's accumulator (a block of output rows): in L2


def _method(window: int, channels: int, outputs: int, positions: int, out_w: int,
            dilated: bool, one_by_one: bool, unit_stride: bool) -> str:
    """How to compute an ungrouped 2-D convolution of this shape (the module docstring
    describes each method). "direct" for a few input channels and output channels over
    wide rows: a 64x32x32x3 batch's 16-channel 3x3 convolution on 2 cores took 1.2-1.6 ms
    alone against 2.3-3.9 through im2col + BLAS and 3.4-4.2 for jax.jit's; with many
    channels (16 in, 32 out) BLAS's product is 4x faster than the direct loop, which reads
    and writes its accumulator once for every three taps: hence the bounds DIRECT_WIDTH and
    DIRECT_OUTPUTS. A window with more elements than the output has positions (a kernel's
    gradient) takes the transposed product; an input-dilated (transposed) one, col2im."""
    if window > positions:
        return "im2col, transposed product"
    if dilated:
        return "col2im"
    if one_by_one:
        return "gemm"
    if window * channels <= DIRECT_WIDTH and outputs <= DIRECT_OUTPUTS and out_w >= DIRECT_ROW:
        return "direct"
    return "shifted gemm" if unit_stride else "im2col"


def _reference(why: str, a: Attrs) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The op row's reference for a convolution no method here takes, `why` in its method."""
    attrs = dict(a)

    def conv(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        return OPS["conv_general_dilated"].ref(lhs, rhs, **attrs)
    conv.method = f"the reference's einsum over window views ({why})"  # type: ignore[attr-defined]
    return conv


def _unsupported(types: Sequence[Any], a: Attrs) -> str | None:
    """Why no method of this module takes the convolution (None when one does)."""
    lt, rt = types
    if lt.rank != 4:
        return f"{lt.rank - 2}-D"
    if a.get("feature_group_count", 1) != 1:
        return "feature groups"
    if a.get("batch_group_count", 1) != 1:
        return "batch groups"
    if a.get("preferred_element_type"):
        return "a preferred element type"
    dtype = dtypes.to_numpy(lt.dtype)
    if dtype.kind != "f" or not numba_takes(dtype) or lt.dtype != rt.dtype:
        return f"element type {lt.dtype}"
    return None


def _permuter(order: Sequence[int]) -> Callable[[np.ndarray], np.ndarray]:
    """x -> x's axes in `order`, C-contiguous (no copy when it already is)."""
    order = tuple(order)
    if order == (0, 1, 2, 3):
        return np.ascontiguousarray
    return lambda x: np.ascontiguousarray(x.transpose(order))


def _gemm(dtype: np.dtype) -> Any:
    """SciPy's BLAS gemm for the element type (sgemm, dgemm)."""
    from scipy.linalg import blas

    return blas.sgemm if dtype == np.float32 else blas.dgemm


def _back(canonical_at: Sequence[int], os_: Sequence[int]) -> tuple[int, ...]:
    """The transpose from a method's result (whose axis canonical_at[k] holds canonical
    dimension k: batch, feature, spatial...) to the output's layout `os_`."""
    where = np.argsort(os_)  # the output's axis d holds canonical dimension where[d]
    return tuple(canonical_at[k] for k in where)


def prepare(types: Sequence[Any], a: Attrs) -> Callable[..., np.ndarray] | None:
    """The convolution of inputs of these types as a function of the two arrays, its layout
    and method (`_method`) worked out now (the permutations, the output's size, the window
    matrix's or the planes' shape, serial or parallel; at the CNN zoo's 2x8x8x2 images, 33 us
    a call with the layout worked out per call, of which the gather and the product 7). The
    function's `method` names the method; the program's listing shows it. A convolution no
    method takes gets the op row's reference, its `method` saying why; None only for inputs
    that are not two tensors."""
    if len(types) != 2 or not all(isinstance(t, TensorType) for t in types):
        return None
    why = _unsupported(types, a)
    if why is not None:
        return _reference(why, a)
    lt, rt = types
    ls, rs, os_ = (tuple(d) for d in a["dimension_numbers"])
    dtype = dtypes.to_numpy(lt.dtype)
    n, c, h, w_ = (lt.shape[d] for d in ls)
    o, kh, kw = (rt.shape[d] for d in (rs[0], rs[2], rs[3]))
    (sh, sw), (dh, dw) = a["window_strides"], a.get("rhs_dilation") or (1, 1)
    lh, lw = a.get("lhs_dilation") or (1, 1)
    (ph, qh), (pw, qw) = a["padding"]
    out_h = ((h - 1) * lh + 1 + ph + qh - (kh - 1) * dh - 1) // sh + 1
    out_w = ((w_ - 1) * lw + 1 + pw + qw - (kw - 1) * dw - 1) // sw + 1
    if min(out_h, out_w, n, c, o, h, w_) <= 0:
        return _reference("empty", a)
    one = (kh, kw, sh, sw, lh, lw, ph, qh, pw, qw) == (1, 1, 1, 1, 1, 1, 0, 0, 0, 0)
    unit = ((sh, sw) == (1, 1) and min(ph, qh, pw, qw) >= 0
            and dtype in (np.dtype(np.float32), np.dtype(np.float64)))
    method = _method(kh * kw, c, o, out_h * out_w, out_w, (lh, lw) != (1, 1), one, unit)
    shape = (n, out_h, out_w, o)
    to_nhwc = (ls[0], ls[2], ls[3], ls[1])
    nhwc = _permuter(to_nhwc)
    back = _back((0, 3, 1, 2), os_)  # from (N, OH, OW, O)

    if method == "im2col, transposed product":
        # the image as (C, H, W, N), "windows" at the kernel's positions (stride: the
        # kernel's dilation) over the output's positions (their spacing: the strides)
        cols_shape = (c * kh * kw, out_h * out_w * n)
        parallel = cols_shape[0] * cols_shape[1] >= PARALLEL_MIN
        gather = conv_kernels.im2col(parallel)
        chwn = _permuter((ls[1], ls[2], ls[3], ls[0]))
        ihwo = _permuter((rs[1], rs[2], rs[3], rs[0]))
        back_t = _back((2, 3, 0, 1), os_)  # from (OH, OW, N, O)

        def conv(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
            cols = np.empty(cols_shape, dtype)
            gather(chwn(lhs), cols, kh, kw, out_h, out_w, dh, dw, sh, sw, ph, pw, lh, lw)
            out = scipy_matmul(cols.T, ihwo(rhs).reshape(cols_shape[0], o))
            return out.reshape(out_h, out_w, n, o).transpose(back_t)
    elif method == "col2im":
        taps = kh * kw
        parallel = n * out_h * out_w * o >= PARALLEL_MIN
        gather_sum = conv_kernels.col2im(parallel)
        ihwo = _permuter((rs[1], rs[2], rs[3], rs[0]))

        def conv(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
            p = scipy_matmul(nhwc(lhs).reshape(n * h * w_, c), ihwo(rhs).reshape(c, taps * o))
            out = np.empty(shape, dtype)
            gather_sum(p.reshape(n, h, w_, taps * o), out, kh, kw, sh, sw, dh, dw, ph, pw,
                       lh, lw)
            return out.transpose(back)
    elif method == "direct":
        parallel = n * out_h * out_w * kh * kw * c >= PARALLEL_MIN
        planes, direct = conv_kernels.direct(parallel)
        to_matrix = (rs[2], rs[3], rs[1], rs[0])  # (KH, KW, I, O)
        # the phase planes' rows and columns: every one a window reaches
        plane = (n, c, sh, sw, out_h + (kh - 1) * dh // sh, out_w + (kw - 1) * dw // sw)
        # output rows a block (its accumulator about BLOCK_BYTES)
        block = max(1, min(out_h, BLOCK_BYTES // (plane[-1] * o * dtype.itemsize)))

        def conv(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
            xp = np.empty(plane, dtype)
            planes(nhwc(lhs), xp, ph, pw, lh, lw)
            out = np.empty(shape, dtype)
            wf = np.ascontiguousarray(rhs.transpose(to_matrix)).reshape(kh * kw * c, o)
            direct(xp, wf, out, kh, kw, dh, dw, block)
            return out.transpose(back)
    elif method == "shifted gemm":
        hp, wp = h + ph + qh, w_ + pw + qw  # the padded image
        last = (kh - 1) * dh * wp + (kw - 1) * dw  # the farthest offset
        span = n * hp * wp - last  # the rows every offset's product covers
        gemm = _gemm(dtype)
        to_matrix = (rs[2], rs[3], rs[1], rs[0])  # (KH, KW, I, O)

        def conv(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
            xp = np.zeros((n, hp, wp, c), dtype)
            xp[:, ph:ph + h, pw:pw + w_] = lhs.transpose(to_nhwc)
            flat = xp.reshape(n * hp * wp, c)
            wk = np.ascontiguousarray(rhs.transpose(to_matrix))
            acc = np.empty((n * hp * wp, o), dtype)
            acc_t = acc[:span].T  # (O, span), Fortran-ordered: BLAS's column-major C
            for t in range(kh * kw):
                p, q = divmod(t, kw)
                at = p * dh * wp + q * dw
                # C^T = W^T X^T in column-major terms; the first offset overwrites (beta 0);
                # every operand Fortran-ordered already, so that SciPy copies none of them
                acc_t = gemm(1.0, wk[p, q].T, flat[at:at + span].T, beta=float(t > 0),
                             c=acc_t, overwrite_c=True)
            if not np.shares_memory(acc_t, acc):  # (a wrapper that copied after all)
                acc[:span] = acc_t.T
            full = acc.reshape(n, hp, wp, o)[:, :out_h, :out_w]
            return full.transpose(back)
    elif method == "gemm":
        io = (rs[1], rs[0], rs[2], rs[3])  # (I, O, 1, 1)

        def conv(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
            out = scipy_matmul(nhwc(lhs).reshape(n * h * w_, c), rhs.transpose(io).reshape(c, o))
            return out.reshape(shape).transpose(back)
    else:
        rows, width = n * out_h * out_w, kh * kw * c
        parallel = rows * width >= PARALLEL_MIN
        gather = conv_kernels.im2col(parallel)
        to_matrix = (rs[2], rs[3], rs[1], rs[0])  # (KH, KW, I, O)

        def conv(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
            cols = np.empty((rows, width), dtype)
            gather(nhwc(lhs), cols, out_h, out_w, kh, kw, sh, sw, dh, dw, ph, pw, lh, lw)
            out = scipy_matmul(cols, rhs.transpose(to_matrix).reshape(width, o))
            return out.reshape(shape).transpose(back)

    conv.method = method  # type: ignore[attr-defined]
    return conv


def conv_general_dilated(lhs, rhs, **attrs):  # noqa: ANN001, ANN201, ANN003
    """The op on two arrays: `prepare`'s form for their types."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    fn = prepare([TensorType(x.shape, dtypes.from_numpy(x.dtype)) for x in (lhs, rhs)],
                 Attrs(attrs))
    return fn(lhs, rhs) if fn is not None else OPS["conv_general_dilated"].ref(lhs, rhs, **attrs)


REFERENCES = {"conv_general_dilated": conv_general_dilated}

"""Rows for windowed reductions, what pooling traces to: `reduce_window_sum/max/min` (sum and
max pooling; average pooling is a sum then a divide), and the gradients JAX emits for them:
`select_and_scatter_add` (the VJP of max pooling: each window's incoming gradient goes to the
position its max came from) and `select_and_gather_add` (the JVP: each window's tangent at
that position). The gradient of sum pooling is `pad` + `reduce_window_sum`, rows already.

The window geometry (padding, base and window dilation, strides) is shared with
`conv_general_dilated` (ir/ops/convolution.py): `windows` is the one NumPy view of it. Holes that base
dilation and padding open hold the reduction's identity, as in XLA. `select_prim` ("ge" for
max, "le" for min) picks the first extremum of a window when values tie, as XLA:CPU does.

Split: every row maps chunks of a dimension whose window is 1 wide, stride 1 and unpadded
(the batch and channel dimensions of NHWC/NCHW pooling) to chunks of the result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import dtypes
from ..graph import Attrs, TensorType
from ..traits import MONOIDS, OpKind, Split
from .shape import pad_reference
from .table import OpDef, OpError, register, sample_array

WINDOW = ("window_dimensions", "window_strides", "padding", "base_dilation", "window_dilation")


def window_out_shape(op: str, shape: Sequence[int], window: Sequence[int], strides: Sequence[int],
                     padding: Sequence[Sequence[int]], base: Sequence[int] | None,
                     dilation: Sequence[int] | None) -> tuple[int, ...]:
    """The number of window positions along each dimension (raises OpError if none fit)."""
    n = len(shape)
    base, dilation = tuple(base or (1,) * n), tuple(dilation or (1,) * n)
    if not all(len(v) == n for v in (window, strides, padding, base, dilation)):
        raise OpError(f"{op}: window attributes do not all have rank {n}")
    out = []
    for d, w, s, (lo, hi), b, wd in zip(shape, window, strides, padding, base, dilation):
        if min(w, s, b, wd) < 1:
            raise OpError(f"{op}: window sizes, strides and dilations must be positive")
        span = (d - 1) * b + 1 + lo + hi if d else lo + hi
        reach = (w - 1) * wd + 1
        out.append(max(0, (span - reach) // s + 1) if span >= reach else 0)
    return tuple(out)


# The pooling gradients' windows with at most this many elements pick their element offset by
# offset: one vectorised NumPy op per window offset over every position at once, rather than
# an argmax over the window axes of a strided view, which NumPy walks element by element (10x
# slower on a CNN's gradient). Larger windows take the view. (Pooling itself is separable.)
FOLD_BY_OFFSET = 64


def _padded(x: np.ndarray, padding: Sequence[Sequence[int]], base: Sequence[int] | None,
            fill: Any, axes: Sequence[int]) -> np.ndarray:
    """x dilated by `base` and padded with `fill` (x itself when neither changes it)."""
    if all(tuple(p) == (0, 0) for p in padding) and all(b == 1 for b in base or ()):
        return x
    cfg = [(0, 0, 0)] * x.ndim
    for a, (lo, hi), b in zip(axes, padding, tuple(base or (1,) * len(axes))):
        cfg[a] = (lo, hi, b - 1)
    return pad_reference(x, np.asarray(fill, x.dtype), cfg)


def offset_views(padded: np.ndarray, window: Sequence[int], strides: Sequence[int],
                 dilation: Sequence[int] | None, positions: Sequence[int]
                 ) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """Per window offset (in window order): the offset, and the view of `padded` holding
    that offset's element of every window (shape `positions`)."""
    dilation = tuple(dilation or (1,) * padded.ndim)
    out = []
    for off in np.ndindex(*window):
        index = tuple(slice(o * d, o * d + (p - 1) * s + 1, s)
                      for o, d, s, p in zip(off, dilation, strides, positions))
        out.append((off, padded[index]))
    return out


def by_offset(window: Sequence[int], positions: Sequence[int]) -> bool:
    return math.prod(window) <= FOLD_BY_OFFSET and min(positions, default=1) > 0


def _separable(padded: np.ndarray, fold: Any, window: Sequence[int], strides: Sequence[int],
               dilation: Sequence[int] | None, positions: Sequence[int]) -> np.ndarray:
    """A window reduction one dimension at a time (a monoid's window fold is separable): per
    dimension, one vectorised op per window offset along it, on what the dimensions before
    left. A 2x2 max pool is 2 + 2 ops, a 32x32 global pool 64, not 1024 (2.3x faster than
    folding whole-window offsets, 5x faster than reducing a strided window view)."""
    dilation = tuple(dilation or (1,) * padded.ndim)
    out = padded
    for d, (w, s, dil, p) in enumerate(zip(window, strides, dilation, positions)):
        if w == 1 and s == 1 and out.shape[d] == p:
            continue
        acc = None
        for o in range(w):
            index = [slice(None)] * out.ndim
            index[d] = slice(o * dil, o * dil + (p - 1) * s + 1, s)
            view = out[tuple(index)]
            acc = view.copy() if acc is None else fold(acc, view, out=acc)
        out = acc
    return out.copy() if out is padded else out


def windows(x: np.ndarray, window: Sequence[int], strides: Sequence[int],
            padding: Sequence[Sequence[int]], base: Sequence[int] | None,
            dilation: Sequence[int] | None, fill: Any, axes: Sequence[int] | None = None
            ) -> np.ndarray:
    """x dilated by `base`, padded with `fill`, as a view (*positions, *window) over `axes`
    (default: all) — the other axes lead, untouched."""
    axes = tuple(range(x.ndim)) if axes is None else tuple(axes)
    k = len(axes)
    base, dilation = tuple(base or (1,) * k), tuple(dilation or (1,) * k)
    padded = _padded(x, padding, base, fill, axes)
    reach = [(w - 1) * d + 1 for w, d in zip(window, dilation)]
    if any(r > padded.shape[a] for a, r in zip(axes, reach)):
        # a window wider than the padded input fits nowhere: no positions along it (as XLA)
        shape = list(padded.shape)
        for a, r, s in zip(axes, reach, strides):
            shape[a] = max(0, (padded.shape[a] - r) // s + 1) if r <= padded.shape[a] else 0
        return np.empty((*shape, *window), padded.dtype)
    view = sliding_window_view(padded, reach, axis=axes)
    pick = [slice(None)] * x.ndim
    for a, s in zip(axes, strides):
        pick[a] = slice(None, None, s)
    pick += [slice(None, None, d) for d in dilation]
    return view[tuple(pick)]


def _identity(monoid: str, dtype: np.dtype) -> Any:
    return MONOIDS[monoid].identity_value(dtypes.from_numpy(dtype))


def _attrs(a: Attrs) -> tuple:
    return tuple(a.get(k) for k in WINDOW)


def _reduce_window_infer(op: str):
    def infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
        (t,) = ts
        return TensorType(window_out_shape(op, t.shape, *_attrs(a)), t.dtype)

    return infer


def _unit_axes(ins: Sequence[TensorType], out: TensorType, a: Attrs) -> dict[int, tuple]:
    """Dimensions the window does not reach across: they map whole, chunk to chunk."""
    n = out.rank
    w, s, p = a["window_dimensions"], a["window_strides"], a["padding"]
    base, wd = a.get("base_dilation") or (1,) * n, a.get("window_dilation") or (1,) * n
    return {d: (d,) * len(ins) for d in range(n)
            if w[d] == s[d] == base[d] == wd[d] == 1 and tuple(p[d]) == (0, 0)}


def _window_flops(ins: Sequence[TensorType], out: Any, a: Attrs) -> int:
    return out.size * max(math.prod(a["window_dimensions"]) - 1, 0)


def _window_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    """2x2 pooling of an NHWC batch, stride 2 (seed 0), padded and dilated otherwise."""
    x = sample_array(rng, (2, 5, 6, 3))
    if rng.integers(2):
        return [x], {"window_dimensions": (1, 2, 2, 1), "window_strides": (1, 2, 2, 1),
                     "padding": ((0, 0), (0, 0), (0, 0), (0, 0)),
                     "base_dilation": (1, 1, 1, 1), "window_dilation": (1, 1, 1, 1)}
    return [x], {"window_dimensions": (1, 3, 2, 1), "window_strides": (1, 1, 2, 1),
                 "padding": ((0, 0), (1, 1), (0, 1), (0, 0)),
                 "base_dilation": (1, 2, 1, 1), "window_dilation": (1, 1, 2, 1)}


for _name, _monoid in (("reduce_window_sum", "add"), ("reduce_window_max", "max"),
                       ("reduce_window_min", "min")):
    def _ref(x, window_dimensions, window_strides, padding, base_dilation=None,
             window_dilation=None, _m=_monoid):
        positions = window_out_shape("", x.shape, window_dimensions, window_strides, padding,
                                     base_dilation, window_dilation)
        fold = getattr(np, MONOIDS[_m].array_fn)
        if min(positions, default=1) > 0:
            padded = _padded(x, padding, base_dilation, _identity(_m, x.dtype), range(x.ndim))
            return _separable(padded, fold, window_dimensions, window_strides,
                              window_dilation, positions).astype(x.dtype, copy=False)
        v = windows(x, window_dimensions, window_strides, padding, base_dilation,
                    window_dilation, _identity(_m, x.dtype))
        return fold.reduce(v, axis=tuple(range(x.ndim, v.ndim))).astype(x.dtype, copy=False)

    def _lower(x, _n=_name, **a):
        from jax._src.lax import windowed_reductions as wr

        return getattr(wr, f"_{_n}")(x, *(a.get(k) for k in WINDOW))

    register(OpDef(_name, OpKind.OTHER, 1, WINDOW, _reduce_window_infer(_name), _ref, _window_flops,
                   _lower, _window_sample, monoid=MONOIDS[_monoid], split=Split.MAP,
                   split_axes=_unit_axes, optional=("base_dilation", "window_dilation")))


# ---------------------------------------------------------------- max-pooling gradients


def _selected(operand: np.ndarray, select_prim: str, window, strides, padding, base=None,
              dilation=None) -> tuple[np.ndarray, np.ndarray]:
    """Per window position, the flat index into the padded operand of its selected element
    (the first maximum for "ge", minimum for "le"), and the padded operand's shape."""
    if select_prim not in ("ge", "le"):
        raise OpError(f"select_prim must be 'ge' or 'le', got {select_prim!r}")
    fill = _identity("max" if select_prim == "ge" else "min", operand.dtype)
    n = operand.ndim
    base = tuple(base or (1,) * n)
    padded_shape = tuple((d - 1) * b + 1 + lo + hi if d else lo + hi
                         for d, b, (lo, hi) in zip(operand.shape, base, padding))
    starts = window_out_shape(select_prim, operand.shape, window, strides, padding, base,
                              dilation)
    if min(starts, default=1) == 0:  # no window fits: nothing selected
        return np.zeros(starts, np.int64), np.asarray(padded_shape)
    if by_offset(window, starts):
        return _selected_by_offset(operand, select_prim, window, strides, padding, base,
                                   dilation, fill, padded_shape, starts)
    positions = np.arange(math.prod(padded_shape)).reshape(padded_shape)
    vals = windows(operand, window, strides, padding, base, dilation, fill)
    where = sliding_window_view(positions, [(w - 1) * d + 1 for w, d in
                                            zip(window, dilation or (1,) * n)])
    where = where[tuple(slice(None, None, s) for s in strides)
                  + tuple(slice(None, None, d) for d in (dilation or (1,) * n))]
    flat_vals = vals.reshape(*vals.shape[:n], -1)
    pick = (np.argmax if select_prim == "ge" else np.argmin)(flat_vals, axis=-1)
    chosen = np.take_along_axis(where.reshape(*where.shape[:n], -1), pick[..., None], -1)[..., 0]
    return chosen, np.asarray(padded_shape)


def _best_offset(operand, select_prim, window, strides, padding, base, dilation, fill, starts
                 ) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Per window, the index (in window order) of its selected offset, one window offset at a
    time: a later offset wins only where it is strictly better, or NaN where the best so far
    is not (np.argmax's first NaN); and the offsets."""
    padded = _padded(operand, padding, base, fill, range(operand.ndim))
    better_than = np.greater if select_prim == "ge" else np.less
    nans = dtypes.is_float(dtypes.from_numpy(padded.dtype)) and bool(np.isnan(padded).any())
    best_val = best_at = None
    offsets = []
    for k, (off, view) in enumerate(offset_views(padded, window, strides, dilation, starts)):
        offsets.append(off)
        if best_val is None:
            best_val, best_at = view.copy(), np.zeros(view.shape, np.int32)
            continue
        better = better_than(view, best_val)
        if nans:
            better |= np.isnan(view) & ~np.isnan(best_val)
        np.copyto(best_val, view, where=better)
        np.copyto(best_at, k, where=better)
    return best_at, offsets


def _selected_by_offset(operand, select_prim, window, strides, padding, base, dilation, fill,
                        padded_shape, starts) -> tuple[np.ndarray, np.ndarray]:
    best_at, offsets = _best_offset(operand, select_prim, window, strides, padding, base,
                                    dilation, fill, starts)
    dil = dilation or (1,) * operand.ndim
    deltas = [int(np.ravel_multi_index(tuple(o * d for o, d in zip(off, dil)), padded_shape))
              for off in offsets]
    corner = np.arange(math.prod(padded_shape)).reshape(padded_shape)
    corner = corner[tuple(slice(0, (p - 1) * s + 1, s) for p, s in zip(starts, strides))]
    return corner + np.asarray(deltas)[best_at], np.asarray(padded_shape)


def _crop(x: np.ndarray, padding) -> np.ndarray:
    return x[tuple(slice(lo, x.shape[i] - hi) for i, (lo, hi) in enumerate(padding))]


def _scatter_ref(source, operand, select_prim, window_dimensions, window_strides, padding):
    starts = window_out_shape(select_prim, operand.shape, window_dimensions, window_strides,
                              padding, None, None)
    if by_offset(window_dimensions, starts) and select_prim in ("ge", "le"):
        fill = _identity("max" if select_prim == "ge" else "min", operand.dtype)
        best_at, _ = _best_offset(operand, select_prim, window_dimensions, window_strides,
                                  padding, None, None, fill, starts)
        acc = _padded(np.zeros_like(operand, source.dtype), padding, None, 0, range(operand.ndim))
        zero = np.zeros((), source.dtype)
        for k, (_, view) in enumerate(offset_views(acc, window_dimensions, window_strides, None,
                                                   starts)):
            np.add(view, np.where(best_at == k, source, zero), out=view)
        return _crop(acc, padding)
    chosen, shape = _selected(operand, select_prim, window_dimensions, window_strides, padding)
    acc = np.zeros(int(np.prod(shape)), source.dtype)
    np.add.at(acc, chosen.ravel(), source.ravel())
    return _crop(acc.reshape(tuple(shape)), padding)


def _scatter_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    source, operand = ts
    want = window_out_shape("select_and_scatter_add", operand.shape, a["window_dimensions"],
                            a["window_strides"], a["padding"], None, None)
    if source.shape != want or source.dtype != operand.dtype:
        raise OpError(f"select_and_scatter_add: source {source} does not fit the windows of "
                      f"{operand} ({want})")
    return operand


def _jax_select(name: str):
    def lower(*xs, select_prim, **a):
        import jax.lax as lax
        from jax._src.lax import windowed_reductions as wr

        prim = {"ge": lax.ge_p, "le": lax.le_p}[select_prim]
        return getattr(wr, f"_{name}")(*xs, prim, **a)

    return lower


def _scatter_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    x = sample_array(rng, (2, 6, 5, 3))
    attrs = {"select_prim": "ge" if rng.integers(2) else "le",
             "window_dimensions": (1, 3, 2, 1), "window_strides": (1, 2, 2, 1),
             "padding": ((0, 0), (1, 0), (0, 1), (0, 0))}
    shape = window_out_shape("", x.shape, attrs["window_dimensions"], attrs["window_strides"],
                             attrs["padding"], None, None)
    return [sample_array(rng, shape), x], attrs


register(OpDef("select_and_scatter_add", OpKind.OTHER, 2,
               ("select_prim", "window_dimensions", "window_strides", "padding"), _scatter_infer,
               _scatter_ref, lambda ins, out, a: ins[1].size + ins[0].size * math.prod(
                   a["window_dimensions"]), _jax_select("select_and_scatter_add"), _scatter_sample,
               split=Split.MAP, split_axes=_unit_axes))


def _gather_ref(tangents, operand, select_prim, window_dimensions, window_strides, padding,
                base_dilation=None, window_dilation=None):
    chosen, shape = _selected(operand, select_prim, window_dimensions, window_strides, padding,
                              base_dilation, window_dilation)
    cfg = [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation or (1,) * operand.ndim)]
    padded = pad_reference(tangents, np.zeros((), tangents.dtype), cfg)
    return padded.ravel()[chosen]


def _gather_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    tangents, operand = ts
    if tangents != operand:
        raise OpError(f"select_and_gather_add: tangents {tangents} differ from {operand}")
    return TensorType(window_out_shape("select_and_gather_add", operand.shape,
                                       *(a.get(k) for k in WINDOW)), operand.dtype)


def _gather_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    inputs, attrs = _window_sample(rng)
    return [sample_array(rng, inputs[0].shape), inputs[0]], {"select_prim": "ge", **attrs}


register(OpDef("select_and_gather_add", OpKind.OTHER, 2, ("select_prim", *WINDOW), _gather_infer,
               _gather_ref, _window_flops, _jax_select("select_and_gather_add"), _gather_sample,
               split=Split.MAP, split_axes=_unit_axes, optional=("base_dilation", "window_dilation")))

"""The `conv_general_dilated` row: every convolution JAX emits, forward and backward (the
gradients are convolutions too, with lhs dilation for strided forwards and batch groups for
the kernel's gradient of a grouped one).

Attributes are the primitive's params: `dimension_numbers` is JAX's ConvDimensionNumbers as a
plain triple (lhs_spec, rhs_spec, out_spec): each lists the operand's dimensions in canonical
order (batch, feature, spatial...) for the lhs and the result, (out feature, in feature,
spatial...) for the kernel; so NHWC/HWIO/NHWC is ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)).
`padding` is one (low, high) pair per spatial dimension (possibly negative).

The NumPy reference is im2col by views: the lhs, dilated and padded as ir/ops/windows.windows
does, viewed as windows of the dilated kernel, contracted with the kernel by einsum per group.
Split: the result's batch dimension maps to the lhs's (without batch groups), its feature
dimension to the kernel's output features (without groups of either kind).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes
from ..graph import Attrs, TensorType
from ..traits import MONOIDS, OpKind, Split
from .shape import pad_reference
from .table import OpDef, OpError, register, sample_array
from .windows import window_out_shape, windows

_LETTERS = "uvwxyz"


def _specs(a: Attrs) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    lhs, rhs, out = a["dimension_numbers"]
    return tuple(lhs), tuple(rhs), tuple(out)


def _conv_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    lhs, rhs = ts
    ls, rs, os_ = _specs(a)
    n = lhs.rank
    if rhs.rank != n or not all(sorted(s) == list(range(n)) for s in (ls, rs, os_)):
        raise OpError(f"conv_general_dilated: dimension_numbers {a['dimension_numbers']} do "
                      f"not fit {lhs} and {rhs}")
    g, b = a.get("feature_group_count", 1), a.get("batch_group_count", 1)
    batch, feat = lhs.shape[ls[0]], lhs.shape[ls[1]]
    out_f, in_f = rhs.shape[rs[0]], rhs.shape[rs[1]]
    if g < 1 or b < 1 or (g > 1 and b > 1):
        raise OpError("conv_general_dilated: at most one of feature_group_count and "
                      "batch_group_count may exceed 1")
    if feat != in_f * g or out_f % g or out_f % b or batch % b:
        raise OpError(f"conv_general_dilated: features of {lhs} and {rhs} do not fit "
                      f"feature_group_count={g}, batch_group_count={b}")
    if lhs.dtype != rhs.dtype:
        raise OpError(f"conv_general_dilated: element types differ: {lhs} and {rhs}")
    spatial = window_out_shape(
        "conv_general_dilated", [lhs.shape[d] for d in ls[2:]], [rhs.shape[d] for d in rs[2:]],
        a["window_strides"], a["padding"], a.get("lhs_dilation"), a.get("rhs_dilation"))
    canonical = (batch // b, out_f, *spatial)
    shape = [0] * n
    for k, d in enumerate(os_):
        shape[d] = canonical[k]
    return TensorType(tuple(shape), a.get("preferred_element_type") or lhs.dtype)


_WIDE = {"bf16": np.float32, "i4": np.int32, "u4": np.int32}


def _conv_ref(lhs, rhs, *, window_strides, padding, dimension_numbers, lhs_dilation=None,
              rhs_dilation=None, feature_group_count=1, batch_group_count=1, precision=None,
              preferred_element_type=None):
    ls, rs, os_ = (tuple(s) for s in dimension_numbers)
    if preferred_element_type:
        target = dtypes.to_numpy(preferred_element_type)
        lhs, rhs = lhs.astype(target, copy=False), rhs.astype(target, copy=False)
    wide = _WIDE.get(dtypes.from_numpy(lhs.dtype))
    if wide is not None:  # NumPy's einsum and matmul take no ml_dtypes types: compute wide,
        # then round (bfloat16) or wrap (int4) back
        return _conv_ref(lhs.astype(wide), rhs.astype(wide), window_strides=window_strides,
                         padding=padding, dimension_numbers=dimension_numbers,
                         lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                         feature_group_count=feature_group_count,
                         batch_group_count=batch_group_count).astype(lhs.dtype)
    if feature_group_count == 1 and batch_group_count == 1:
        return _conv_im2col(lhs, rhs, ls, rs, os_, window_strides, padding, lhs_dilation,
                            rhs_dilation).astype(lhs.dtype, copy=False)
    x = np.transpose(lhs, ls)  # (N, C, *spatial)
    w = np.transpose(rhs, rs)  # (O, I, *kernel)
    k = x.ndim - 2
    w = pad_reference(w, np.zeros((), w.dtype), [(0, 0, 0)] * 2 + [(0, 0, d - 1) for d in
                                                                  (rhs_dilation or (1,) * k)])
    v = windows(x, w.shape[2:], window_strides, padding, lhs_dilation, None, 0,
                axes=range(2, 2 + k))  # (N, C, *out_spatial, *kernel)
    sp, kk = _LETTERS[:k], _LETTERS[::-1][:k].upper()
    g, b = feature_group_count, batch_group_count
    n, c = v.shape[:2]
    o = w.shape[0]
    v = v.reshape(b, n // b, g, c // g, *v.shape[2:])
    w = w.reshape(b * g, o // (b * g), *w.shape[1:]).reshape(b, g, o // (b * g), *w.shape[1:])
    out = np.einsum(f"bngc{sp}{kk},bgoc{kk}->nbgo{sp}", v, w, optimize=True)
    out = out.reshape(n // b, o, *out.shape[4:])  # feature = (batch group, group, o)
    return np.transpose(out, np.argsort(os_)).astype(lhs.dtype, copy=False)


def _conv_im2col(lhs, rhs, ls, rs, os_, strides, padding, lhs_dilation, rhs_dilation):
    """An ungrouped convolution as one matrix product: the windows of the channels-last lhs
    copied once into rows (N * out positions, kernel positions * C), times the kernel as a
    (kernel positions * C, O) matrix, through BLAS. NHWC in, NHWC out: no transposed copy."""
    k = lhs.ndim - 2
    x = np.transpose(lhs, (ls[0], *ls[2:], ls[1]))  # (N, *spatial, C)
    w = np.transpose(rhs, (*rs[2:], rs[1], rs[0]))  # (*kernel, I, O)
    v = windows(x, w.shape[:k], strides, padding, lhs_dilation, rhs_dilation, 0,
                axes=range(1, 1 + k))  # (N, *out_spatial, C, *kernel)
    cols = np.ascontiguousarray(np.moveaxis(v, 1 + k, -1))  # (N, *out_spatial, *kernel, C)
    n, out_spatial = cols.shape[0], cols.shape[1:1 + k]
    out = np.matmul(cols.reshape(n * math.prod(out_spatial), math.prod(cols.shape[1 + k:])),
                    w.reshape(math.prod(w.shape[:-1]), w.shape[-1]))
    canonical = np.moveaxis(out.reshape(n, *out_spatial, w.shape[-1]), -1, 1)  # (N, O, *sp)
    return np.transpose(canonical, np.argsort(os_))


def _conv_flops(ins: Sequence[TensorType], out: Any, a: Attrs) -> int:
    rhs, rs = ins[1], _specs(a)[1]
    per_output = rhs.shape[rs[1]] * math.prod(rhs.shape[d] for d in rs[2:])
    return 2 * out.size * per_output


def _jax_conv(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None, **a):
    import jax.lax as lax

    dn = lax.ConvDimensionNumbers(*(tuple(s) for s in dimension_numbers))
    if isinstance(precision, int):
        precision = lax.Precision(precision)
    elif isinstance(precision, tuple):
        precision = tuple(lax.Precision(p) for p in precision)
    pet = dtypes.to_numpy(preferred_element_type) if preferred_element_type else None
    return lax.conv_general_dilated(lhs, rhs, dimension_numbers=dn, precision=precision,
                                    preferred_element_type=pet, **a)


def _conv_split(ins: Sequence[TensorType], out: TensorType, a: Attrs) -> dict[int, tuple]:
    ls, rs, os_ = _specs(a)
    g, b = a.get("feature_group_count", 1), a.get("batch_group_count", 1)
    axes: dict[int, tuple] = {}
    if b == 1:
        axes[os_[0]] = (ls[0], None)
    if b == 1 and g == 1:
        axes[os_[1]] = (None, rs[0])
    return axes


_CASES = (
    # NHWC / HWIO, stride 2, asymmetric padding, kernel dilation
    ((2, 7, 6, 4), (3, 2, 4, 5), {"dimension_numbers": ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)),
                                  "window_strides": (2, 1), "padding": ((1, 2), (0, 1)),
                                  "lhs_dilation": (1, 1), "rhs_dilation": (1, 2),
                                  "feature_group_count": 1, "batch_group_count": 1}),
    # NCHW / OIHW, two feature groups, lhs dilation (a strided conv's input gradient)
    ((2, 4, 5, 5), (6, 2, 3, 3), {"dimension_numbers": ((0, 1, 2, 3), (0, 1, 2, 3), (0, 1, 2, 3)),
                                  "window_strides": (1, 1), "padding": ((2, 2), (1, -1)),
                                  "lhs_dilation": (2, 1), "rhs_dilation": (1, 1),
                                  "feature_group_count": 2, "batch_group_count": 1}),
    # a grouped conv's kernel gradient: batch groups, 1-D
    ((4, 3, 9), (6, 3, 4), {"dimension_numbers": ((0, 1, 2), (0, 1, 2), (0, 1, 2)),
                            "window_strides": (1,), "padding": ((0, 0),),
                            "lhs_dilation": (1,), "rhs_dilation": (2,),
                            "feature_group_count": 1, "batch_group_count": 2}),
)


def _conv_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    lhs_shape, rhs_shape, attrs = _CASES[int(rng.integers(len(_CASES)))]
    return [sample_array(rng, lhs_shape), sample_array(rng, rhs_shape)], dict(attrs)


register(OpDef("conv_general_dilated", OpKind.DOT, 2,
               ("window_strides", "padding", "lhs_dilation", "rhs_dilation", "dimension_numbers",
                "feature_group_count", "batch_group_count", "precision", "preferred_element_type"),
               _conv_infer, _conv_ref, _conv_flops, _jax_conv, _conv_sample,
               monoid=MONOIDS["add"], split=Split.MAP, split_axes=_conv_split,
               optional=("lhs_dilation", "rhs_dilation", "feature_group_count", "batch_group_count",
                         "precision", "preferred_element_type")))

"""JAX's random numbers in CPU programs: threefry2x32 as one numba loop (bit for bit the op
rows' cipher, ir/ops/random.py); random_bits and random_split draw every key's words in one
loop too (the counters computed in it), random_fold_in runs the row's own loop over keys
with that cipher. NumPy's cipher is 20 rounds of whole-array ufuncs: about 80 us a draw at
the sizes users paste (a dropout mask of 3x6 floats), against a few us in one loop.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ...ir.ops.random import KEY_WORDS, with_cipher

_ROTATIONS = np.array([13, 15, 26, 6, 17, 29, 16, 24], np.uint32)


@functools.cache
def _loops() -> tuple[Any, Any]:
    """(cipher, draws): the cipher elementwise over flat arrays, and a batch of keys' draws
    (element i of key k: the cipher of (i >> 32, i & 0xFFFFFFFF), as the rows' _counts)."""
    from numba import njit

    @njit(cache=True, error_model="numpy", inline="always")
    def block(k1, k2, x1, x2, rot):  # noqa: ANN001, ANN202
        ks = (k1, k2, np.uint32(k1 ^ k2 ^ np.uint32(0x1BD11BDA)))
        a = np.uint32(x1 + ks[0])
        b = np.uint32(x2 + ks[1])
        for group in range(5):
            for j in range(4):
                r = rot[(group % 2) * 4 + j]
                a = np.uint32(a + b)
                b = np.uint32(np.uint32(b << r) | np.uint32(b >> (np.uint32(32) - r)))
                b = np.uint32(a ^ b)
            a = np.uint32(a + ks[(group + 1) % 3])
            b = np.uint32(b + ks[(group + 2) % 3] + np.uint32(group + 1))
        return a, b

    @njit(cache=True, error_model="numpy")
    def cipher(k1, k2, x1, x2, rot, o1, o2):  # noqa: ANN001, ANN202
        for i in range(x1.shape[0]):
            o1[i], o2[i] = block(k1[i], k2[i], x1[i], x2[i], rot)

    @njit(cache=True, error_model="numpy")
    def draws(keys, rot, o1, o2):  # noqa: ANN001, ANN202
        for k in range(keys.shape[0]):
            for i in range(o1.shape[1]):
                wide = np.uint64(i)
                o1[k, i], o2[k, i] = block(keys[k, 0], keys[k, 1], np.uint32(wide >> np.uint64(32)),
                                           np.uint32(wide & np.uint64(0xFFFFFFFF)), rot)

    return cipher, draws


def threefry2x32(k1: Any, k2: Any, x1: Any, x2: Any) -> tuple[np.ndarray, np.ndarray]:
    arrays = [np.asarray(v, np.uint32) for v in (k1, k2, x1, x2)]
    shape = np.broadcast_shapes(*(v.shape for v in arrays))  # (np.broadcast_arrays: 8 us)
    k1, k2, x1, x2 = (np.ascontiguousarray(v if v.shape == shape else np.broadcast_to(v, shape))
                      .reshape(-1) for v in arrays)
    o1, o2 = np.empty(x1.shape, np.uint32), np.empty(x1.shape, np.uint32)
    _loops()[0](k1, k2, x1, x2, _ROTATIONS, o1, o2)
    return o1.reshape(shape), o2.reshape(shape)


def _words(keys: Any, shape: Any) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """ir/ops/random.cipher_words's draw, every key's words in one loop (the counters made in
    it): the rows' random_bits and random_split through it."""
    keys = np.asarray(keys, np.uint32)
    n = math.prod(shape)
    flat = np.ascontiguousarray(keys.reshape(-1, KEY_WORDS))
    o1 = np.empty((flat.shape[0], n), np.uint32)
    o2 = np.empty((flat.shape[0], n), np.uint32)
    _loops()[1](flat, _ROTATIONS, o1, o2)
    return keys.shape[:-1], o1, o2


REFERENCES = with_cipher(threefry2x32, _words)

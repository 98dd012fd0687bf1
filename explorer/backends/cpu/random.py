"""JAX's random numbers in CPU programs: threefry2x32 as one numba loop (bit for bit the op
rows' cipher, ir/ops_random.py), under the rows' own random_bits, random_split and
random_fold_in. NumPy's cipher is 20 rounds of whole-array ufuncs: about 80 us a draw at
the sizes users paste (a dropout mask of 3x6 floats), against a few us in one loop.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...ir.ops_random import with_cipher

_ROTATIONS = np.array([13, 15, 26, 6, 17, 29, 16, 24], np.uint32)


@functools.cache
def _loop() -> Any:
    from numba import njit

    @njit(cache=True, error_model="numpy")
    def cipher(k1, k2, x1, x2, rot, o1, o2):  # noqa: ANN001, ANN202
        for i in range(x1.shape[0]):
            ks = (k1[i], k2[i], np.uint32(k1[i] ^ k2[i] ^ np.uint32(0x1BD11BDA)))
            a = np.uint32(x1[i] + ks[0])
            b = np.uint32(x2[i] + ks[1])
            for group in range(5):
                for j in range(4):
                    r = rot[(group % 2) * 4 + j]
                    a = np.uint32(a + b)
                    b = np.uint32(np.uint32(b << r) | np.uint32(b >> (np.uint32(32) - r)))
                    b = np.uint32(a ^ b)
                a = np.uint32(a + ks[(group + 1) % 3])
                b = np.uint32(b + ks[(group + 2) % 3] + np.uint32(group + 1))
            o1[i] = a
            o2[i] = b

    return cipher


def threefry2x32(k1: Any, k2: Any, x1: Any, x2: Any) -> tuple[np.ndarray, np.ndarray]:
    arrays = [np.asarray(v, np.uint32) for v in (k1, k2, x1, x2)]
    shape = np.broadcast_shapes(*(v.shape for v in arrays))  # (np.broadcast_arrays: 8 us)
    k1, k2, x1, x2 = (np.ascontiguousarray(v if v.shape == shape else np.broadcast_to(v, shape))
                      .reshape(-1) for v in arrays)
    o1, o2 = np.empty(x1.shape, np.uint32), np.empty(x1.shape, np.uint32)
    _loop()(k1, k2, x1, x2, _ROTATIONS, o1, o2)
    return o1.reshape(shape), o2.reshape(shape)


REFERENCES = with_cipher(threefry2x32)

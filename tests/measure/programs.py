"""Programs the measurement tests share."""

from __future__ import annotations

import jax
import numpy as np

rng = np.random.default_rng(0)


def mlp(x, w1, w2):
    h = jax.nn.relu(x @ w1)
    return jax.nn.softmax(h @ w2, axis=-1).sum()


def mlp_args():
    return (rng.random((96, 64), np.float32), rng.random((64, 128), np.float32),
            rng.random((128, 32), np.float32))

"""`pad` and `concatenate` as generated CUDA (backends/gpu/shape_ops.py) on the host, against
the reference: the rows' samples, interior padding with negative (cropping) low and high
padding, bools and integers, empty inputs among the concatenated, a single input."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.ir.ops import OPS
from tests.backends.cuda_host import host_compiler
from tests.backends.gpu.test_routines import check_op

pytestmark = pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")


@pytest.mark.parametrize("op", ["pad", "concatenate"])
@pytest.mark.parametrize("seed", range(6))
def test_the_rows_samples(op: str, seed: int) -> None:
    ins, attrs = OPS[op].sample(np.random.default_rng(seed))
    check_op(op, ins, attrs, "generated CUDA")


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("config", [((1, -1, 2), (-2, 3, 0), (0, 0, 1)),
                                    ((0, 0, 0), (0, 0, 0), (-4, 0, 0)),
                                    ((3, 3, 0), (1, 0, 5), (-1, -1, 0))])
def test_pads_with_interior_and_cropping(config: tuple) -> None:
    check_op("pad", [X, np.float32(-1.5)], {"padding_config": config})
    check_op("pad", [X > 5, np.bool_(True)], {"padding_config": config})
    check_op("pad", [X.astype(np.int64), np.int64(-7)], {"padding_config": config})


def test_concatenations_with_empty_and_single_inputs() -> None:
    check_op("concatenate", [X, np.zeros((2, 0, 4), np.float32), X[:, :2] * 2], {"dimension": 1})
    check_op("concatenate", [X.astype(np.int64)], {"dimension": 2})
    check_op("concatenate", [X > 3, X < 9, X == 4], {"dimension": 0})

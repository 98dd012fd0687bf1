"""THE op table: every op is one row (an `OpDef`, ops/table.py) declaring its name, arity,
attributes, shape/dtype rule, NumPy reference, FLOP count and JAX lowering, and what the op
*is* (ir/traits.py). Importing this package registers every row, so `OPS` is complete.

The rows, one module per family (each imports only the table and lower families):

    table        OpDef, OPS, register, infer_type and the helpers rows are declared with
    elementwise  arithmetic, comparisons, math functions, select_n, clamp, conversions, bit ops
    shape        sources (parameter, constant, iota), views, slices, concatenate, pad, ...
    dot          dot_general
    reductions   monoid reductions, argmax/argmin, cumulative ops
    sort         sort, top_k
    indexing     gather, scatter
    windows      reduce_window and the pooling gradients
    convolution  conv_general_dilated
    linalg       cholesky, triangular_solve, lu, qr, eigh, svd
    random       threefry2x32 and JAX's PRNG rows
    regions      region ops (kernel, loop, scan, call, while, conditional) and the other rows
                 of imported HLO (opaque, tuple)
    sharding     sharding_constraint, the collectives (psum, all_gather, ...) and shard_map

The table drives the op tests (every row is checked against its `jax.lax` lowering on random
inputs), the reference interpreter, the verifier, the cost model and the JAX backend. A code
generator's scalar form of an op is the generator's own (backends/codegen/scalar_form.py).
"""

from . import (  # noqa: F401, I001  (registration, in the table's order)
    elementwise,
    shape,
    dot,
    reductions,
    sort,
    regions,
    windows,
    convolution,
    indexing,
    linalg,
    random,
    sharding,
)
from .dot import dot_dims
from .reductions import MONOID_REDUCTIONS
from .regions import (
    CONTROL_FLOW,
    LOOP_ACCUMULATE,
    loop_param_types,
    region_flops,
    region_result,
    type_from_text,
)
from .sort import top_k_key
from .table import OPS, TUPLE_OPERANDS, OpDef, OpError, get, infer_type

__all__ = [
    "CONTROL_FLOW", "LOOP_ACCUMULATE", "MONOID_REDUCTIONS", "OPS", "TUPLE_OPERANDS", "OpDef",
    "OpError", "dot_dims", "get", "infer_type", "loop_param_types", "region_flops",
    "region_result", "top_k_key", "type_from_text",
]

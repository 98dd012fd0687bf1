"""Run by tests/xla/test_spmd.py in a subprocess whose XLA_FLAGS give JAX host devices:

    python -m tests.xla.spmd_check PROGRAM [PROGRAM ...]

For each program of tests/xla/spmd_programs.py, xla_pipeline's SPMD story as one JSON line
(what the tests assert on), checked here against JAX itself where JAX knows the answer: the
compiled program's input shardings give each parameter's per-device shape, and the user's
program's value is computed by jax.jit on the same devices. `toomany N` asks for a mesh of N.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import jax
import numpy as np

import explorer as gx
from explorer.ir.ops.regions import bodies
from explorer.xla import compare_with_xla
from tests.xla.spmd_programs import PROGRAMS


def story(name: str) -> dict[str, Any]:
    n = len(jax.devices())
    fn, args = PROGRAMS[name](n)
    trace = gx.xla_pipeline(fn, *args)
    s = trace.spmd()
    compiled = jax.jit(fn).lower(*args).compile() if not hasattr(fn, "lower") else \
        fn.lower(*args).compile()
    want = [tuple(sh.shard_shape(np.shape(a))) for sh, a in zip(
        jax.tree_util.tree_leaves(compiled.input_shardings[0]), jax.tree_util.tree_leaves(args))]
    k = [st.name for st in trace.stages].index(s.partitioning) if s.partitioning else None
    final = trace.final.graph
    return {
        "devices": s.devices,
        "stages": [st.name for st in trace.stages],
        "propagation": list(s.propagation),
        "partitioning": s.partitioning,
        "collective_passes": list(s.collective_passes),
        "collectives": [{"stage": c.stage, "opcode": c.opcode, "type": c.type,
                         "file": c.source.file if c.source else None,
                         "line": c.source.line if c.source else None,
                         "attrs": {a: str(v) for a, v in c.attrs.items()}}
                        for c in s.collectives],
        "shapes": [[c.what, c.global_type, c.device_type, c.sharding] for c in s.shapes],
        "shardings": [[v.op, v.type, v.sharding, v.source.line if v.source else None]
                      for v in s.shardings],
        "jax_shard_shapes": [list(w) for w in want],
        "per_device_notes": [any(nt.startswith("per device") for nt in st.report.notes)
                             for st in trace.stages],
        "partitioned_params": [list(p.type.shape) for p in trace.stages[k].graph.param_nodes]
        if k is not None else [],
        "final_param_bytes": sum(p.type.nbytes for p in final.param_nodes),
        "memory": {"argument": s.memory.argument_size_in_bytes,
                   "output": s.memory.output_size_in_bytes,
                   "temp": s.memory.temp_size_in_bytes},
        "summary": trace.summary(),
        "story": str(s),
        "own_lines": sorted({str(nd.source) for st in trace.stages for nd in _walk(st.graph)
                             if nd.source is not None and ("explorer/xla/" in nd.source.file or
                                                           "explorer/frontend/" in nd.source.file)}),
        "user_lines": len({str(nd.source) for st in trace.stages for nd in _walk(st.graph)
                           if nd.source is not None}),
        "side_by_side_label": compare_with_xla(fn, *args).xla.label if name == "tp_mlp" else None,
        "partitioned_text_reads_back": gx.parse(str(trace.stages[k].graph)) ==
        trace.stages[k].graph if k is not None else None,
    }


def _walk(g: Any) -> Any:
    for nd in g.nodes:
        yield nd
        for _, body in bodies(nd):
            yield from _walk(body)


def too_many(need: int) -> dict[str, Any]:
    def f(x: Any) -> Any:
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        mesh = jax.make_mesh((need,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
        return jax.lax.with_sharding_constraint(x * 2, NamedSharding(mesh, P("x")))

    try:
        gx.xla_pipeline(f, np.ones((need * 2, 3), np.float32))
    except ValueError as e:
        return {"error": str(e)}
    return {"error": None}


def abstract() -> dict[str, Any]:
    from jax.sharding import AbstractMesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    sharding = NamedSharding(AbstractMesh((8,), ("x",)), P("x"))
    try:
        gx.xla_pipeline(jax.jit(lambda x: x * 2, in_shardings=sharding),
                        np.ones((16, 3), np.float32))
    except ValueError as e:
        return {"error": str(e)}
    return {"error": None}


def main(argv: list[str]) -> None:
    if argv[0] == "toomany":
        print(json.dumps(too_many(int(argv[1]))))
        print(json.dumps(abstract()))
        return
    for name in argv:
        print(json.dumps({"program": name, **story(name)}))


if __name__ == "__main__":
    main(sys.argv[1:])

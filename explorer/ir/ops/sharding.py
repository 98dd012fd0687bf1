"""Rows of sharded programs: `sharding_constraint` (a value's layout over a mesh, JAX's
`with_sharding_constraint` and a jit's `out_shardings`), the collectives a `shard_map` body
combines its devices' values with, and the `shard_map` region itself.

    %3 = f32[8,4] shard_map(%0) {mesh=mesh<"x"=4>, in_specs=(P("x"),), out_specs=(P(),),
                                 body=graph @shard_map_body {...}}

A `shard_map` splits each input per its in_spec into one block per device of `mesh` (devices
numbered row-major over the mesh axes), runs `body` on every device's blocks (its parameters
and results are per-device types) and puts each result's blocks together per its out_spec; a
dimension an out_spec leaves whole is every device's copy (they agree, as JAX checks).

A collective (kind `collective`) runs only inside a shard_map body: its `spmd` field is its
reference semantics over every device's value at once (a list, one per device, in device
order), which the interpreter calls where the devices running a body meet
(backends/spmd.py). Its `axes` name the mesh axes it combines over: the devices that differ
only on those axes form a group, ordered row-major over `axes`.

    psum, pmax, pmin      every device gets the group's sum / max / min
    all_gather            the group's values stacked (tiled: concatenated) along `dimension`
    psum_scatter          the group's sum, split along `dimension`: device k gets block k
    ppermute              `perm` pairs (source, destination) of group positions: a device
                          gets its source's value, zeros if it is no destination
    all_to_all            the value split along `split_axis` into one block per group member,
                          block k sent to member k, received blocks concatenated along
                          `concat_axis`
    axis_index            the device's position along `axes` (an i32 scalar)

Passes treat them as barriers: their rows say `barrier=True` (and no fuse or split role), so
no pass folds, fuses or splits them, and passes do not descend into a shard_map's body (it is
no CONTROL_FLOW region).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..graph import Attrs, TensorType, TupleType, Type
from ..sharding import MeshSpec, Sharding, ShardingError, Spec
from ..traits import Emit, OpKind, View
from .regions import bodies, graph_flops
from .table import OPS, OpDef, OpError, no_flops, per_element_flops, register, sample_array, tensor_type

Values = list[Any]  # one value per device, in device order


class DeviceCountError(RuntimeError):
    """A program that needs more devices than JAX has."""


def jax_mesh(mesh: MeshSpec) -> Any:
    """The JAX Mesh of `mesh` on the first devices JAX has; DeviceCountError saying how many
    it needs (and how to get host devices) when there are too few."""
    import jax
    from jax.sharding import Mesh

    devices = jax.devices()
    if len(devices) < mesh.size:
        raise DeviceCountError(
            f"the program runs on {mesh} and needs {mesh.size} devices, but JAX has "
            f"{len(devices)} ({devices[0].platform}). To explore it on a CPU, set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={mesh.size} before JAX is "
            f"imported (in the shell, or os.environ at the top of the notebook)")
    grid = np.array(devices[:mesh.size], dtype=object).reshape(mesh.sizes)
    return Mesh(grid, mesh.names)


def jax_sharding(s: Sharding) -> Any:
    from jax.sharding import NamedSharding, PartitionSpec

    return NamedSharding(jax_mesh(s.mesh), PartitionSpec(*(e or None for e in s.spec)))


def jax_spec(s: Spec) -> Any:
    from jax.sharding import PartitionSpec

    return PartitionSpec(*(e or None for e in s.entries))


# ---------------------------------------------------------------- sharding_constraint


def _constraint_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    s = a["sharding"]
    if not isinstance(s, Sharding):
        raise OpError(f"sharding_constraint: sharding must be a sharding<...>, got {s!r}")
    try:
        s.check(ts[0].shape, "sharding_constraint")
    except ShardingError as e:
        raise OpError(str(e)) from None
    return ts[0]


def _constraint_jax(x: Any, sharding: Sharding, **attrs: Any) -> Any:
    import jax

    return jax.lax.with_sharding_constraint(x, jax_sharding(sharding))


# attrs: sharding; origin (optional): "out_shardings" where a jit's out_shardings put it, else
# the user's with_sharding_constraint. Its value is its input's (a view of it).
def _constraint_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    """On a one-device mesh: the op tests run with the one device the suite has."""
    return [sample_array(rng, (4, 6))], {"sharding": Sharding(MeshSpec((("x", 1),)), ((), ("x",)))}


register(OpDef("sharding_constraint", OpKind.OTHER, 1, ("sharding", "origin"), _constraint_infer,
               lambda x, **a: x, no_flops, _constraint_jax, _constraint_sample, view=View.STRIDED,
               optional=("origin",), barrier=True))


# ---------------------------------------------------------------- collectives


def groups(mesh: MeshSpec, axes: Sequence[str]) -> list[list[int]]:
    """The devices that combine: those that differ only on `axes`, each group ordered
    row-major over `axes` (position k in a group is axis_index k)."""
    found: dict[tuple, list[tuple[int, int]]] = {}
    for d in range(mesh.size):
        c = mesh.coords(d)
        key = tuple(c[n] for n in mesh.names if n not in axes)
        found.setdefault(key, []).append((mesh.linear(c, axes), d))
    return [[d for _, d in sorted(g)] for g in found.values()]


def _axes(a: Attrs) -> tuple[str, ...]:
    axes = a["axes"]
    if not (isinstance(axes, tuple) and axes and all(isinstance(x, str) for x in axes)):
        raise OpError(f"a collective's axes are a tuple of mesh axis names, got {axes!r}")
    return axes


def _per_group(fn: Callable[[list[Any], Attrs], list[Any]]) -> Callable[..., Values]:
    """A collective's `spmd` reference from its rule for one group (its members' values in
    group order -> their results)."""

    def spmd(values: Values, mesh: MeshSpec, attrs: Attrs) -> Values:
        out: list[Any] = [None] * mesh.size
        for g in groups(mesh, _axes(attrs)):
            for d, r in zip(g, fn([values[d] for d in g], attrs)):
                out[d] = r
        return out

    return spmd


def _monoid(fn: Callable[..., Any]) -> Callable[[list[Any], Attrs], list[Any]]:
    def rule(xs: list[Any], a: Attrs) -> list[Any]:
        r = xs[0]
        for x in xs[1:]:
            r = fn(r, x)
        return [np.array(r, dtype=xs[0].dtype) for _ in xs]

    return rule


def _same_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    _axes(a)
    return ts[0]


def _collective_ref(*args: Any, **attrs: Any) -> Any:
    raise OpError("a collective runs only inside a shard_map body, on every device at once")


def _collective(name: str, attrs: tuple[str, ...], infer: Callable[..., Type],
                rule: Callable[[list[Any], Attrs], list[Any]] | Callable[..., Values],
                jax_fn: Callable[..., Any], flops: Any = no_flops, whole: bool = False,
                arity: int = 1) -> None:
    register(OpDef(name, OpKind.COLLECTIVE, arity, attrs, infer, _collective_ref, flops, jax_fn,
                   spmd=rule if whole else _per_group(rule), barrier=True))  # type: ignore[arg-type]


def _lax(name: str, **fixed: str) -> Callable[..., Any]:
    """A collective's JAX lowering: jax.lax.<name>(x, axes, ...) with our attribute names
    mapped to lax's keywords by `fixed`."""

    def call(*xs: Any, axes: tuple[str, ...], **attrs: Any) -> Any:
        import jax.lax as lax

        kw = {fixed.get(k, k): v for k, v in attrs.items() if k in fixed}
        return getattr(lax, name)(*xs, axes, **kw)

    return call


for _name, _fn in (("psum", np.add), ("pmax", np.maximum), ("pmin", np.minimum)):
    _collective(_name, ("axes",), _same_infer, _monoid(_fn), _lax(_name),
                per_element_flops(1) if _name == "psum" else no_flops)


def _gather_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    _axes(a)
    t, dim, n = ts[0], a["dimension"], a["axis_size"]
    if not 0 <= dim <= t.rank - (1 if a["tiled"] else 0):
        raise OpError(f"all_gather: dimension {dim} out of range for {t}")
    if a["tiled"]:
        return TensorType(tuple(s * n if k == dim else s for k, s in enumerate(t.shape)), t.dtype)
    return TensorType((*t.shape[:dim], n, *t.shape[dim:]), t.dtype)


def _gather_rule(xs: list[Any], a: Attrs) -> list[Any]:
    joined = (np.concatenate if a["tiled"] else np.stack)(xs, axis=a["dimension"])
    return [joined.copy() for _ in xs]


_collective("all_gather", ("axes", "dimension", "tiled", "axis_size"), _gather_infer, _gather_rule,
            _lax("all_gather", dimension="axis", tiled="tiled"))


def _scatter_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    _axes(a)
    t, dim, n = ts[0], a["dimension"], a["axis_size"]
    if not 0 <= dim < t.rank or (t.shape[dim] % n if a["tiled"] else t.shape[dim] != n):
        raise OpError(f"psum_scatter: dimension {dim} of {t} does not split into {n} blocks")
    if a["tiled"]:
        return TensorType(tuple(s // n if k == dim else s for k, s in enumerate(t.shape)), t.dtype)
    return TensorType(t.shape[:dim] + t.shape[dim + 1:], t.dtype)


def _scatter_rule(xs: list[Any], a: Attrs) -> list[Any]:
    total = _monoid(np.add)(xs, a)[0]
    dim = a["dimension"]
    if a["tiled"]:
        return [b.copy() for b in np.split(total, len(xs), axis=dim)]
    return [np.take(total, k, axis=dim) for k in range(len(xs))]


_collective("psum_scatter", ("axes", "dimension", "tiled", "axis_size"), _scatter_infer,
            _scatter_rule, _lax("psum_scatter", dimension="scatter_dimension", tiled="tiled"),
            per_element_flops(1))


def _permute_rule(xs: list[Any], a: Attrs) -> list[Any]:
    out = [np.zeros_like(x) for x in xs]
    for src, dst in a["perm"]:
        out[dst] = xs[src].copy()
    return out


def _permute_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    _axes(a)
    perm = a["perm"]
    if not all(isinstance(p, tuple) and len(p) == 2 for p in perm) or \
            len({d for _, d in perm}) != len(perm):
        raise OpError(f"ppermute: perm must be (source, destination) pairs, each destination "
                      f"once, got {perm!r}")
    return ts[0]


_collective("ppermute", ("axes", "perm"), _permute_infer, _permute_rule, _lax("ppermute", perm="perm"))


def _a2a_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    _axes(a)
    t, s, c, n = ts[0], a["split_axis"], a["concat_axis"], a["axis_size"]
    if not (0 <= s < t.rank and 0 <= c < t.rank) or t.shape[s] % n:
        raise OpError(f"all_to_all: split_axis {s} of {t} does not split into {n} blocks")
    shape = list(t.shape)
    shape[s] //= n
    shape[c] *= n
    return TensorType(tuple(shape), t.dtype)


def _a2a_rule(xs: list[Any], a: Attrs) -> list[Any]:
    n = len(xs)
    blocks = [np.split(x, n, axis=a["split_axis"]) for x in xs]
    return [np.concatenate([blocks[q][k] for q in range(n)], axis=a["concat_axis"])
            for k in range(n)]


def _a2a_jax(x: Any, axes: tuple[str, ...], split_axis: int, concat_axis: int, **a: Any) -> Any:
    import jax.lax as lax

    return lax.all_to_all(x, axes, split_axis, concat_axis, tiled=True)


_collective("all_to_all", ("axes", "split_axis", "concat_axis", "axis_size"), _a2a_infer,
            _a2a_rule, _a2a_jax)


def _index_spmd(values: Values, mesh: MeshSpec, attrs: Attrs) -> Values:
    axes = _axes(attrs)
    return [np.array(mesh.linear(mesh.coords(d), axes), dtype=np.int32) for d in range(mesh.size)]


def _index_jax(axes: tuple[str, ...]) -> Any:
    import jax.lax as lax

    return lax.axis_index(axes if len(axes) > 1 else axes[0])


_collective("axis_index", ("axes",), lambda ts, a: (_axes(a), TensorType((), "i32"))[1],
            _index_spmd, _index_jax, whole=True, arity=0)


# ---------------------------------------------------------------- shard_map


def _specs(a: Attrs, key: str, n: int) -> tuple[Spec, ...]:
    specs = a[key]
    if not (isinstance(specs, tuple) and len(specs) == n and all(isinstance(s, Spec) for s in specs)):
        raise OpError(f"shard_map: {key} must be {n} partition specs P(...), got {specs!r}")
    return specs


def _check_axes(g: Any, mesh: MeshSpec) -> None:
    """Every collective in `g` (and the bodies inside it) combines over axes of `mesh`."""
    for n in g.nodes:
        if n.op in OPS and OPS[n.op].kind == OpKind.COLLECTIVE:
            missing = [ax for ax in n.attrs.get("axes", ()) if ax not in mesh.names]
            if missing:
                raise OpError(f"shard_map: {n.describe()} combines over axis "
                              f"{', '.join(missing)}, which {mesh} lacks")
        for _, inner in bodies(n):
            _check_axes(inner, mesh)


def _shard_map_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    mesh, body = a["mesh"], a["body"]
    if not isinstance(mesh, MeshSpec):
        raise OpError(f"shard_map: mesh must be a mesh<...>, got {mesh!r}")
    for k, (t, spec, p) in enumerate(zip(ts, _specs(a, "in_specs", len(ts)), body.param_nodes,
                                         strict=True)):
        s = spec.on(mesh)
        try:
            s.check(t.shape, f"shard_map input {k}")
        except ShardingError as e:
            raise OpError(str(e)) from None
        block = TensorType(s.block_shape(t.shape), t.dtype)
        if p.type != block:
            raise OpError(f"shard_map: input {k} ({t}) split per {spec} on {mesh} is {block} "
                          f"per device, but the body's parameter is {p.type}")
    _check_axes(body, mesh)
    outs = [tensor_type(body[o].type, "shard_map body output") for o in body.outputs]
    results = []
    for t, spec in zip(outs, _specs(a, "out_specs", len(outs))):
        s = spec.on(mesh)
        if len(s.spec) > t.rank:
            raise OpError(f"shard_map: out spec {spec} has more entries than {t} has dimensions")
        results.append(TensorType(tuple(d * s.parts(k) for k, d in enumerate(t.shape)), t.dtype))
    return results[0] if len(results) == 1 else TupleType(tuple(results))


def _shard_map_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    """Every device's: the body's FLOPs times the mesh's devices."""
    return graph_flops(a["body"]) * a["mesh"].size


def _region_ref(*args: Any, **attrs: Any) -> Any:
    raise OpError("a shard_map body is run by the interpreter, device by device")


register(OpDef("shard_map", OpKind.REGION, None, ("mesh", "in_specs", "out_specs", "body"),
               _shard_map_infer, _region_ref, _shard_map_flops, emit=Emit.INTERPRETED, barrier=True))

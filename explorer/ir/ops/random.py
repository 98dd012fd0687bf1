"""Rows for JAX's random numbers, bit for bit: `threefry2x32`, `random_seed`, `random_bits`,
`random_split`, `random_fold_in`. (The bit ops that turn random bits into floats, the shifts and
`bitcast_convert_type`, are elementwise rows: ops/elementwise.py.)

How keys live in the IR: a PRNG key is its key data. A typed key array (`jax.random.key`) of
shape S is a u32[*S, 2] value, the same as a raw `jax.random.PRNGKey` of that shape; the
frontend maps key avals to that type (frontend/converter.py `aval_type`), `random_wrap` and
`random_unwrap` are the identity on it (frontend/jax_random.py), and typed key arguments are
passed as their `jax.random.key_data`. Only the threefry2x32 implementation (JAX's default)
is first-class; the rows below follow `jax_threefry_partitionable` (on by default since JAX
0.5), under which the bits of element i of a draw are threefry2x32(key, (i >> 32, i & M)).
The NumPy references produce exactly JAX's bits; the `jax` lowerings wrap the key data as a
typed key and call JAX's own primitives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes
from ..graph import Attrs, TensorType, TupleType
from ..traits import OpKind, Split
from .elementwise import elementwise_infer
from .table import OpDef, OpError, per_element_flops, register

KEY_WORDS = 2  # threefry2x32 key data: two uint32 words, the last dimension of a key value
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def threefry2x32(k1: np.ndarray, k2: np.ndarray, x1: np.ndarray, x2: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The Threefry-2x32 block cipher (20 rounds), elementwise over broadcast uint32 arrays."""
    k1, k2, x1, x2 = (np.asarray(v, np.uint32) for v in np.broadcast_arrays(k1, k2, x1, x2))
    ks = (k1, k2, k1 ^ k2 ^ _PARITY)
    a, b = x1 + ks[0], x2 + ks[1]
    for group in range(5):
        for r in _ROTATIONS[group % 2]:
            a = a + b
            b = (b << np.uint32(r)) | (b >> np.uint32(32 - r))
            b = a ^ b
        a = a + ks[(group + 1) % 3]
        b = b + ks[(group + 2) % 3] + np.uint32(group + 1)
    return a, b


def _counts(shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """A flat uint64 iota over `shape`, as its high and low uint32 words."""
    i = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.uint64).reshape(shape)
    return (i >> np.uint64(32)).astype(np.uint32), (i & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def _key_infer(op: str, ts: Sequence[TensorType]) -> tuple[int, ...]:
    k = ts[0]
    if k.dtype != "u32" or k.rank == 0 or k.shape[-1] != KEY_WORDS:
        raise OpError(f"{op}: a key is u32[..., {KEY_WORDS}] key data, got {k}")
    return k.shape[:-1]


def _per_key(keys: np.ndarray, fn: Any, *rest: np.ndarray) -> np.ndarray:
    """fn(k1, k2, *rest_at_key) for every key of a batch, stacked in the batch's shape."""
    batch = keys.shape[:-1]
    flat = keys.reshape(-1, KEY_WORDS)
    rest = [np.broadcast_to(r, batch).reshape(-1) for r in rest]
    outs = [fn(flat[j, 0], flat[j, 1], *(r[j] for r in rest)) for j in range(flat.shape[0])]
    if not outs:  # no keys: the draw's shape and type, from a draw of a zero key
        probe = fn(np.uint32(0), np.uint32(0), *(np.uint32(0) for _ in rest))
        return np.zeros((*batch, *probe.shape), probe.dtype)
    return np.stack(outs).reshape((*batch, *outs[0].shape))


def _typed(keys: Any) -> Any:
    import jax

    return jax.random.wrap_key_data(keys, impl="threefry2x32")


# ---------------------------------------------------------------- threefry2x32


def _threefry_infer(ts: Sequence[TensorType], a: Attrs) -> TupleType:
    t = elementwise_infer()(ts, a)
    if t.dtype != "u32":
        raise OpError(f"threefry2x32 works on u32, got {t.dtype}")
    return TupleType((t, t))


def _jax_threefry(k1, k2, x1, x2):
    from jax._src.random.threefry2x32 import threefry2x32_p

    return tuple(threefry2x32_p.bind(k1, k2, x1, x2))


def _threefry_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    u = lambda shape: rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32)  # noqa: E731
    return [u(()), u(()), u((3, 4)), u((3, 4))], {}


def _threefry_split(ins: Sequence[TensorType], out: Any, a: Attrs) -> dict[int, tuple]:
    rank = out.elements[0].rank  # inputs of the results' rank split with them; scalars stay
    return {d: tuple(d if t.rank == rank else None for t in ins) for d in range(rank)}


register(OpDef("threefry2x32", OpKind.OTHER, 4, (), _threefry_infer, threefry2x32,
               lambda ins, out, a: _bits_flops(ins, out.elements[0], a), _jax_threefry,
               _threefry_sample, split=Split.MAP, split_axes=_threefry_split))


# ---------------------------------------------------------------- keys


def _seed_ref(seeds: np.ndarray) -> np.ndarray:
    wide = np.asarray(seeds).astype(np.int64).astype(np.uint64)
    hi = (wide >> np.uint64(32)).astype(np.uint32)
    if np.asarray(seeds).dtype.itemsize < 8:
        hi = np.zeros_like(hi)  # a 32-bit seed's logical shift by 32 is 0
    return np.stack([hi, (wide & np.uint64(0xFFFFFFFF)).astype(np.uint32)], axis=-1)


def _seed_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    if not dtypes.is_int(t.dtype):
        raise OpError(f"random_seed: seeds must be integers, got {t}")
    return TensorType((*t.shape, KEY_WORDS), "u32")


def _jax_seed(seeds):
    import jax
    from jax._src.random import prng
    from jax._src.random.threefry2x32 import threefry_prng_impl

    return jax.random.key_data(prng.random_seed(seeds, impl=threefry_prng_impl))


register(OpDef("random_seed", OpKind.OTHER, 1, (), _seed_infer, _seed_ref, per_element_flops(1), _jax_seed,
               lambda rng: ([rng.integers(-2**31, 2**31, size=(3,)).astype(np.int32)], {})))


def cipher_words(cipher: Any = threefry2x32) -> Any:
    """`words(keys, shape)` through `cipher`, key by key: every key's two cipher words over a
    flat iota of `shape` (element i: the cipher of (i >> 32, i & 0xFFFFFFFF)), as the keys'
    batch shape and two [keys, elements] uint32 arrays. A backend may pass its own `words`
    (one compiled loop, backends/cpu/random.py) to `with_cipher`."""
    def words(keys: Any, shape: Sequence[int]) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
        keys = np.asarray(keys, np.uint32)
        flat = keys.reshape(-1, KEY_WORDS)
        n = int(np.prod(shape, dtype=np.int64))
        hi, lo = _counts((n,))
        pairs = [cipher(flat[j, 0], flat[j, 1], hi, lo) for j in range(flat.shape[0])]
        del hi, lo
        if len(pairs) == 1:  # (one key, the common case: its words as they are, no copy)
            return keys.shape[:-1], pairs[0][0][None], pairs[0][1][None]
        empty = np.empty((0, n), np.uint32)
        w1 = np.stack([p[0] for p in pairs]) if pairs else empty
        w2 = np.stack([p[1] for p in pairs]) if pairs else empty
        return keys.shape[:-1], w1, w2

    return words


def _bits_ref(keys, bit_width, shape, words=cipher_words()):
    batch, b1, b2 = words(keys, shape)
    if bit_width == 64:
        out = (b1.astype(np.uint64) << np.uint64(32)) | b2.astype(np.uint64)
    else:
        out = (b1 ^ b2).astype(dtypes.to_numpy(f"u{bit_width}"))
    return out.reshape((*batch, *shape))


def _bits_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    batch = _key_infer("random_bits", ts)
    if a["bit_width"] not in (8, 16, 32, 64):
        raise OpError(f"random_bits: bit_width {a['bit_width']} is not 8, 16, 32 or 64")
    return TensorType((*batch, *a["shape"]), f"u{a['bit_width']}")


def _jax_bits(keys, bit_width, shape):
    from jax._src.random import prng

    return prng.random_bits(_typed(keys), bit_width=bit_width, shape=tuple(shape))


def _key_sample(rng: np.random.Generator, batch: tuple[int, ...] = ()) -> np.ndarray:
    return rng.integers(0, 2**32, size=(*batch, KEY_WORDS), dtype=np.uint64).astype(np.uint32)


def _bits_flops(ins: Sequence[TensorType], out: Any, a: Attrs) -> int:
    return out.size * 2 * 20 * 3  # threefry2x32: 20 rounds of add, rotate, xor


register(OpDef("random_bits", OpKind.OTHER, 1, ("bit_width", "shape"), _bits_infer, _bits_ref,
               _bits_flops, _jax_bits,
               lambda rng: ([_key_sample(rng, (2,) if rng.integers(2) else ())],
                            {"bit_width": (8, 16, 32)[int(rng.integers(3))], "shape": (3, 5)})))


def _split_ref(keys, shape, words=cipher_words()):
    batch, b1, b2 = words(keys, shape)
    return np.stack([b1, b2], axis=-1).reshape((*batch, *shape, KEY_WORDS))


def _split_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    batch = _key_infer("random_split", ts)
    return TensorType((*batch, *a["shape"], KEY_WORDS), "u32")


def _jax_split(keys, shape):
    import jax
    from jax._src.random import prng

    return jax.random.key_data(prng.random_split(_typed(keys), shape=tuple(shape)))


register(OpDef("random_split", OpKind.OTHER, 1, ("shape",), _split_infer, _split_ref, _bits_flops,
               _jax_split, lambda rng: ([_key_sample(rng, (3,))], {"shape": (2,)})))


def _fold_ref(keys, msgs, cipher=threefry2x32):
    def one(k1, k2, m):
        b1, b2 = cipher(k1, k2, np.uint32(0), np.asarray(m).astype(np.uint32))
        return np.stack([b1, b2])

    keys = np.asarray(keys, np.uint32)
    batch = np.broadcast_shapes(keys.shape[:-1], np.shape(msgs))
    keys = np.broadcast_to(keys, (*batch, KEY_WORDS))
    return _per_key(keys, one, np.asarray(msgs))


def with_cipher(cipher: Any, words: Any = None) -> dict[str, Any]:
    """The references of the ops built on threefry2x32, computing the cipher with `cipher`
    (a backend's compiled loop) instead of NumPy's ufuncs, and every key's draw with `words`
    (`cipher_words`'s form; by default `cipher` key by key)."""
    words = words or cipher_words(cipher)
    return {"threefry2x32": cipher,
            "random_bits": lambda keys, bit_width, shape: _bits_ref(keys, bit_width, shape, words),
            "random_split": lambda keys, shape: _split_ref(keys, shape, words),
            "random_fold_in": lambda keys, msgs: _fold_ref(keys, msgs, cipher)}


def _fold_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    batch = _key_infer("random_fold_in", ts)
    msgs = ts[1]
    if msgs.dtype != "u32" or msgs.shape not in ((), batch):
        raise OpError(f"random_fold_in: messages {msgs} must be u32 of the keys' shape {batch}")
    return ts[0]


def _jax_fold(keys, msgs):
    import jax
    from jax._src.random import prng

    return jax.random.key_data(prng.random_fold_in(_typed(keys), msgs))


register(OpDef("random_fold_in", OpKind.OTHER, 2, (), _fold_infer, _fold_ref, _bits_flops, _jax_fold,
               lambda rng: ([_key_sample(rng, (3,)),
                             rng.integers(0, 2**32, size=(3,), dtype=np.uint64).astype(np.uint32)],
                            {})))

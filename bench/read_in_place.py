"""Slices and pads read in place by the kernels that consume them (passes/fuse.py,
codegen/kernel_plan.Access), on the CPU backend against `jax.jit`: lax.associative_scan's
tree of strided slices and interleaving pads (the wide zoo's SSM gradient, and a linear
recurrence by associative_scan alone), each compiled twice in one process, with the fuse
pass reading slices and pads in place ("in place") and without ("apart": every slice and
pad its own pass over memory, as before), timed against jax.jit in the same rounds
(bench/models.py's `paired`: the three alternate call by call).

    python -m bench.read_in_place            # every program
    python -m bench.read_in_place ssm        # those whose name holds one of the words
    python -m bench.read_in_place --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from bench.models import SETTLE, paired
from explorer.passes import fuse
from tests.corpora.wide import wide

Program = tuple[Any, tuple[Any, ...]]


def _recurrence(a: Any, b: Any) -> Any:
    def combine(left: tuple[Any, Any], right: tuple[Any, Any]) -> tuple[Any, Any]:
        return right[0] * left[0], right[0] * left[1] + right[1]

    return jax.lax.associative_scan(combine, (a, b), axis=1)[1]


def programs() -> dict[str, Program]:
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 1.0, (16, 4096, 64)).astype(np.float32)
    b = rng.standard_normal((16, 4096, 64)).astype(np.float32)
    out: dict[str, Program] = {"ssm associative_scan grad": wide("bench")["ssm associative_scan grad"]}
    out["linear recurrence by associative_scan"] = (_recurrence, (a, b))
    out["its gradient"] = (jax.grad(lambda a, b: jnp.sum(_recurrence(a, b) ** 2)), (a, b))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("words", nargs="*")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for name, (fn, xs) in programs().items():
        if args.words and not any(w in name for w in args.words):
            continue
        jit = jax.jit(fn)
        inplace = gx.compile(fn, backend="cpu")
        with mock.patch.object(fuse, "_read_in_place", lambda g, n: False):
            apart = gx.compile(fn, backend="cpu")
            apart(*xs)  # (compiled with the pass as it was: slices and pads apart)
        want = jax.tree_util.tree_map(np.asarray, jit(*xs))
        for got in (inplace(*xs), apart(*xs)):
            for g_, w_ in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
                np.testing.assert_allclose(g_, w_, rtol=2e-3, atol=2e-3)
        calls = {"jit": lambda f=jit, xs=xs: jax.block_until_ready(f(*xs)),
                 "in place": lambda f=inplace, xs=xs: f(*xs), "apart": lambda f=apart, xs=xs: f(*xs)}
        times = paired(calls, args.rounds, SETTLE)
        ratios = {k: [t / j for t, j in zip(times[k], times["jit"])] for k in ("in place", "apart")}
        print(f"{name}: jax.jit {statistics.median(times['jit']) * 1e3:.1f} ms; cpu / jax.jit, "
              f"median (min) of {args.rounds} rounds: in place "
              f"{statistics.median(ratios['in place']):.2f} ({min(ratios['in place']):.2f}), apart "
              f"{statistics.median(ratios['apart']):.2f} ({min(ratios['apart']):.2f})", flush=True)


if __name__ == "__main__":
    main()

"""Scans on the CPU backend against `jax.jit` (issue 42: compiled scans, associative scans):
the wide zoo's LSTM gradient, LLaMA with its layers stacked under `lax.scan` and the
associative-scan SSM, bench/models.py's RNN and its gradient, and micro cases (an LSTM cell,
a scan over stacked layers of attention, a linear recurrence by associative_scan), each at
its bench size, with how each of its scans runs (one numba function, or per iteration from
Python and why), timed against jax.jit in the same run (bench/models.py's `interleaved`
blocks, SETTLE seconds idle before each).

    python -m bench.scans                 # every program
    python -m bench.scans lstm ssm        # those whose name holds one of the words
    python -m bench.scans --rounds 3
"""

from __future__ import annotations

import argparse
import math
import statistics
from typing import Any

import jax
import numpy as np

import explorer as gx
from bench.models import SETTLE, interleaved, rnn, rnn_args, rnn_loss
from explorer.backends import registry
from tests.corpora.wide import wide

Program = tuple[Any, tuple[Any, ...]]


def _linear_recurrence(a: Any, bu: Any) -> Any:
    """h_t = a_t * h_{t-1} + bu_t over axis 0 by associative_scan (the SSM's recurrence alone)."""
    def combine(left: tuple[Any, Any], right: tuple[Any, Any]) -> tuple[Any, Any]:
        return right[0] * left[0], right[0] * left[1] + right[1]

    return jax.lax.associative_scan(combine, (a, bu))[1]


def _stacked_mlp(x: Any, layers: dict[str, Any]) -> Any:
    """Residual MLP layers stacked under lax.scan (the stacked parameters are the scanned input)."""
    def block(x: Any, lp: dict[str, Any]) -> tuple[Any, None]:
        return x + jax.nn.gelu(x @ lp["w1"]) @ lp["w2"], None

    return jax.lax.scan(block, x, layers)[0].sum()


def micro() -> dict[str, Program]:
    r = np.random.default_rng(0)
    f = lambda *s: r.standard_normal(s).astype(np.float32) * 0.1  # noqa: E731
    return {
        "micro linear recurrence 1024x4096": (_linear_recurrence,
                                              (np.float32(0.9) + f(1024, 4096) * 0.1, f(1024, 4096))),
        "micro stacked mlp 8 layers grad": (jax.grad(_stacked_mlp, 1),
                                            (f(64, 256), {"w1": f(8, 256, 512), "w2": f(8, 512, 256)})),
        "micro rnn 1024 steps": (rnn, rnn_args(steps=1024, batch=8, hidden=64, features=16)),
    }


def programs() -> dict[str, Program]:
    w = wide("bench")
    found = {k: v for k, v in w.items() if any(x in k for x in ("lstm", "llama", "ssm"))}
    r = rnn_args()
    found.update({"rnn scan 256 steps": (rnn, r), "rnn grad": (jax.grad(rnn_loss), r)})
    found.update(micro())
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("words", nargs="*")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    ratios = []
    print(f"{'program':<40}{'jax.jit ms':>11}{'cpu ms':>10}{'cpu/jit':>9}  scans")
    for name, (fn, args) in programs().items():
        if a.words and not any(x in name for x in a.words):
            continue
        jitted = jax.jit(fn)
        want = jax.block_until_ready(jitted(*args))
        c = gx.compile(fn, backend="cpu")
        got = c(*args)
        for g, w_ in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            scale = float(np.abs(np.asarray(w_)).max(initial=1.0))  # (sums of many products)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w_), rtol=2e-3, atol=2e-3 * scale)
        times = interleaved({"jit": lambda j=jitted, x=args: jax.block_until_ready(j(*x)),
                             "cpu": lambda c=c, x=args: c(*x)}, a.rounds, SETTLE)
        ratio = statistics.median(c_ / j for c_, j in zip(times["cpu"], times["jit"]))
        ratios.append(ratio)
        t = gx.explore(fn, *args)
        exe = registry.executable(t.final.graph, "cpu")
        loops = exe.program.control_flow if exe.program is not None else []
        how = "; ".join(f"%{x.node.id} {'numba' if x.ok else 'per iteration: ' + x.reason[:60]}"
                        for x in loops)
        print(f"{name:<40}{statistics.median(times['jit']) * 1e3:>11.2f}"
              f"{statistics.median(times['cpu']) * 1e3:>10.2f}{ratio:>9.2f}  {how}", flush=True)
    if ratios:
        print(f"geometric mean cpu/jax.jit {math.exp(statistics.mean(map(math.log, ratios))):.2f}, "
              f"worst {max(ratios):.2f}")


if __name__ == "__main__":
    main()

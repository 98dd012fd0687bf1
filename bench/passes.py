"""How fast is explore() next to XLA's own compile, and what do our passes save?

Prints, in one run: the time of `explore()` with the default pipeline against
`jax.jit(f).lower(...).compile()` on the 12-layer MLP + attention model and on its gradient
(goal: ours faster, under 0.25 s and under 1 s), the same for the test zoo's
gradients (a GPT block, a CNN, an RNN with lax.scan, a flax model), where the time goes pass by pass, and the
FLOPs (and planned peak of temporaries) of the traced vs the final graph for each seed.

    .venv/bin/python bench/passes.py
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import explorer as gx  # noqa: E402
from explorer import examples as ex  # noqa: E402
from explorer.frontend.jaxpr import trace  # noqa: E402
from explorer.passes import DEFAULT_PIPELINE  # noqa: E402
from explorer.passes.pipeline import resolve  # noqa: E402
from explorer.units import format_bytes  # noqa: E402

REPEATS = 5


def _median_seconds(run: Callable[[], Any], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _xla_compile(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    # A fresh wrapper each time, so that no jit cache answers for XLA.
    jax.jit(lambda *a: fn(*a)).lower(*args).compile()


def _zoo() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """The test zoo's realistic programs (tests/corpora/zoo.py): a GPT block's gradient and others."""
    from tests.corpora.zoo import zoo

    return zoo()


def compare(label: str, fn: Callable[..., Any], args: tuple[Any, ...], goal: float) -> None:
    gx.explore(fn, *args)  # warm up imports and JAX's tracing caches
    ours = _median_seconds(lambda: gx.explore(fn, *args))
    xla = _median_seconds(lambda: _xla_compile(fn, args))
    g = trace(fn, *args).graph
    verdict = "ok" if ours < xla and ours < goal else "MISSED"
    print(f"{label:<26}{len(g):>7}{ours:>12.3f}{xla:>12.3f}{xla / ours:>9.1f}x"
          f"   goal < {goal} s and faster than XLA: {verdict}")


def per_pass(label: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    g = trace(fn, *args).graph
    tracing = _median_seconds(lambda: trace(fn, *args))
    parts = [f"trace {tracing * 1e3:.0f} ms"]
    for p in resolve(DEFAULT_PIPELINE):
        start = time.perf_counter()
        g, report = p(g)
        parts.append(f"{p.name} {1e3 * (time.perf_counter() - start):.0f} ms"
                     f" ({len(report.rewrites)})")
    print(f"  {label}: " + ", ".join(parts))


SEEDS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "(A@B)@v": ex.make_matrix_chain(256, 256, 256),
    "naive euclidean": (ex.euclidean_naive, ex.make_euclidean(128, 128, 64)),
    "reduce_sum(x+y*z)": ex.make_sum_xyz(4096),
    "mean(x**2*3+y)": ex.make_mean_square(256),
    "gemm2 (seed 002)": (ex.gemm2, ex.make_gemm(128)),
}


def main() -> None:
    print(f"default pipeline: {', '.join(DEFAULT_PIPELINE)}\n")
    print(f"{'program':<26}{'nodes':>7}{'explore s':>12}{'XLA s':>12}{'ratio':>10}")
    model = ex.mlp_attention(12)
    grad = ex.mlp_attention_grad(12)
    compare("mlp_attention(12)", *model, goal=0.25)
    compare("grad mlp_attention(12)", *grad, goal=1.0)
    zoo = _zoo()
    for name in ("gpt_grad", "cnn_grad", "rnn_grad", "flax_linen_value_and_grad"):
        compare(f"zoo {name}", *zoo[name], goal=1.0)
    print("\nwhere explore() spends its time (rewrites logged):")
    per_pass("model", *model)
    per_pass("gradient", *grad)
    print(f"\n{'seed example':<22}{'traced FLOPs':>15}{'final FLOPs':>15}{'saved':>8}"
          f"{'traced peak':>14}{'final peak':>14}")
    for name, (fn, args) in SEEDS.items():
        t = gx.explore(fn, *args)
        first, last = t.stages[0].cost, t.final.cost
        saved = 1 - last.flops / first.flops if first.flops else 0.0
        print(f"{name:<22}{first.flops:>15,}{last.flops:>15,}{saved:>8.1%}"
              f"{format_bytes(first.peak_bytes):>14}{format_bytes(last.peak_bytes):>14}")


if __name__ == "__main__":
    main()

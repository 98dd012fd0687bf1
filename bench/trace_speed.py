"""How fast tracing is: the 12-layer MLP+attention model (446 jaxpr ops) and its gradient.

Prints, measured in this run: the first trace of a fresh function (JAX traces it for the first
time), and the median of repeated `make_jaxpr` and `frontend.jaxpr.trace` (make_jaxpr plus our
translation to a Graph) once JAX has cached the jaxpr.
"""

from __future__ import annotations

import statistics
import time

import jax

from explorer.examples import mlp_attention, mlp_attention_grad
from explorer.frontend.jaxpr import trace


def median_seconds(fn, *args, repeats: int = 7) -> float:
    fn(*args)  # warm-up: JAX caches primitives' abstract evaluation rules
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    print(f"{'model':<22}{'jaxpr ops':>10}{'nodes':>8}{'cold trace':>12}{'make_jaxpr':>12}"
          f"{'trace':>10}")
    for name, make in (("mlp_attention", mlp_attention), ("mlp_attention_grad", mlp_attention_grad)):
        fn, args = make()
        t0 = time.perf_counter()
        trace(fn, *args)  # a fresh function: nothing of it is cached yet
        cold = time.perf_counter() - t0
        jaxpr_ops = len(jax.make_jaxpr(fn)(*args).jaxpr.eqns)
        nodes = len(trace(fn, *args).graph)
        t_jaxpr = median_seconds(lambda f, a: jax.make_jaxpr(f)(*a), fn, args)
        t_trace = median_seconds(lambda f, a: trace(f, *a), fn, args)
        print(f"{name:<22}{jaxpr_ops:>10}{nodes:>8}{cold:>11.3f}s{t_jaxpr:>11.3f}s{t_trace:>9.3f}s")
    print("goal: tracing the 446-op model well under 0.1 s")


if __name__ == "__main__":
    main()

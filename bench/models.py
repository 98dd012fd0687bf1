"""The model zoo at realistic sizes (issue 27): `gx.compile` on the cpu and jax backends
against `jax.jit` of the same function on the same arguments, every ratio within one run.

    python -m bench.models            # the realistic zoo and the dispatch table
    python -m bench.models --quick    # fewer repeats, for a smoke run
    python -m bench.models --write    # also replace the "models" section of bench/RESULTS.md
    python -m bench.models --programs wide   # the models table's wide zoo rows only
    python -m bench.models --roofline # how near each model runs to the machine's limits

The models table holds nine programs of the zoo's kinds at realistic sizes, and the wide zoo
(tests/corpora/wide.py, issue 42: a ViT, a LLaMA under `lax.scan`, an LSTM, a graph network
by `segment_sum`, a top-2 mixture of experts, DP-SGD per-example gradients, an
`associative_scan` state-space layer, a U-Net, a ResNet with batch norm, their gradients, and
the ViT's and LLaMA's logits) at its "bench" sizes. `--roofline` prints, per model, how near
the cpu backend's final stage runs to this machine's measured peaks (bench/near_limit.py
says how: the share of the BLAS peak its dots of 64^3 multiply-adds or more reach, the share
of STREAM bandwidth its memory-bound kernels of 1 MiB or more reach, both weighted by time,
and its time over the physical floor, its FLOPs at the peak plus its bytes at the
bandwidth), each program in a fresh process as well.

`jax.jit` is `equinox.filter_jit` for the equinox programs (their modules hold functions).
Each program runs in a fresh Python process (`compare` says why). The CPU backend and
jax.jit alternate, 5 rounds (2 with --quick) of a block of timed calls each (0.1 s worth, at
least 5) after an untimed one, the order rotating; each block starts after SETTLE seconds
idle, so that no column pays for another runtime's threads still spinning from its calls
(OpenBLAS's, which NumPy's matmul wakes, spin for up to about 0.1 s: on the 2-core VM,
jax.jit of the CNN forward took 4.1-6.4 ms per block after an idle pause, 4.8-9.1 ms right
after the CPU backend's block). The jax backend's columns, XLA executables like jax.jit's,
alternate with jax.jit call by call instead, in 5 rounds of 0.1 s worth of jax.jit's calls,
at least 25 (`paired`): a shared VM's load drifts between blocks (one program's block
medians spread 114-212 µs), and only calls made within the same fraction of a second
resolve 5%. A ratio is the median over rounds of the column's median over jax.jit's median
in the same round. "jax.jit after cpu" is jax.jit's time in a block right after a CPU
backend block, no pause, over its time after a pause: what a comparison in one notebook
kernel would see. Each call is made as a user makes it: host (NumPy) arguments in, results
back as arrays (results that are jax arrays, `jax.jit`'s and the jax backend's, are waited
for with block_until_ready).
"traced" is `gx.compile(..., pipeline=[])`: the traced graph as it is, no pass run. The
dispatch table runs the test zoo's programs (tests/corpora/zoo.py) at their own small sizes, where a
call's overhead is what is measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from bench.near_limit import DOT_GOAL, MEMORY_GOAL, NearLimit, Share
from explorer.backends import registry
from explorer.measure.peaks import peaks
from tests.corpora.wide import wide
from tests.corpora.zoo import _attention, _layer_norm, cnn, cnn_loss

RESULTS = Path(__file__).with_name("RESULTS.md")
Program = tuple[Callable[..., Any], tuple[Any, ...]]
_rng = np.random.default_rng(0)


def _normal(*shape: int, scale: float = 0.1) -> np.ndarray:
    return (_rng.standard_normal(shape) * scale).astype(np.float32)


# ---------------------------------------------------------------- a 2-layer GPT block
# (the test zoo's layer norm and attention, at realistic sizes and two layers)

def gpt_loss(params: dict[str, Any], tokens: Any, targets: Any) -> Any:
    x = params["embed"][tokens] + params["pos"]
    for layer in params["layers"]:
        x = x + _attention(layer, _layer_norm(x, layer["ln1_g"], layer["ln1_b"]), 8)
        h = jax.nn.gelu(_layer_norm(x, layer["ln2_g"], layer["ln2_b"]) @ layer["w1"])
        x = x + h @ layer["w2"]
    logp = jax.nn.log_softmax(x @ params["embed"].T, -1)
    return -jnp.take_along_axis(logp, targets[:, None], -1).mean()


def gpt(t: int = 256, d: int = 256, vocab: int = 512, layers: int = 2) -> tuple[Any, ...]:
    def layer() -> dict[str, np.ndarray]:
        return {"ln1_g": np.ones(d, np.float32), "ln1_b": np.zeros(d, np.float32),
                "ln2_g": np.ones(d, np.float32), "ln2_b": np.zeros(d, np.float32),
                "qkv": _normal(d, 3 * d), "proj": _normal(d, d),
                "w1": _normal(d, 4 * d), "w2": _normal(4 * d, d)}
    params = {"embed": _normal(vocab, d), "pos": _normal(t, d),
              "layers": [layer() for _ in range(layers)]}
    tokens = _rng.integers(0, vocab, t).astype(np.int32)
    return params, tokens, np.roll(tokens, -1)


# ---------------------------------------------------------------- the zoo's CNN on 32x32 images

def cnn_args(batch: int = 64) -> tuple[Any, ...]:
    p = {"c1": _normal(3, 3, 3, 16, scale=0.3), "b1": _normal(16),
         "c2": _normal(3, 3, 16, 32, scale=0.1), "dense": _normal(32, 5)}
    return p, _normal(batch, 32, 32, 3, scale=1.0), _rng.integers(0, 5, batch).astype(np.int32)


# ---------------------------------------------------------------- an RNN under lax.scan

def rnn(p: dict[str, Any], xs: Any) -> Any:
    def step(h: Any, x: Any) -> tuple[Any, Any]:
        h = jnp.tanh(h @ p["wh"] + x @ p["wx"] + p["b"])
        return h, h.sum(-1)

    h, per_step = jax.lax.scan(step, jnp.zeros((xs.shape[1], p["wh"].shape[0]), xs.dtype), xs)
    return h, per_step


def rnn_loss(p: dict[str, Any], xs: Any) -> Any:
    h, per_step = rnn(p, xs)
    return (h ** 2).sum() + per_step.mean()


def rnn_args(steps: int = 256, batch: int = 32, hidden: int = 128, features: int = 64
             ) -> tuple[Any, ...]:
    p = {"wh": _normal(hidden, hidden), "wx": _normal(features, hidden), "b": _normal(hidden)}
    return p, _normal(steps, batch, features, scale=1.0)


# ---------------------------------------------------------------- an MLP, equinox, a GP

def mlp_loss(p: list[tuple[Any, Any]], x: Any, y: Any) -> Any:
    for w, b in p[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = p[-1]
    return -(jax.nn.log_softmax(x @ w + b) * y).sum(-1).mean()


def mlp_args(batch: int = 256, sizes: tuple[int, ...] = (784, 512, 512, 10)) -> tuple[Any, ...]:
    p = [(_normal(a, b, scale=1 / math.sqrt(a)), np.zeros(b, np.float32))
         for a, b in zip(sizes[:-1], sizes[1:])]
    y = np.eye(sizes[-1], dtype=np.float32)[_rng.integers(0, sizes[-1], batch)]
    return p, _normal(batch, sizes[0], scale=1.0), y


def equinox_program(batch: int = 256) -> Program:
    import equinox as eqx

    model = eqx.nn.MLP(64, 10, 256, 3, activation=jax.nn.gelu, key=jax.random.PRNGKey(1))

    @eqx.filter_grad
    def grad_loss(model: Any, x: Any) -> Any:
        return jnp.mean(jax.vmap(model)(x) ** 2)

    return (lambda m, x: grad_loss(m, x)), (model, _normal(batch, 64, scale=1.0))


def gp_log_likelihood(x: Any, y: Any, log_ls: Any, log_noise: Any) -> Any:
    d2 = jnp.sum((x[:, None, :] - x[None, :, :]) ** 2, -1)
    k = jnp.exp(-0.5 * d2 / jnp.exp(2 * log_ls)) + jnp.exp(log_noise) * jnp.eye(x.shape[0])
    chol = jnp.linalg.cholesky(k)
    alpha = jax.scipy.linalg.solve_triangular(chol, y, lower=True)
    return -0.5 * alpha @ alpha - jnp.log(jnp.diagonal(chol)).sum()


def gp_args(n: int = 512) -> tuple[Any, ...]:
    x = _normal(n, 3, scale=1.0)
    return x, np.sin(x.sum(-1)).astype(np.float32), np.float32(0.0), np.float32(-2.0)


def models(programs: str = "all") -> dict[str, Program]:
    """The models table's programs: the zoo's kinds at realistic sizes ("zoo"), the wide zoo
    at its bench sizes ("wide"), or both ("all")."""
    return {**(zoo_models() if programs in ("all", "zoo") else {}),
            **(wide("bench") if programs in ("all", "wide") else {})}


def zoo_models() -> dict[str, Program]:
    g, c, r, m = gpt(), cnn_args(), rnn_args(), mlp_args()
    return {
        "gpt 2x(T=256,D=256,8 heads) loss": (gpt_loss, g),
        "gpt grad": (jax.grad(gpt_loss), g),
        "cnn 64x32x32x3": (cnn, c[:2]),
        "cnn grad": (jax.grad(cnn_loss), c),
        "rnn scan 256 steps": (rnn, r),
        "rnn grad": (jax.grad(rnn_loss), r),
        "mlp grad batch 256": (jax.grad(mlp_loss), m),
        "equinox mlp grad": equinox_program(),
        "gp likelihood grad n=512": (jax.grad(gp_log_likelihood, argnums=(2, 3)), gp_args()),
    }


# ---------------------------------------------------------------- timing

def interleaved(calls: dict[str, Callable[[], Any]], rounds: int,
                settle: float = 0.0) -> dict[str, list[float]]:
    """Each call's median seconds per round, in `rounds` rounds; in each round every
    callable runs a block of BLOCK seconds of timed calls after an untimed one (and, with
    `settle`, after that many seconds idle), the order rotating from round to round, so
    that two calls' ratio in a round compares them in the same minutes of the machine's
    load."""
    for fn in calls.values():
        registry.warm_up(fn, 2)
    names = list(calls)
    times: dict[str, list[float]] = {k: [] for k in names}
    block = {k: _block(calls[k]) for k in names}
    for r in range(rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            time.sleep(settle)  # other runtimes' threads stop spinning
            calls[k]()  # untimed: a vCPU woken, the other's caches
            one = []
            for _ in range(block[k]):
                t0 = time.perf_counter()
                calls[k]()
                one.append(time.perf_counter() - t0)
            times[k].append(statistics.median(one))
    return times


def paired(calls: dict[str, Callable[[], Any]], rounds: int,
           settle: float = 0.0) -> dict[str, list[float]]:
    """As `interleaved`, but within a round the callables alternate call by call (the
    order rotating from one step to the next) for BLOCK seconds' worth of the first one's
    calls, at least PAIRED_MIN steps: every call's median in a round is taken over the
    same fraction of a second as the others'. For callables on one runtime (jax.jit
    against the jax backend, both XLA executables on XLA's threads), where no call slows
    the next one's runtime, this cancels the load that drifts between blocks on a shared
    VM (one program's block medians spread 114-212 µs there, so block ratios could not
    resolve 5%)."""
    for fn in calls.values():
        registry.warm_up(fn, 2)
    names = list(calls)
    steps = max(PAIRED_MIN, _block(calls[names[0]]))
    times: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(rounds):
        time.sleep(settle)
        for k in names:
            calls[k]()  # untimed
        one: dict[str, list[float]] = {k: [] for k in names}
        for step in range(steps):
            for k in names[step % len(names):] + names[:step % len(names)]:
                t0 = time.perf_counter()
                calls[k]()
                one[k].append(time.perf_counter() - t0)
        for k in names:
            times[k].append(statistics.median(one[k]))
    return times


BLOCK = 0.1  # seconds of timed calls in a block (at least 5 calls)
SETTLE = 0.25  # seconds idle before each block (OpenBLAS's threads spin up to ~0.1 s)
# the fewest steps of a `paired` round: the GP gradient's 18 ms calls gave a traced/jit of
# 1.10 over 5-call rounds, 0.94-1.04 per round (median 1.00) over 28-call ones
PAIRED_MIN = 25


def _block(call: Callable[[], Any]) -> int:
    """How many calls make a block: BLOCK seconds' worth, at least 5."""
    t0 = time.perf_counter()
    call()
    return max(5, min(5000, int(BLOCK / max(time.perf_counter() - t0, 1e-7))))


def _close(got: Any, want: Any) -> bool:
    g, w = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    if len(g) != len(w):
        return False
    for a, b in zip(g, w):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
        if a.shape != b.shape or not np.allclose(a, b, rtol=2e-3, atol=2e-3 * scale):
            return False
    return True


def jit_of(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Callable[..., Any], Any]:
    """jax.jit of `fn` (equinox.filter_jit where the arguments hold non-array leaves, an
    equinox module's activation) and its result on `args`."""
    jitted = jax.jit(fn)
    try:
        return jitted, jax.block_until_ready(jitted(*args))
    except TypeError:
        import equinox as eqx

        jitted = eqx.filter_jit(fn)
        return jitted, jax.block_until_ready(jitted(*args))


def compare(fn: Callable[..., Any], args: tuple[Any, ...], repeats: int,
            columns: list[tuple[str, str, list[str] | None]]) -> dict[str, float | str]:
    """jax.jit's seconds, each column's gx.compile as a ratio to them (or why it has none),
    and "jax.jit after cpu": jax.jit's time right after the CPU backend's calls over its
    time after a pause. Meant for a fresh process (`main` runs each program in one). The
    CPU backend's column alternates with jax.jit in blocks, each after SETTLE seconds idle:
    right after the CPU backend's calls jax.jit runs slower (GPT loss 7.8 -> 11.7 ms by
    hand once on this 2-core VM, not with OPENBLAS_NUM_THREADS=1: OpenBLAS's threads, which
    NumPy's matmul wakes, spin), and the pause keeps that out of the ratios in either
    direction. The jax backend's columns run XLA executables as jax.jit does, so they
    alternate with it call by call (`paired`), which block ratios could not resolve to 5%
    on a shared VM. A program with non-array leaves (an equinox module's activation) is
    jitted as equinox users do, with equinox.filter_jit."""
    jitted, want = jit_of(fn, args)
    jit_call = lambda: jax.block_until_ready(jitted(*args))  # noqa: E731
    blocks, pairs = {"jax.jit": jit_call}, {"jax.jit": jit_call}
    out: dict[str, float | str] = {}
    for label, backend, pipeline in columns:
        compiled = gx.compile(fn, backend=backend, pipeline=pipeline)
        if (why := _check(compiled, args, want)) is not None:
            out[label] = why
            continue
        # the jax backend gives jax arrays, dispatched asynchronously as jax.jit's are
        (pairs if backend in SAME_RUNTIME else blocks)[label] = (
            lambda c=compiled: jax.block_until_ready(c(*args)))
    calls = {**blocks, **pairs}
    phases = [interleaved(blocks, repeats, SETTLE)]  # jax.jit's time is this phase's
    if len(pairs) > 1:
        phases.append(paired(pairs, repeats, SETTLE))
    out["jax.jit"] = statistics.median(phases[0]["jax.jit"])
    for times in phases:
        for label in list(times)[1:]:
            out[label] = statistics.median(t / j for t, j in zip(times[label], times["jax.jit"]))
    if "cpu" in calls:  # jax.jit right after the CPU backend, no pause between
        after = []
        for _ in range(repeats):
            both = interleaved({"cpu": calls["cpu"], "jax.jit": calls["jax.jit"]}, 1, 0.0)
            after.append(both["jax.jit"][0])
        out["jax.jit after cpu"] = statistics.median(after) / out["jax.jit"]
    return out


def _check(compiled: Any, args: tuple[Any, ...], want: Any) -> str | None:
    """Why a compiled callable has no time: it failed, or its result is not jax.jit's."""
    try:
        got = compiled(*args)
    except Exception as e:  # noqa: BLE001  (a failure is a figure too)
        return f"error: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
    return None if _close(got, want) else "MISMATCH"


COLUMNS = [("cpu", "cpu", None), ("jax", "jax", None), ("jax traced", "jax", [])]
SAME_RUNTIME = {"jax"}  # backends timed call by call against jax.jit (`paired`), not in blocks


def _ratio(row: dict[str, float | str], label: str) -> float | None:
    v = row.get(label)
    return v if isinstance(v, float) else None


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def table(table_name: str, programs: dict[str, Program], repeats: int, title: str) -> list[str]:
    """The table of `programs` (`table_name`'s), each measured in a fresh process."""
    lines = [f"| {title} | jax.jit | " + " | ".join(f"{c} / jax.jit" for c, _, _ in COLUMNS)
             + " | jax.jit after cpu |", "|---|---|" + "---|" * (len(COLUMNS) + 1)]
    ratios: dict[str, list[float]] = {c: [] for c, _, _ in COLUMNS}
    for name in programs:
        row = _in_fresh_process(table_name, name, repeats)
        cells = []
        for c, _, _ in COLUMNS:
            r = _ratio(row, c)
            if r is None:
                cells.append(str(row[c]))
            else:
                ratios[c].append(r)
                cells.append(f"{r:.2f}")
        after = row.get("jax.jit after cpu")
        cells.append(f"{after:.2f}" if isinstance(after, float) else "")
        line = f"| {name} | {_fmt(row['jax.jit'])} | " + " | ".join(cells) + " |"
        print(line, flush=True)
        lines.append(line)
    geo = {c: _geomean(v) for c, v in ratios.items()}
    worst = {c: max(v) if v else float("nan") for c, v in ratios.items()}
    lines.append("| **geometric mean** | | " + " | ".join(f"**{geo[c]:.2f}**" for c, _, _ in COLUMNS)
                 + " | |")
    lines.append("| worst | | " + " | ".join(f"{worst[c]:.2f}" for c, _, _ in COLUMNS) + " | |")
    print("\n".join(lines[-2:]), flush=True)
    return lines


def roofline_table(table_name: str, programs: dict[str, Program], repeats: int) -> list[str]:
    """How near each program's final stage runs to the machine's limits on the cpu backend
    (bench/near_limit.py), each measured in a fresh process."""
    lines = ["| model | cpu | dots >= 64^3: of BLAS peak (their share of the run) | "
             "memory-bound >= 1 MiB: of STREAM (their share) | in loops timed whole | "
             "GFLOP | MB moved | floor | cpu / floor |", "|---|" + "---|" * 8]
    # the cached peaks, raised by a measurement now if it finds them higher (one measured
    # on a loaded machine is low, and every share over it high); each program's process
    # reads them from the cache
    peaks_line = str(peaks("cpu", remeasure=True, at_least=peaks("cpu")))
    for name in programs:
        row = _in_fresh_process(table_name, name, repeats, "--one-roofline")
        if "near" not in row:
            line = f"| {name} | {row['jax.jit']} |" + " |" * 7
        else:
            n = NearLimit.from_data(row["near"])
            peaks_line = str(row["peaks"])  # (raised again where a point landed above them)
            line = (f"| {name} | {_fmt(n.seconds)} | {_share(n.dots, n.total, DOT_GOAL)} | "
                    f"{_share(n.memory, n.total, MEMORY_GOAL)} | {n.loops:.0%} | "
                    f"{n.flops / 1e9:.2f} | {n.bytes / 1e6:.1f} | {_fmt(n.floor)} | "
                    f"{n.over_floor:.1f} |")
        print(line, flush=True)
        lines.append(line)
    lines.append("")
    lines.append(f"Peaks: {peaks_line}. Goals (issue 42): dots at >= {DOT_GOAL:.0%} of the "
                 f"BLAS peak, memory-bound kernels at >= {MEMORY_GOAL:.0%} of STREAM, both "
                 f"time-weighted; a share marked * misses its goal.")
    print(lines[-1], flush=True)
    return lines


def _share(s: Share, total: float, goal: float) -> str:
    """The share, * where it misses `goal`, (its rows' share of the profiled run, rows)."""
    if s.share is None:
        return "none"
    miss = "*" if s.share < goal else ""
    part = s.seconds / total if total > 0 else 0.0
    return f"{s.share:.0%}{miss} ({part:.0%}, {s.rows})"


def _fmt(seconds: Any) -> str:
    if not isinstance(seconds, float):
        return str(seconds)
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def dispatch_programs() -> dict[str, Program]:
    from tests.corpora.zoo import zoo

    return zoo()


TABLES: dict[str, Callable[[], dict[str, Program]]] = {}


def _in_fresh_process(table_name: str, name: str, repeats: int,
                      how: str = "--one") -> dict[str, Any]:
    """`compare` on one program (or with how="--one-roofline", its near_limit figures), in a
    new Python process (nothing another program or backend ran is left in it)."""
    done = subprocess.run([sys.executable, "-m", "bench.models", how, table_name, name,
                           str(repeats)], capture_output=True, text=True,
                          cwd=Path(__file__).parent.parent)
    if done.returncode:
        return {"jax.jit": f"error: {done.stderr.strip().splitlines()[-1][:80]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 rounds instead of 5")
    ap.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    ap.add_argument("--only", choices=["models", "dispatch"], default=None)
    ap.add_argument("--programs", choices=["all", "zoo", "wide"], default="all",
                    help="the models table's rows: the zoo's kinds, the wide zoo, or both")
    ap.add_argument("--roofline", action="store_true",
                    help="the models' nearness to the machine's limits instead of the ratios")
    ap.add_argument("--one", nargs=3, metavar=("TABLE", "PROGRAM", "ROUNDS"),
                    help="(internal) one program's row as JSON, in this process")
    ap.add_argument("--one-roofline", nargs=3, metavar=("TABLE", "PROGRAM", "ROUNDS"),
                    help="(internal) one program's near_limit figures as JSON")
    ns = ap.parse_args()
    if ns.write and (ns.programs != "all" or ns.roofline):
        ap.error("--write replaces RESULTS.md's models section with the whole tables: "
                 "not with --programs or --roofline")
    TABLES.update(models=models, dispatch=dispatch_programs)
    if ns.one:
        fn, args = TABLES[ns.one[0]]()[ns.one[1]]
        print(json.dumps(compare(fn, args, int(ns.one[2]), COLUMNS)), flush=True)
        return
    if ns.one_roofline:
        from bench.near_limit import measure

        fn, args = TABLES[ns.one_roofline[0]]()[ns.one_roofline[1]]
        near, peaks = measure(fn, args, max(3, int(ns.one_roofline[2])))
        print(json.dumps({"near": near.to_data(), "peaks": str(peaks)}), flush=True)
        return
    repeats = 2 if ns.quick else 5
    head = (f"{datetime.date.today()}, {platform.processor() or platform.machine()}, "
            f"{_cpu_name()}, jax {jax.__version__}")
    print(head, flush=True)
    lines = [f"Measured {head}; each program in a fresh process, {repeats} rounds of "
             f"{BLOCK} s blocks of calls, each after {SETTLE} s idle (the jax backend's "
             f"columns alternating with jax.jit call by call); medians of per-round "
             f"ratios (the module's docstring says how).", ""]
    if ns.roofline:
        roofline_table("models", models(ns.programs), repeats)
        return
    if ns.only in (None, "models"):
        lines += table("models", models(ns.programs), repeats, "model (realistic size)") + [""]
    if ns.only in (None, "dispatch"):
        lines += table("dispatch", dispatch_programs(), repeats, "zoo program (dispatch size)")
    if ns.write:
        _write(lines)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def _write(lines: list[str]) -> None:
    text = RESULTS.read_text()
    section = "## models (issue 27)\n\n" + "\n".join(lines) + "\n"
    pattern = re.compile(r"## models \(issue 27\)\n.*?(?=\n## |\Z)", re.S)
    text = pattern.sub(section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()

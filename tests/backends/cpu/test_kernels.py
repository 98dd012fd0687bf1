"""The CPU backend's fused kernels at run time (backends/cpu/kernels.py): a kernel writes its
result over an input that dies there (as NumPy elides temporaries: the euclidean form's
epilogue over the dot's matrix), never over a value something else still holds; the limit on
kernel loads; contiguous copies of strided inputs; plain launches after the first call."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import registry
from explorer.backends.cpu import CpuProgram
from explorer.backends.cpu import kernels as cpu

R = np.random.default_rng(3)


def _f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)

X = R.standard_normal((300, 16)).astype(np.float32)
Y = R.standard_normal((200, 16)).astype(np.float32)


@pytest.fixture
def donations(monkeypatch) -> list[tuple[str, bool]]:
    seen: list[tuple[str, bool]] = []
    donor = cpu.CompiledKernel._donor

    def spy(self: Any, vals: Any) -> Any:
        out = donor(self, vals)
        seen.append((self.name, out is not None))
        return out

    monkeypatch.setattr(cpu.CompiledKernel, "_donor", spy)
    return seen


def test_the_euclidean_epilogue_writes_over_the_dot(donations) -> None:
    # 40 features: computed in float32 (with fewer, the dot's result is float64 and the
    # epilogue's float32, which cannot share its buffer)
    x, y = np.tile(X, (1, 3))[:, :40], np.tile(Y, (1, 3))[:, :40]
    tr = gx.explore(lambda x, y: jnp.sum((x[:, None] - y[None]) ** 2, -1), x, y)
    got = tr.run(backend="cpu").value
    assert donations and all(used for _, used in donations)
    np.testing.assert_allclose(got, tr.run().value, rtol=1e-5, atol=1e-4)


def test_values_still_held_are_never_overwritten(donations) -> None:
    def fn(x, y):
        d = x @ y.T
        return jnp.exp(d * 0.1) + 1.0, d, jnp.tanh(d).sum()  # d: an output, and read again

    tr = gx.explore(fn, X, Y)
    a, d, t = tr.run(backend="cpu").value
    want = X @ Y.T
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(a, np.exp(want * 0.1) + 1.0, rtol=1e-4)
    np.testing.assert_allclose(t, np.tanh(want).sum(), rtol=1e-4)
    assert donations and not any(used for _, used in donations)


def test_small_results_are_written_fresh_without_looking_for_a_donor(donations) -> None:
    """Below DONOR_MIN bytes a kernel does not look for a dying input to write over: a
    fresh result costs less than the looking (the per-launch overhead at the sizes users
    paste). The same program at 300 rows writes over its dot's result."""
    fn = lambda x: jnp.exp(x @ x.T * 0.1) + 1.0  # noqa: E731
    for x, donated in ((X[:20], False), (X, True)):
        donations.clear()
        tr = gx.explore(fn, x)
        np.testing.assert_allclose(tr.run(backend="cpu").value, np.exp(x @ x.T * 0.1) + 1.0,
                                   rtol=1e-4)
        assert bool(donations) == donated and all(used for _, used in donations)


def test_arguments_are_never_overwritten(donations) -> None:
    x = np.tile(X, (1, 4))  # (300, 64): over DONOR_MIN, so the kernel looks
    tr = gx.explore(lambda x: jnp.exp(x) * 2.0, x)
    tr.run(backend="cpu")
    np.testing.assert_array_equal(x, np.tile(X, (1, 4)))
    assert donations and not any(used for _, used in donations)


def test_past_the_kernel_limit_new_structures_run_interpreted(monkeypatch) -> None:
    """numba never frees compiled code: a process loads at most MAX_KERNEL_LOADS kernels;
    then a new structure runs on the reference interpreter, correctly, saying why."""
    monkeypatch.setattr(cpu, "_LOADS", [cpu.MAX_KERNEL_LOADS])
    x = R.standard_normal((40, 7)).astype(np.float32)
    tr = gx.explore(lambda x: jnp.sinh(x * 3.25).sum(1) - jnp.cosh(x).max(), x)
    r = tr.run(backend="cpu")
    np.testing.assert_allclose(r.value, tr.run().value, rtol=1e-5, atol=1e-5)
    fresh = [k for k in r.kernels if "GAMBIT_MAX_KERNELS" in k.source]
    assert fresh, [k.source[:120] for k in r.kernels]


def test_a_kernel_writing_over_its_input_runs_its_in_place_variant() -> None:
    """Writing into a dying input, the kernel runs a variant whose loop stores through that
    input itself (one array, so LLVM's alias check passes and the loop vectorizes): an
    output fusion's epilogue over its dot's result."""
    from explorer.backends.cpu.kernels import BlasOutputFusion

    x = np.random.default_rng(5).standard_normal((128, 128)).astype(np.float32)  # DONOR_MIN
    b = np.random.default_rng(6).standard_normal((128,)).astype(np.float32)
    t = gx.explore(lambda x, w, b: jax.nn.relu(x @ w + b), x, x, b)
    exe = registry.executable(t.final.graph, "cpu")
    got = exe.call(exe.prepare([x, x, b]))[0]
    np.testing.assert_allclose(got, np.maximum(x @ x + b, 0), rtol=1e-5, atol=1e-5)
    (fused,) = exe.all_kernels()
    assert isinstance(fused, BlasOutputFusion) and not fused.in_place
    k = fused.epilogue
    assert list(k._over) == [next(iter(k.in_place))]  # the variant ran
    (variant,) = k._over.values()
    assert variant is not k.fn


def test_a_0d_kernel_with_no_scalar_arguments_writes_over_its_input(monkeypatch) -> None:
    """The in-place variant drops `out` from the signature wherever it stands (found by the
    differential fuzz: a 0-d kernel's `def kernel(in0, out)` became `def kernel(in0, in0)`).
    (A result under DONOR_MIN bytes is written fresh, so the threshold is lowered here.)"""
    monkeypatch.setattr(cpu, "DONOR_MIN", 0)
    a, b = (np.random.default_rng(s).standard_normal(8).astype(np.float32) for s in (7, 8))
    t = gx.explore(lambda a, b: jnp.sin(jnp.cos(jnp.dot(a, b))), a, b)
    exe = registry.executable(t.final.graph, "cpu")
    (fused,) = exe.all_kernels()
    k = fused.epilogue  # (an output fusion: the dot, then this kernel over its result)
    assert "def kernel(in0, out):" in k.source
    got = exe.call(exe.prepare([a, b]))[0]
    np.testing.assert_allclose(got, np.sin(np.cos(np.dot(a, b))), rtol=1e-6)
    assert k._over  # it wrote over the dot's 0-d result


def test_past_the_kernel_limit_the_in_place_variant_gives_way_to_a_fresh_result(monkeypatch) -> None:
    """The in-place variant is a second module to load: past MAX_KERNEL_LOADS (a long fuzz
    run: about 3,000 programs) the kernel writes a fresh result instead of crashing."""
    x = np.random.default_rng(9).standard_normal((128, 128)).astype(np.float32)
    b = np.random.default_rng(10).standard_normal((128,)).astype(np.float32)
    t = gx.explore(lambda x, w, b: jnp.tanh(x @ w + b) * 3.0, x, x, b)
    exe = registry.executable(t.final.graph, "cpu")
    (fused,) = exe.all_kernels()
    k = fused.epilogue
    assert k.fn is not None and not k._over
    monkeypatch.setattr(cpu, "_LOADS", [cpu.MAX_KERNEL_LOADS])
    got = exe.call(exe.prepare([x, x, b]))[0]
    np.testing.assert_allclose(got, np.tanh(x @ x + b) * 3.0, rtol=1e-5, atol=1e-5)
    assert not k._over  # (it could not load the variant, and did without it)


def test_a_kernel_reads_a_transposed_input_through_a_contiguous_copy_the_plan_counts() -> None:
    x = _f32(128, 96)
    t = gx.explore(lambda x: jnp.tanh(x.T * 2.0) + 1.0, x, pipeline=["fuse"])
    r = t.run(backend="cpu")
    np.testing.assert_allclose(r.value, np.tanh(x.T * 2) + 1, rtol=1e-5, atol=1e-6)
    assert r.peak_bytes <= t.final.memory.peak_bytes + 32 * 1024
    assert t.final.memory.peak_bytes >= x.nbytes  # the copy is planned


def test_plain_kernels_launch_straight_after_their_first_call() -> None:
    """A kernel whose launch does nothing to its inputs (no accumulator, no 0-d or large
    input, no donor to look for) binds a plain launch after its first call; a reduction's
    does not; both give the reference's values on every later call, and a plain launch that
    numba cannot type falls back to the interpreter and says why."""
    x = _f32(6, 5)
    t = gx.explore(lambda x: (jnp.tanh(x * 2.0) + 1.0, jnp.exp(x).sum(1)), x)
    exe = CpuProgram(t.final.graph)
    want = t.run(backend="reference").value
    for _ in range(3):
        got = exe.call(exe.prepare([x]))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    ks = [k for k in exe.program.kernels if isinstance(k, cpu.CompiledKernel)]
    plain = [k for k in ks if k._plain is not None]
    assert len(plain) == 1 and len(ks) == 2 and all(k._looked for k in ks), ks
    k = plain[0]

    class TypingError(Exception):  # (as numba's errors are: from a numba module)
        __module__ = "numba.core.errors"

    def refuse(*args: Any) -> None:
        raise TypingError("cannot type this")

    k.fn = refuse
    np.testing.assert_allclose(k([x]), want[0], rtol=1e-5, atol=1e-6)
    assert k._plain is None and k.fn is None and k.reason.startswith("numba:")

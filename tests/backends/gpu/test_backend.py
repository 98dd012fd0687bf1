"""The GPU backend. The generated CUDA is checked as text everywhere; running it needs CuPy
and a GPU, and those tests skip with the reason when either is missing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference, registry
from explorer.backends.codegen.kernel_plan import PlanError, plan_kernel
from explorer.backends.gpu import backend as gpu  # importing must work without CuPy
from explorer.backends.gpu.codegen import generate
from tests.backends.conftest import PROGRAMS, explore, kernels_of, run_matching_the_reference
from tests.passes.semantic import assert_outputs_close

REASON = registry.unavailable_reason("gpu")
needs_gpu = pytest.mark.skipif(REASON is not None, reason=f"GPU backend unavailable: {REASON}")


def _code(name: str):  # noqa: ANN202
    """The CuPy kernels of a program's one-reduction and elementwise kernels (row kernels,
    several reductions per row, are RawModules of gpu/reduce.py)."""
    t, _ = explore(name)
    return [generate(plan_kernel(k.attrs["body"]), k.attrs["body"].name)
            for k in kernels_of(t.final.graph) if not _rows(k)]


def _rows(k) -> bool:  # noqa: ANN001
    try:
        plan_kernel(k.attrs["body"])
    except PlanError:
        return True
    return False


def test_a_row_kernel_is_one_block_per_row_of_generated_cuda() -> None:
    x = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    t = gx.explore(lambda x: jax.nn.softmax(x, -1), x)
    (k,) = kernels_of(t.final.graph)
    assert _rows(k)
    fused = gpu.compile_kernel(k, "softmax")
    assert fused.code is not None and fused.code.kind == "rows" and not fused.reason
    assert "one block per row of 16" in fused.source and "_block_reduce" in fused.source


def test_an_output_fusion_is_cublas_then_its_epilogue_as_generated_cuda() -> None:
    """relu(x @ w + b): the dot heads the epilogue's kernel (kind "output"); on the GPU the
    dot is a cuBLAS product and the epilogue a generated elementwise kernel over it (the
    code is generated here, without CuPy; it runs only where a GPU is)."""
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((8, 6), (6, 5), (5,)))
    t = gx.explore(lambda x, w, b: jax.nn.relu(x @ w + b), x, w, b)
    (k,) = kernels_of(t.final.graph)
    assert k.attrs["kind"] == "output"
    fused = gpu.compile_kernel(k, "dense_relu")
    assert isinstance(fused, gpu.CublasOutputFusion)
    assert fused.epilogue.code is not None and fused.epilogue.code.kind == "elementwise"
    assert "by cuBLAS" in fused.source and "in0 = the kernel's in2, in1 = dot" in fused.source


def test_backend_listed_only_with_a_gpu() -> None:
    assert ("gpu" in gx.trace.BACKENDS) == (REASON is None)
    assert gpu.GpuInterpreter is not None and "gpu" in registry.names()


def test_seed004_is_one_reduction_kernel_with_its_division_as_post_map() -> None:
    (code,) = _code("seed004-mean")
    assert code.kind == "reduction" and code.axes == (0, 1) and code.then is None
    assert code.in_params == "float32 a0, float32 a1" and code.out_params == "float32 out0"
    assert code.reduce_expr == "a + b" and code.identity == "0"
    assert code.map_expr == "fused_8_map(a0, a1)" or code.map_expr.endswith("_map(a0, a1)")
    assert "__device__ float" in code.preamble and "(a0 * a0)" in code.preamble
    assert code.post_map_expr.startswith("out0 = ") and "_post(a)" in code.post_map_expr
    assert "/" in code.preamble.split("_post")[1]  # the mean's division is in the post-map


def test_epilogue_reading_an_input_is_a_second_elementwise_kernel() -> None:
    t = gx.explore(lambda x, b: x.sum(1) / b, np.ones((8, 4), np.float32), np.ones(8, np.float32),
                   pipeline=["fuse"])
    (k,) = kernels_of(t.final.graph)
    code = generate(plan_kernel(k.attrs["body"]), "k")
    assert code.then is not None and code.then.kind == "elementwise"
    assert code.then.in_params.startswith("float32 r, float32 a0")
    assert "out0 = " in code.then.operation


@pytest.mark.parametrize("name", PROGRAMS)
def test_generated_source_is_balanced_and_names_every_argument(name: str) -> None:
    for code in _code(name):
        text = code.source
        assert text.count("(") == text.count(")") and text.count("{") == text.count("}")
        for k in range(len(code.accesses)):
            assert f"a{k}" in code.in_params
        body = code.operation or code.preamble
        assert not _undefined_values(code.preamble), code.preamble
        assert all(line.rstrip().endswith((";", "{", "}")) for line in body.splitlines() if line.strip())


def test_max_reduction_identity_and_nan_propagation() -> None:
    (code,) = _code("column-max")
    assert code.identity == "-_inf()" and code.reduce_expr == "maximum(a, b)"
    assert "a != a" in code.preamble  # NaN wins, as np.max


@needs_gpu
@pytest.mark.parametrize("name", PROGRAMS)
def test_programs_match_the_reference_on_gpu(name: str) -> None:
    run_matching_the_reference(name, "gpu")


@needs_gpu
def test_memory_limit_is_the_pool_limit() -> None:
    x = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
    t = gx.explore(lambda x: (jnp.exp(x) * 2.0).sum(1), x, memory_limit="256KiB",
                   pipeline=list(gx.passes.DEFAULT_PIPELINE))
    got = t.run(backend="gpu")
    np.testing.assert_allclose(got.value, (np.exp(x) * 2).sum(1), rtol=1e-4)
    assert got.peak_bytes <= 256 * 1024


WIDE = {  # reductions wider than a block: grid reductions and row kernels on the device
    "mean(x**2*3+y) 2048^2": (lambda x, y: jnp.mean(x ** 2 * 3 + y), [(2048, 2048)] * 2),
    "column sums": (lambda x: jnp.sum(jnp.tanh(x), 0) * 2, [(5000, 64)]),
    "row max over 10^5": (lambda x: jnp.max(x * 1.5, 1), [(4, 100_000)]),
    "softmax 512x4096": (lambda x: jax.nn.softmax(x, -1), [(512, 4096)]),
    "layer norm": (lambda x: (x - x.mean(-1, keepdims=True))
                   / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5), [(256, 1024)]),
}


@needs_gpu
@pytest.mark.parametrize("name", WIDE)
def test_wide_reductions_match_the_reference_on_gpu(name: str) -> None:
    fn, shapes = WIDE[name]
    args = [np.random.default_rng(k).standard_normal(s).astype(np.float32)
            for k, s in enumerate(shapes)]
    args[0].flat[7] = np.nan if "max" in name else args[0].flat[7]
    t = gx.explore(fn, *args)
    want = t.run(backend="reference", stage=0).value
    got = t.run(backend="gpu")
    assert_outputs_close([want], [got.value], name)
    assert not any("host reference interpreter" in k.source for k in got.kernels), name
    assert any("cupy.RawModule" in k.source for k in got.kernels), name


@needs_gpu
@pytest.mark.parametrize("name", list(__import__("tests.corpora.zoo", fromlist=["zoo"]).zoo()))
def test_the_zoo_runs_as_one_generated_program_on_gpu(name: str) -> None:
    from tests.corpora.zoo import zoo

    fn, args = zoo()[name]
    t = gx.explore(fn, *args)
    want = jax.tree_util.tree_leaves(t.run(backend="reference").value)
    got = t.run(backend="gpu")
    assert_outputs_close(want, jax.tree_util.tree_leaves(got.value), name)
    assert got.program is not None and "GPU backend" in got.program


@needs_gpu
def test_compile_on_gpu_takes_host_arrays_and_pytrees() -> None:
    """gx.compile's call moves the user's host arrays to the device (a call once passed them
    to CuPy as they were: 'expected cupy ndarray, got numpy.ndarray')."""
    rng = np.random.default_rng(0)
    p = {"w": rng.standard_normal((8, 4)).astype(np.float32), "b": np.zeros(4, np.float32)}
    x = rng.standard_normal((16, 8)).astype(np.float32)

    def loss(p, x):  # noqa: ANN001, ANN202
        return jnp.mean(jax.nn.relu(x @ p["w"] + p["b"]) ** 2)

    f = gx.compile(jax.grad(loss), backend="gpu")
    got, want = f(p, x), jax.grad(loss)(p, x)
    for k in want:
        np.testing.assert_allclose(np.asarray(got[k]), np.asarray(want[k]), rtol=1e-4, atol=1e-6)


def _undefined_values(source: str) -> set[str]:
    """Value names (v<id>) a generated __device__ function reads but does not define."""
    import re

    missing: set[str] = set()
    for body in re.findall(r"__device__ \w+ \w+\([^)]*\) \{\n(.*?)\n\}", source, re.S):
        defined = set(re.findall(r"\b(v\d+) =", body))
        missing |= set(re.findall(r"\bv\d+\b", body)) - defined
    return missing


def test_a_constant_both_phases_read_is_defined_in_each_device_function() -> None:
    """One constant (CSE merged the two 3.0s) read by the prologue and by the epilogue: the
    epilogue's __device__ function defines it too (found by the differential fuzz on an
    H200: NVRTC 'identifier "v2" is undefined' for an imported HLO `add(reduce, 0)`)."""
    x = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    t = gx.explore(lambda x: jnp.sum(x * 3.0, 1) * 3.0, x)
    (k,) = kernels_of(t.final.graph)
    code = generate(plan_kernel(k.attrs["body"]), "k")
    assert code.kind == "reduction" and "_post" in code.preamble
    assert not _undefined_values(code.preamble), code.preamble


def test_a_zero_d_negative_zero_keeps_its_sign_on_the_way_to_the_device() -> None:
    """CuPy 14.2's asarray of a 0-d host array turns -0.0 into +0.0 (seen on an H200, found by
    the differential fuzz: `x / -0.0` gave +inf on the GPU backend); `to_device` sends 0-d
    values as one-element copies. Here a stand-in module with that behaviour."""
    from explorer.backends.gpu.program import to_device

    class Device:  # CuPy's asarray, as it treats a 0-d -0.0
        ndarray = type("ndarray", (np.ndarray,), {})

        @staticmethod
        def asarray(a):  # noqa: ANN001, ANN205
            a = np.array(a)
            return (np.abs(a) if a.ndim == 0 and a == 0 else a).view(Device.ndarray)

    assert not np.signbit(Device.asarray(np.float32(-0.0)))  # (the stand-in has the bug)
    for value in (np.float32(-0.0), np.array(-0.0), -0.0):
        out = to_device(Device, value)
        assert out.shape == () and np.signbit(out)
    assert to_device(Device, np.array([-0.0, 1.0], np.float32)).shape == (2,)
    assert to_device(Device, np.array(-0.0), np.float32).dtype == np.float32


@needs_gpu
def test_division_by_negative_zero_on_gpu() -> None:
    x = np.array([4.0, -2.0, 0.5], np.float32)
    t = gx.explore(lambda x, z: (x / jnp.float32(-0.0), x * z), x, np.float32(-0.0))
    for stage in (0, len(t.stages) - 1):
        a, b = t.run(backend="gpu", stage=stage).value
        np.testing.assert_array_equal(a, [-np.inf, np.inf, -np.inf])
        assert np.signbit(b).tolist() == [True, False, True]


@pytest.mark.parametrize("config,every", [([(0, 0, 0), (1, 2, 1)], 1), ([(-1, 1, 0), (-2, 2, 2)], 1),
                                          ([(0, 0, 0), (-1, 13, 1)], 2)])
def test_a_cupy_kernel_reads_slices_and_pads_through_views(config: list, every: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An elementwise kernel reading a strided slice and an interleaving pad: its CuPy
    arguments are `view`s (a strided view; the padded array, -0.0 padding kept), here with
    NumPy standing in for CuPy, and the kernel's arithmetic over them is the reference's; a
    negative low or high crops; a slice of a pad is one view (the pad's, sliced)."""
    monkeypatch.setattr(gpu, "_cp", lambda: np)
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    y = np.random.default_rng(5).standard_normal((3, 22)).astype(np.float32)
    x[1, 2] = np.nan
    fn = lambda x, y: jax.lax.pad(x, -0.0, config)[:, ::every] * y[:, 1:-1:2]  # noqa: E731
    g = gx.explore(fn, x, y).final.graph
    (k,) = [n for n in g.nodes if n.op == "kernel"]
    body = k.attrs["body"]
    code = generate(plan_kernel(body), "k")
    assert code.kind == "elementwise" and len(code.accesses) == 2
    a, b = (gpu.view([x, y][acc.param], acc, code.shape, body) for acc in code.accesses)
    want = np.asarray(jax.lax.pad(x, -0.0, config))[:, ::every], y[:, 1:-1:2]
    for got, w in zip((a, b), want):
        np.testing.assert_array_equal(got, w)
        assert np.signbit(got).tolist() == np.signbit(w).tolist()
    with np.errstate(all="ignore"):
        ref = reference.evaluate(body, [x, y])[0]
    np.testing.assert_array_equal(a * b, ref)

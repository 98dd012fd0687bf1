"""Every generated CUDA kernel compiles to PTX under NVRTC, on a machine with no GPU (issue 40,
Part 3). NVRTC is a library (PyPI: `nvidia-cuda-nvrtc-cu12`, called through `cuda-bindings`),
so the dev extra installs it and `make test` runs this file; without them it skips, saying so.

What compiles, for every program of the zoo (tests/corpora/zoo.py), the wide zoo
(tests/corpora/wide.py, small) and the memory programs (tests/corpora/memory_programs.py and
the issue's, split under their limits): every fused kernel the GPU backend would build
(`backend.compile_kernel`, the epilogue of a cuBLAS output fusion included), at the top level
and in every body under it (scan and while bodies, cond branches, split loops' map-reduce
kernels and their pre and post parts), with the options the backend passes.

The RawModules (grid reductions, row kernels, map-reduce kernels) compile as they are. CuPy's
ElementwiseKernel and ReductionKernel are a body that CuPy wraps in a `__global__` function of
its own (cupy/_core/_kernel.pyx `_get_elementwise_kernel_code`, cupy/_core/_reduction.pyx
`_create_reduction_function_code`): `cupy_source` below writes that wrapper as CuPy does
(parameters as `CArray`s, one `const T &a0 = _raw_a0[_ind.get()];` per input, the
reduction's `REDUCE`/`POST_MAP` macros, shared-memory tree and `typedef ... _type_reduce`),
over a small stand-in for CuPy's `carray.cuh` (`CArray`, `CIndexer`, `CUPY_FOR`). What this
cannot see: a clash with a name in CuPy's real headers (complex.cuh, carray.cuh), and CuPy's
CUB path, which takes some reductions instead of its own kernel.
"""

from __future__ import annotations

import hashlib
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import explorer as gx
from explorer.backends.codegen.kernel_plan import PlanError
from explorer.backends.codegen.mapreduce_plan import plan_mapreduce
from explorer.backends.gpu import mapreduce, routine_table, routines
from explorer.backends.gpu.backend import compile_kernel
from explorer.backends.gpu.codegen import GpuKernelCode
from explorer.backends.gpu.cuda_dialect import NVRTC_OPTIONS, RAW_MODULE_OPTIONS
from explorer.backends.output_fusion import OutputFusion
from explorer.ir import Graph

try:
    from cuda.bindings import nvrtc
except ImportError:
    nvrtc = None

ARCH = "--gpu-architecture=compute_80"  # (PTX for any device from the A100 on)
CUPY_STD = "--std=c++17"  # what CuPy adds to its kernels' options when they name no standard


def _unavailable() -> str | None:
    if nvrtc is None:
        return "NVRTC is not installed (the dev extra: cuda-bindings, nvidia-cuda-nvrtc-cu12)"
    try:
        err, *_ = nvrtc.nvrtcVersion()
    except Exception as e:  # (cuda-bindings without the NVRTC library it loads)
        return f"NVRTC cannot load: {str(e).splitlines()[0]}"
    return None if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else f"NVRTC: {err}"


REASON = _unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

# ---------------------------------------------------------------- CuPy's kernel text

# A stand-in for the parts of CuPy's cupy/carray.cuh its kernels use (not CuPy's code)
CARRAY = r"""
template <typename T, int ndim, bool c_contiguous = false, bool use_32bit = false>
class CArray {
 public:
  T* data_;
  ptrdiff_t size_;
  ptrdiff_t shape_[ndim > 0 ? ndim : 1];
  ptrdiff_t strides_[ndim > 0 ? ndim : 1];
  __device__ T& operator[](const ptrdiff_t* idx) const {
    char* p = reinterpret_cast<char*>(data_);
    for (int d = 0; d < ndim; ++d) p += strides_[d] * idx[d];
    return *reinterpret_cast<T*>(p);
  }
};
template <int ndim, bool use_32bit = false>
class CIndexer {
 public:
  ptrdiff_t size_;
  ptrdiff_t shape_[ndim > 0 ? ndim : 1];
  ptrdiff_t index_[ndim > 0 ? ndim : 1];
  __device__ ptrdiff_t size() const { return size_; }
  __device__ void set(ptrdiff_t i) {
    for (int d = ndim - 1; d >= 0; --d) { index_[d] = i % shape_[d]; i /= shape_[d]; }
  }
  __device__ const ptrdiff_t* get() const { return index_; }
};
#define CUPY_FOR(i, n) \
  for (ptrdiff_t i = (ptrdiff_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (ptrdiff_t)blockDim.x * gridDim.x)
"""

CTYPE = {"bool": "bool", "int8": "signed char", "int16": "short", "int32": "int",
         "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
         "uint32": "unsigned int", "uint64": "unsigned long long", "float32": "float",
         "float64": "double"}  # CuPy's _scalar._typenames_base, for the types we generate


def _params(text: str) -> list[tuple[str, str]]:
    """A CuPy parameter list ('float32 a0, bool a1') as (C type, name) pairs."""
    out = []
    for p in filter(None, (s.strip() for s in text.split(","))):
        dtype, name = p.split()[-2:]
        out.append((CTYPE[dtype], name))
    return out


def cupy_source(code: GpuKernelCode) -> str:
    """The `__global__` function CuPy builds from `code` (an ElementwiseKernel or a
    ReductionKernel definition), as CuPy writes it."""
    ins, outs = _params(code.in_params), _params(code.out_params)
    nd = max(len(code.shape), 1)
    if code.kind == "elementwise":
        params = [f"const CArray<{t}, {nd}, 0, 0> _raw_{n}" for t, n in ins]
        params += [f"CArray<{t}, {nd}, 0, 0> _raw_{n}" for t, n in outs]
        params.append(f"CIndexer<{nd}, 0> _ind")
        refs = [f"const {t} &{n} = _raw_{n}[_ind.get()];" for t, n in ins]
        refs += [f"{t} &{n} = _raw_{n}[_ind.get()];" for t, n in outs]
        return (f"{CARRAY}\n{code.preamble}\n"
                f'extern "C" __global__ void {code.name}({", ".join(params)}) {{\n'
                f"  ;\n  #pragma unroll 1\n  CUPY_FOR(i, _ind.size()) {{\n    _ind.set(i);\n"
                + "".join(f"    {r}\n" for r in refs) + f"{code.operation};\n  }}\n  ;\n}}\n")
    out_nd = max(len(code.shape) - len(code.axes), 1)
    params = [f"const CArray<{t}, {nd}, 0, 0> _raw_{n}" for t, n in ins]
    params += [f"CArray<{t}, {out_nd}, 0, 0> _raw_{n}" for t, n in outs]
    params += [f"CIndexer<{nd}, 0> _in_ind", f"CIndexer<{out_nd}, 0> _out_ind",
               "const int _block_stride"]
    block = 512
    return (f"{CARRAY}\ntypedef int IndexT;\n{code.preamble}\n"
            f"#define REDUCE(a, b) ({code.reduce_expr})\n"
            f"#define POST_MAP(a) ({code.post_map_expr})\n"
            "#define _REDUCE(_offset) if (_tid < _offset) { \\\n"
            "  _type_reduce _a = _sdata[_tid], _b = _sdata[(_tid + _offset)]; \\\n"
            "  _sdata[_tid] = REDUCE(_a, _b); \\\n}\n"
            f"typedef {code.reduce_type} _type_reduce;\n"
            f'extern "C" __global__ void {code.name}({", ".join(params)}) {{\n'
            f"  __shared__ char _sdata_raw[{block} * sizeof(_type_reduce)];\n"
            "  _type_reduce *_sdata = reinterpret_cast<_type_reduce*>(_sdata_raw);\n"
            "  unsigned int _tid = threadIdx.x;\n"
            "  IndexT _J_offset = _tid >> __popc(_block_stride - 1);\n"
            "  ptrdiff_t _j_offset = (ptrdiff_t)_J_offset * _out_ind.size();\n"
            f"  IndexT _J_stride = {block} >> __popc(_block_stride - 1);\n"
            "  ptrdiff_t _j_stride = (ptrdiff_t)_J_stride * _out_ind.size();\n"
            "  for (ptrdiff_t _i_base = (ptrdiff_t)blockIdx.x * _block_stride;\n"
            "       _i_base < _out_ind.size(); _i_base += (ptrdiff_t)gridDim.x * _block_stride) {\n"
            f"    _type_reduce _s = _type_reduce({code.identity});\n"
            "    ptrdiff_t _i = _i_base + (_tid & (_block_stride - 1));\n"
            "    IndexT _J = _J_offset;\n"
            "    for (ptrdiff_t _j = _i + _j_offset; _j < _in_ind.size();\n"
            "         _j += _j_stride, _J += _J_stride) {\n"
            "      _in_ind.set(_j);\n"
            + "".join(f"      const {t} {n} = _raw_{n}[_in_ind.get()];\n" for t, n in ins)
            + f"      _type_reduce _a = static_cast<_type_reduce>({code.map_expr});\n"
            "      _s = REDUCE(_s, _a);\n    }\n"
            "    _sdata[_tid] = _s;\n    __syncthreads();\n"
            f"    for (unsigned int _block = {block} / 2; _block >= _block_stride; _block >>= 1) {{\n"
            "      if (_tid < _block) { _REDUCE(_block); }\n      __syncthreads();\n    }\n"
            "    if (_tid < _block_stride) { _s = _sdata[_tid]; }\n"
            "    if (_tid < _block_stride && _i < _out_ind.size()) {\n"
            "      _out_ind.set(static_cast<ptrdiff_t>(_i));\n"
            + "".join(f"      {t} &{n} = _raw_{n}[_out_ind.get()];\n" for t, n in outs)
            + "      POST_MAP(_s);\n    }\n  }\n}\n")


# ---------------------------------------------------------------- the kernels of a program

Source = tuple[str, str, tuple[str, ...]]  # (label, CUDA source, NVRTC options)


def _of_code(code: Any, label: str) -> list[Source]:
    if isinstance(code, GpuKernelCode):
        out = [(label, cupy_source(code), (CUPY_STD, *NVRTC_OPTIONS))]
    else:  # a RawModule's source (grid reductions, row kernels, and kinds to come)
        out = [(label, code.source, RAW_MODULE_OPTIONS)]
    then = getattr(code, "then", None)
    return out + (_of_code(then, label + " then") if then is not None else [])


def cuda_sources(g: Graph, where: str = "") -> tuple[list[Source], list[str]]:
    """The CUDA the GPU backend builds for `g` and every body under it, and the kernels that
    have none (they run on the host: 'label: reason')."""
    sources: list[Source] = []
    host: list[str] = []
    for n in g.nodes:
        label = f"{where}%{n.id} {n.op}"
        if n.op == "kernel":
            k = compile_kernel(n, f"k{n.id}")
            k = k.epilogue if isinstance(k, OutputFusion) else k
            if k.code is None:
                host.append(f"{label}: {k.reason}")
            else:
                sources += _of_code(k.code, label)
            continue
        r = routine_table.prepare(n.op, [g[i].type for i in n.inputs], n.type, n.attrs)
        if isinstance(r, routines.Routine):  # a conv, window, gather/scatter, pad... routine
            sources.append((f"{label} routine ({r.how})", r.source, RAW_MODULE_OPTIONS))
        for v in n.attrs.values():
            for body in (v if isinstance(v, list | tuple) else (v,)):
                if not isinstance(body, Graph):
                    continue
                inner = f"{label}/{body.name}/"
                parts = [body]
                if body.name.startswith("split_"):  # (as GpuInterpreter.make_child builds it)
                    try:
                        plan = plan_mapreduce(body)
                        code = mapreduce.generate(plan, f"mapreduce_{n.id}")
                    except PlanError:
                        pass
                    else:
                        sources.append((inner + "map-reduce", code.source, RAW_MODULE_OPTIONS))
                        parts = [plan.pre, plan.post]
                for part in parts:
                    s, h = cuda_sources(part, inner)
                    sources += s
                    host += h
    return sources, host


# ---------------------------------------------------------------- NVRTC

_PTX: dict[str, str | None] = {}  # (source, options) hash -> None once it compiled


def _numbered(source: str) -> str:
    return "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(source.splitlines()))


def compile_ptx(source: str, options: tuple[str, ...], name: str = "kernel.cu") -> str | None:
    """None when `source` compiles to PTX under `options`; else NVRTC's log."""
    key = hashlib.sha256(repr((source, options)).encode()).hexdigest()
    if key in _PTX:
        return _PTX[key]
    opts = [o.encode() for o in (ARCH, *options)]
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        failed = None
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            failed = f"{err}\n{log.decode(errors='replace').rstrip(chr(0))}"
        else:
            _, size = nvrtc.nvrtcGetPTXSize(prog)
            ptx = b" " * size
            nvrtc.nvrtcGetPTX(prog, ptx)
            if b".entry" not in ptx:
                failed = "compiled, but the PTX has no kernel entry"
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    _PTX[key] = failed
    return failed


def assert_compiles(sources: list[Source], what: str) -> int:
    """Compile every source (in parallel threads: NVRTC is thread-safe); fail with every
    error, each with its log and its numbered source. Returns how many compiled."""
    with ThreadPoolExecutor(4) as pool:
        logs = list(pool.map(lambda s: compile_ptx(s[1], s[2]), sources))
    bad = [f"--- {label} ({' '.join(opts)}):\n{log}\n{_numbered(src)}"
           for (label, src, opts), log in zip(sources, logs) if log is not None]
    if bad:
        pytest.fail(f"{what}: {len(bad)} of {len(sources)} kernels fail under NVRTC\n"
                    + "\n".join(bad), pytrace=False)
    return len(sources)


# ---------------------------------------------------------------- the tests


def test_nvrtc_reports_an_error_with_its_log_and_the_source() -> None:
    """The check itself can fail: a kernel that does not compile names its error."""
    good = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = expf(x[threadIdx.x]); }'
    assert compile_ptx(good, RAW_MODULE_OPTIONS) is None
    bad = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = undefined_fn(1); }'
    log = compile_ptx(bad, RAW_MODULE_OPTIONS)
    assert log is not None and "undefined_fn" in log
    with pytest.raises(pytest.fail.Exception, match=r"(?s)1 of 1 kernels.*undefined_fn.*   1  extern"):
        assert_compiles([("bad", bad, RAW_MODULE_OPTIONS)], "a bad kernel")


def _programs() -> dict[str, Any]:
    """name -> a thunk giving the final graph: the zoo, the wide zoo (small), the memory
    programs split under their limits."""
    from tests.backends.gpu.test_mapreduce import PROGRAMS as MEMORY
    from tests.corpora.wide import PROGRAMS as WIDE
    from tests.corpora.zoo import zoo

    def explored(fn: Any, args: Any) -> Graph:
        return gx.explore(fn, *args).final.graph

    def memory(key: str) -> Graph:
        from tests.backends.gpu.test_mapreduce import _explored

        return _explored(key)[0].final.graph

    out: dict[str, Any] = {}
    for name, (fn, args) in zoo().items():
        out[f"zoo/{name}"] = lambda fn=fn, args=args: explored(fn, args)
    for name, make in WIDE.items():
        out[f"wide/{name}"] = lambda make=make: explored(*make("small"))
    for key in MEMORY:
        out[f"memory/{key}"] = lambda key=key: memory(key)
    return out


PROGRAMS = _programs() if REASON is None else {"(nvrtc absent)": None}


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_generated_kernel_of_the_program_compiles_under_nvrtc(name: str) -> None:
    g = PROGRAMS[name]()
    sources, host = cuda_sources(g)
    kernels = sum(1 for sub in _all_graphs(g) for n in sub.nodes if n.op == "kernel")
    if kernels:
        assert sources or host, f"{name}: kernels found, no CUDA and no host fallback"
    assert_compiles(sources, name)
    for h in host:  # a kernel with no CUDA form runs its host reference: never a crash here
        assert re.search(r": \S", h), h


def _all_graphs(g: Graph) -> list[Graph]:
    out = [g]
    for n in g.nodes:
        if n.op == "kernel":
            continue
        for v in n.attrs.values():
            for body in (v if isinstance(v, list | tuple) else (v,)):
                if isinstance(body, Graph):
                    out += _all_graphs(body)
    return out


def test_the_programs_hold_kernels_of_every_kind() -> None:
    """Over the zoo and the memory programs: CuPy elementwise and reduction kernels, grid or
    row kernels, map-reduce kernels and routines (convolutions, pooling, gathers...) all reach
    NVRTC (so none is silently left out)."""
    kinds: set[str] = set()
    for name in ("zoo/gpt_block", "zoo/cnn_grad", "memory/memory seed 0"):
        sources, _ = cuda_sources(PROGRAMS[name]())
        for label, src, _ in sources:
            kinds.add("map-reduce" if "map-reduce" in label else "routine" if " routine (" in label else
                      "reduction" if "_type_reduce" in src else
                      "elementwise" if "CUPY_FOR" in src else "raw")
    assert kinds == {"map-reduce", "routine", "reduction", "elementwise", "raw"}, kinds

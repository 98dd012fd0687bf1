#!/usr/bin/env bash
# The checks only a GPU machine can make, as one call of the lent `device` machine (see
# bench/RESULTS.md "On a GPU"), issue 40's list: the tests that skip without CuPy and a GPU
# (tests/backends/gpu: the generated CUDA built by CuPy, the CUDA-graph capture of
# backends/gpu/graphs.py on the real stream, NVRTC where cuda-bindings is there), then
# bench/gpu.py (kernels, every model as its CUDA graph and line by line against jax.jit on
# the same GPU, the models as users call them, the kernel-vector product and kNN with KeOps
# on the GPU), bench/seeds.py, and bench/distributed.py's scaling over 1 to 16 workers on
# the machine's cores. Logs and the figures' JSON go to $OUT.
#   PARTS: which of "tests bench seeds distributed" to run (all by default), each under its
#   own timeout: TESTS_S, BENCH_S, SEEDS_S, DIST_S seconds (defaults fit one 600 s call);
#   TESTS, TESTS_K: the test files and pytest's -k; SECTIONS: bench/gpu.py's --only;
#   BENCH_ARGS: more arguments for bench/gpu.py (`--backend cpu --small` checks it without a
#   GPU); DIST_N, DIST_LIMIT, DIST_WORKERS: bench/distributed.py's --scaling-n, --limit and
#   --workers;
#   PY: the Python (python3). BENCH_KEOPS=0 leaves KeOps out (2.3 segfaulted there).
# Wheels the machine's image lacks (pykeops, keopscore, graphviz, platformdirs) travel in a
# git-ignored .whl/ and are installed to /tmp/site first.
set -o pipefail
OUT=${OUT:-/tmp/gpu-out}
PY=${PY:-python3}
PARTS=${PARTS:-tests bench seeds distributed}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD:/tmp/site
{ nvidia-smi; nproc; $PY -c "import jax, numba, numpy; print('jax', jax.__version__, jax.devices(), 'numba', numba.__version__, 'numpy', numpy.__version__)"; $PY -c "import cupy; print('cupy', cupy.__version__)"; } >"$OUT/env.txt" 2>&1
tail -2 "$OUT/env.txt"
status=()
has() { [[ " $PARTS " == *" $1 "* ]]; }
if has tests; then
  per_test=$($PY -c "import pytest_timeout" 2>/dev/null && echo "--timeout 150")
  timeout "${TESTS_S:-170}" $PY -m pytest -p no:cacheprovider -p no:nbval -n "${WORKERS:-8}" \
    $per_test -q -rfEs \
    ${TESTS:-tests/backends/gpu tests/passes/test_euclidean_distance.py \
    tests/test_control_flow.py tests/test_profile.py tests/test_xla_pipeline.py tests/test_bad_input.py} \
    -k "${TESTS_K:-gpu or neighbours or profile_bad_input}" 2>&1 | tee "$OUT/pytest.log" | tail -40
  status+=("tests ${PIPESTATUS[0]}")
fi
if has bench; then
  timeout "${BENCH_S:-220}" $PY -m bench.gpu --budget $(( ${BENCH_S:-220} - 40 )) \
    --only "${SECTIONS:-kernels,graphs,models,memory-safe,knn-exact}" --json "$OUT/gpu.json" \
    ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
  status+=("bench ${PIPESTATUS[0]}")
fi
if has seeds; then
  timeout "${SEEDS_S:-70}" $PY -m bench.seeds --quick 2>&1 | tee "$OUT/seeds.log" | tail -30
  status+=("seeds ${PIPESTATUS[0]}")
fi
if has distributed; then
  timeout "${DIST_S:-120}" $PY -m bench.distributed --skip-main --scaling-n "${DIST_N:-200000}" \
    --limit "${DIST_LIMIT:-256MiB}" --workers "${DIST_WORKERS:-1,2,4,8,16}" 2>&1 | tee "$OUT/distributed.log" | tail -20
  status+=("distributed ${PIPESTATUS[0]}")
fi
echo "exit statuses: ${status[*]}" | tee "$OUT/status.txt"

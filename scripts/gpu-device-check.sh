#!/usr/bin/env bash
# The checks only a GPU machine can make, as one call of the lent `device` machine (see
# bench/RESULTS.md "On a GPU"): the tests that skip without CuPy and a GPU, then
# bench/gpu.py (the GPU backend against jax.jit on the same GPU; KeOps on the GPU where it
# builds). Logs and the figures' JSON go to $OUT.
#   TESTS_S, BENCH_S: seconds for each part; TESTS, TESTS_K: the test files and pytest's -k;
#   SECTIONS: bench/gpu.py's --only; BENCH_KEOPS=0 leaves KeOps out (2.3 segfaulted there).
# Wheels the machine's image lacks (pykeops, keopscore, graphviz, platformdirs) travel in a
# git-ignored .whl/ and are installed to /tmp/site first.
set -o pipefail
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD:/tmp/site
{ nvidia-smi; nproc; python3 -c "import jax, cupy, numba, numpy; print('jax', jax.__version__, jax.devices(), 'cupy', cupy.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__)"; } >"$OUT/env.txt" 2>&1
tail -1 "$OUT/env.txt"
timeout "${TESTS_S:-170}" python3 -m pytest -p no:cacheprovider -p no:nbval -n "${WORKERS:-8}" \
  --timeout 150 -q -rfEs \
  ${TESTS:-tests/backends/test_gpu.py tests/passes/test_euclidean_distance.py \
  tests/test_control_flow.py tests/test_profile.py tests/test_xla_pipeline.py tests/test_bad_input.py} \
  -k "${TESTS_K:-gpu or neighbours or profile_bad_input}" 2>&1 | tee "$OUT/pytest.log" | tail -40
timeout "${BENCH_S:-220}" python3 -m bench.gpu --budget $(( ${BENCH_S:-220} - 40 )) \
  --only "${SECTIONS:-kernels,knn-exact,memory-safe,models}" --json "$OUT/gpu.json" 2>&1 | tee "$OUT/bench.log"
echo "exit statuses: ${PIPESTATUS[*]}"

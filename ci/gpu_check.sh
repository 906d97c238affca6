#!/usr/bin/env bash
# One call on a GPU machine (see packages/cuda/README.md): install carried wheels, build ember._C
# with every core (unless a prebuilt one is present), run the CUDA tests, then the CUDA benchmark.
# Usage: ci/gpu_check.sh [pytest args...]; OUT (optional) receives the logs, JSON and the built _C.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
out="${OUT:-/tmp/ember-gpu-out}"
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
pkg=packages/tensor-core
if ! ls $pkg/src/ember/_C*.so >/dev/null 2>&1; then
  t0=$(date +%s)
  cmake -S $pkg -B /tmp/ember-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_USE_FFTW=OFF \
    -DPython_EXECUTABLE="$(command -v python3)" -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" \
    -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$here/$pkg/src/ember" >/dev/null && \
    cmake --build /tmp/ember-build -j "$(nproc)" >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  echo "built _C in $(( $(date +%s) - t0 )) s"
  cp $pkg/src/ember/_C*.so "$out/"
fi
export PYTHONPATH="$(python3 ci/dev_env.py):${PYTHONPATH:-}"
export EMBER_CUDA_CACHE=/tmp/ember-cuda-cache PYTHONUNBUFFERED=1
# Cubins compiled ahead (on any machine with the same Triton) skip compilation here.
if [ -d .kcache/bin ]; then mkdir -p "$EMBER_CUDA_CACHE" && cp -r .kcache/bin "$EMBER_CUDA_CACHE/"; fi
nvidia-smi --query-gpu=name,clocks.sm,memory.used --format=csv,noheader
timeout "${EMBER_GPU_TEST_TIMEOUT:-300}" python3 -m pytest -q -p no:cacheprovider --tb=short packages/cuda/tests "$@" 2>&1 | tee "$out/tests.log" | tail -40
# EMBER_GPU_BENCHES: the benchmark scripts to run, each "name[:arg,arg...]", with --json into $out
# (set but empty: no benchmarks).
for spec in ${EMBER_GPU_BENCHES-bench_cuda:--tune bench_cuda_attention:--tune bench_cuda_gpt2}; do
  b=${spec%%:*}; a=""; [ "$b" != "$spec" ] && a=${spec#*:}
  timeout "${EMBER_GPU_BENCH_TIMEOUT:-200}" python3 benchmarks/$b.py ${a//,/ } --json "$out/$b.json" 2>&1 | \
    tee "$out/$b.log"
done
tar -C "$EMBER_CUDA_CACHE" -czf "$out/kcache.tgz" bin 2>/dev/null || true

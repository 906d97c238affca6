#!/usr/bin/env bash
# Fast developer build of the native extension into packages/tensor-core/src/ember, so a
# checkout runs with PYTHONPATH=packages/tensor-core/src and no pip install. Incremental:
# only changed C++ files recompile. Usage: ci/dev_build.sh [python]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-python3}"
pkg="$here/packages/tensor-core"
build="$pkg/build/dev-inplace"
pybind11_dir="$("$python" -m pybind11 --cmakedir)"
# ccache, when installed, makes a rebuild in another checkout (a git worktree) nearly free:
# paths under the repository's parent are hashed relative to it.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$here")}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$pkg" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
    -DPython_EXECUTABLE="$("$python" -c 'import sys; print(sys.executable)')" \
    -Dpybind11_DIR="$pybind11_dir" -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$pkg/src/ember" >/dev/null
fi
cmake --build "$build" -j 2

#!/usr/bin/env bash
# Builds ember._C with AddressSanitizer + UBSan (CMake option EMBER_SANITIZE) into its own
# build folder and stages a runnable copy of the package beside it, so the regular
# in-place build in src/ember is left alone. Incremental like ci/dev_build.sh.
# Usage: ci/sanitize_build.sh [python]; prints the folder to put first on PYTHONPATH.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-python3}"
pkg="$here/packages/tensor-core"
build="$pkg/build/sanitize"
site="$build/site"
pybind11_dir="$("$python" -m pybind11 --cmakedir)"
# ccache (when installed) makes a rebuild in another checkout nearly free, as in ci/dev_build.sh: a
# cold sanitized build is most of `nox -s sanitize`'s time on a 2-core machine. This build keeps
# debug info (-g), which ccache would otherwise key on the build folder's path.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(dirname "$here")}" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  # RelWithDebInfo keeps line numbers in the sanitizer's stack traces; no -march=native so
  # reports do not depend on the build machine.
  cmake -S "$pkg" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_SANITIZE=ON \
    -DEMBER_NATIVE_ARCH=OFF "${launcher[@]}" \
    -DPython_EXECUTABLE="$("$python" -c 'import sys; print(sys.executable)')" \
    -Dpybind11_DIR="$pybind11_dir" -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$site/ember" >/dev/null
fi
cmake --build "$build" -j "${EMBER_BUILD_JOBS:-2}" >&2
# The Python sources are copied (not linked) next to the sanitized _C so that `import ember`
# from $site finds this _C and never the regular one in src/ember.
"$python" - "$pkg/src/ember" "$site/ember" <<'PY'
import shutil, sys
shutil.copytree(sys.argv[1], sys.argv[2], dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("_C*.so", "__pycache__"))
PY
echo "$site"

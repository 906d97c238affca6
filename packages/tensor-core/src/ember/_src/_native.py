"""Loads the native extension ``ember._C``.

For wheel installs the extension's rpath finds OpenBLAS inside the ``scipy_openblas32``
wheel. Editable and in-place builds live elsewhere, so when the first import fails the
library is preloaded into the global namespace and the import retried (build-facts). The
package is located with ``find_spec`` rather than imported: importing it reads package
metadata, which costs more than the rest of ``import ember``.

Every module of the core imports the native module from here (``from .._native import _C``),
so the preload has run whatever the order modules are imported in.
"""

import os

# libgomp's idle workers spin for a long time after each parallel region by default; on a
# 2-core machine they then starve OpenBLAS's own threads, and an MLP step at 2 threads ran
# slower than at 1 (40 ms vs 31 ms). A short spin keeps small parallel loops fast (12 us vs
# 60 us when workers sleep at once) and gave 19 ms at 2 threads. libgomp reads this when it
# loads, so it only applies if no library has loaded libgomp before ember; a user's own
# setting wins.
os.environ.setdefault("GOMP_SPINCOUNT", "20000")

# OpenBLAS's own worker threads spin for 2^28 cycles (~0.1 s) after every threaded gemm. On 2
# cores they then compete with the OpenMP threads of the elementwise ops that follow: in an
# MLP backward at 2 threads, relu/le/where/sum right after a gemm ran 2-6x slower than at 1
# thread. 2^10 cycles keeps the gemms scaling (measured 1.7x at 2 threads either way) and lets
# the next kernel have the cores. Read when OpenBLAS loads; a user's own setting wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "10")


def _preload_openblas() -> bool:
    # Imported here: a wheel install's first import of _C succeeds and never needs them.
    import ctypes
    import glob
    import importlib.util

    spec = importlib.util.find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:
        return False
    for folder in spec.submodule_search_locations:
        for path in sorted(glob.glob(os.path.join(folder, "lib", "libscipy_openblas*.so*"))):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            return True
    return False


try:
    from ember import _C  # noqa: F401
except ImportError:
    if not _preload_openblas():
        raise
    from ember import _C  # noqa: F401

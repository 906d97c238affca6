"""Loads the native extension, preloading OpenBLAS from the scipy-openblas32 wheel first.

The extension's rpath finds OpenBLAS for regular installs; editable and in-place builds
live elsewhere, so the library is loaded into the global namespace here (build-facts).
"""

import ctypes
import os


def _preload_openblas() -> None:
    try:
        import scipy_openblas32
    except ImportError:  # the rpath may still find it
        return
    lib_dir = scipy_openblas32.get_lib_dir()
    name = scipy_openblas32.get_library()
    for candidate in (f"lib{name}.so", f"{name}.so", f"lib{name}.dylib"):
        path = os.path.join(lib_dir, candidate)
        if os.path.exists(path):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            return


_preload_openblas()

from ember import _C  # noqa: E402,F401

"""Loads the native extension, preloading OpenBLAS from the scipy-openblas32 wheel first.

The extension's rpath finds OpenBLAS for regular installs; editable and in-place builds
live elsewhere, so the library is loaded into the global namespace here (build-facts).
"""

import ctypes
import os


def _preload_openblas() -> None:
    # Locate the wheel without importing it: importing scipy_openblas32 pulls in
    # importlib.metadata (~0.1 s, most of `import ember`).
    from importlib.util import find_spec

    spec = find_spec("scipy_openblas32")
    if spec is None or not spec.submodule_search_locations:  # the rpath may still find it
        return
    lib_dir = os.path.join(list(spec.submodule_search_locations)[0], "lib")
    try:
        names = sorted(os.listdir(lib_dir))
    except OSError:
        return
    for name in names:
        if name.startswith("libscipy_openblas") and (".so" in name or name.endswith(".dylib")):
            ctypes.CDLL(os.path.join(lib_dir, name), mode=ctypes.RTLD_GLOBAL)
            return


_preload_openblas()

from ember import _C  # noqa: E402,F401

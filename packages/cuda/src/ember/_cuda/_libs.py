"""NVIDIA's libraries that ember's CUDA path calls through ctypes (cuBLAS, cuFFT), found one way: the wheels
first (``nvidia/<package>/lib`` in the cu12 and cu13 package layouts, ``nvidia/cu13/lib`` in CUDA 13's merged
one; the newest soname first), then ``cuda.pathfinder``, then the system's loader path. Loaded with
RTLD_GLOBAL, on first use, never at import."""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os


def wheel_paths(names: tuple) -> list:
    """The paths of ``names`` (sonames, most wanted first) in the installed ``nvidia`` wheels, in that order."""
    spec = importlib.util.find_spec("nvidia")
    folders = list(spec.submodule_search_locations or []) if spec else []
    found = []
    for name in names:
        for folder in folders:
            found.extend(sorted(glob.glob(os.path.join(folder, "*", "lib", name))))
    return found


def load(names: tuple, pathfinder_name: str, missing: str, companions: tuple = ()):
    """The first of ``names`` that loads (a ctypes.CDLL), searched as the module says; ``companions`` are glob
    patterns of libraries loaded first from a wheel library's folder (cuBLAS's own libcublasLt, so that the
    loader does not pick another one). Raises RuntimeError(``missing``) when none loads."""
    for path in wheel_paths(names):
        try:
            for pattern in companions:
                for companion in sorted(glob.glob(os.path.join(os.path.dirname(path), pattern))):
                    ctypes.CDLL(companion, mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return ctypes.CDLL(load_nvidia_dynamic_lib(pathfinder_name).abs_path, mode=ctypes.RTLD_GLOBAL)
    except Exception:  # noqa: BLE001 - no pathfinder, or it found nothing: the system search
        pass
    for name in names:
        try:
            return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
    raise RuntimeError(missing)

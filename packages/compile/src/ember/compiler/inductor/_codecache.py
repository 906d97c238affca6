"""The on-disk kernel cache: C++ source -> shared library, keyed by source and compiler flags.

``~/.cache/ember/compile`` (or ``$EMBER_CACHE_DIR``) holds ``<key>.so`` files. A miss compiles
into a file of this process's own and renames it into place: the rename is atomic, so processes
compiling the same kernel at once each produce a whole library and readers never see half of
one. A hit (in this process, or from an earlier one) costs a ``dlopen``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

from . import config

_LOADED: dict[str, ctypes.CDLL] = {}
_LOCK = threading.Lock()


class CompileError(RuntimeError):
    """The system compiler rejected generated code (a bug in ember's code generator)."""


def cache_dir() -> str:
    root = os.environ.get("EMBER_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ember")
    path = os.path.join(root, "compile")
    os.makedirs(path, exist_ok=True)
    return path


def compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise CompileError("ember's C++ backend needs a C++ compiler (g++) on PATH")
    return cxx


def flags() -> list[str]:
    return ["-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++17", "-fno-math-errno", "-fwrapv",
            *config.cpp.extra_flags]


def cache_key(source: str) -> str:
    h = hashlib.sha256()
    h.update(compiler().encode())
    h.update("\0".join(flags()).encode())
    h.update(source.encode())
    return h.hexdigest()[:32]


def load(source: str) -> ctypes.CDLL:
    """The library built from ``source``, compiling it on a cache miss."""
    key = cache_key(source)
    with _LOCK:
        lib = _LOADED.get(key)
        if lib is not None:
            return lib
    path = os.path.join(cache_dir(), key[:2], key + ".so")
    if not os.path.exists(path):
        _compile(source, path)
    lib = ctypes.CDLL(path)
    with _LOCK:
        _LOADED[key] = lib
    return lib


def _compile(source: str, path: str) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
        src = os.path.join(tmp, "kernel.cpp")
        out = os.path.join(tmp, "kernel.so")
        with open(src, "w") as f:
            f.write(source)
        cmd = [compiler(), *flags(), src, "-o", out]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"C++ compile failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
        # the source sits beside the library, for reading what a cached kernel does
        os.replace(src, path[:-3] + ".cpp")
        os.replace(out, path)  # atomic: a concurrent reader sees the old name or a whole file


def clear_memory_cache() -> None:
    """Forgets the libraries this process loaded (the next load re-opens them from disk)."""
    with _LOCK:
        _LOADED.clear()

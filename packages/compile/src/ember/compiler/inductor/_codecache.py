"""The on-disk kernel cache: kernel source -> shared library, keyed by source and compiler flags.

``~/.cache/ember/compile`` (or ``$EMBER_CACHE_DIR``) holds ``<key>.so`` files. A miss compiles
into a file of this process's own and renames it into place: the rename is atomic, so processes
compiling the same kernel at once each produce a whole library and readers never see half of
one. A hit (in this process, or from an earlier one) costs a ``dlopen``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
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
    if config.cpp.language == "c++":
        names = [os.environ.get("CXX"), "g++", "c++"]
    else:
        names = [os.environ.get("CC"), "gcc", "cc"]
    for name in names:
        path = name and shutil.which(name)
        if path:
            return path
    raise CompileError(f"ember's C++ backend needs a {config.cpp.language} compiler (gcc/g++) on PATH")


def vector_math() -> bool:
    """Whether glibc's libmvec (SIMD exp, log, tanh, ...; glibc >= 2.35) can be linked."""
    if config.cpp.vector_math is not None:
        return config.cpp.vector_math
    global _VECTOR_MATH
    if _VECTOR_MATH is None:
        version = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else ""
        ok = False
        if version.startswith("glibc ") and os.uname().machine == "x86_64":
            major, minor = (int(p) for p in version.split()[1].split(".")[:2])
            ok = (major, minor) >= (2, 35) and ctypes.util.find_library("mvec") is not None
        _VECTOR_MATH = ok
    return _VECTOR_MATH


_VECTOR_MATH = None


def flags() -> list[str]:
    lang = ["-x", "c++", "-std=gnu++17"] if config.cpp.language == "c++" else ["-x", "c", "-std=gnu11"]
    # -fno-trapping-math: lets compares and selects vectorize (values are unchanged: only the
    # floating-point exception flags, which nothing reads, may differ)
    return [*lang, "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math",
            "-fwrapv",
            *config.cpp.extra_flags]


def libraries() -> list[str]:
    return ["-lmvec", "-lm"] if vector_math() else ["-lm"]


def cache_key(source: str) -> str:
    h = hashlib.sha256()
    h.update(compiler().encode())
    h.update("\0".join(flags() + libraries()).encode())
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
        src = os.path.join(tmp, "kernel.c")
        out = os.path.join(tmp, "kernel.so")
        with open(src, "w") as f:
            f.write(source)
        cmd = [compiler(), *flags(), src, "-o", out, *libraries()]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"C++ compile failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
        # the source sits beside the library, for reading what a cached kernel does
        os.replace(src, path[:-3] + (".cpp" if config.cpp.language == "c++" else ".c"))
        os.replace(out, path)  # atomic: a concurrent reader sees the old name or a whole file


def clear_memory_cache() -> None:
    """Forgets the libraries this process loaded (the next load re-opens them from disk)."""
    with _LOCK:
        _LOADED.clear()

"""Triton kernels compiled ahead of their launch and launched through the driver.

A kernel is Python source holding one ``@triton.jit`` function (generated per op family and
argument class, or written by hand). ``kernel()`` compiles it once per signature for the
device's architecture with ``triton.compile`` (no GPU needed for that), keeps the cubin and
its metadata on disk (``$EMBER_CUDA_CACHE`` or ``~/.cache/ember/cuda``) so later processes
skip Triton altogether, loads it with ``cuModuleLoadData`` and returns a ``Launcher``:
Triton's own Python launcher costs ~19 us a call, ours one ``pack_into`` and one ctypes call.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

from . import _driver
from ._driver import check
from ._fastcall import Launcher, make_launcher

_LOADED: dict = {}  # key -> Launcher
_MODULES: dict = {}  # source hash -> imported module
_LOCK = threading.Lock()

# Triton signature type -> Launcher slot kind
_KIND = {"i32": "i32", "i64": "i64", "fp32": "fp32", "fp64": "fp64", "u64": "u64"}


def cache_dir() -> Path:
    root = os.environ.get("EMBER_CUDA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "ember", "cuda")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _arch(index: int) -> int:
    props = _driver.properties(index)
    return props.major * 10 + props.minor


def _import_source(source: str, digest: str):
    mod = _MODULES.get(digest)
    if mod is None:
        folder = cache_dir() / "src"
        folder.mkdir(exist_ok=True)
        path = folder / f"k_{digest[:24]}.py"
        if not path.exists():
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, path)
        name = f"ember_cuda_kernels_{digest[:24]}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # Triton reads the function's globals through its module
        spec.loader.exec_module(mod)
        _MODULES[digest] = mod
    return mod


def compile_cubin(source: str, name: str, signature: dict, constexprs: dict, aligned: tuple,
                  num_warps: int, num_stages: int, arch: int, maxnreg: int | None = None):
    """Compiles with Triton; returns (cubin bytes, metadata dict). Importable without a GPU. ``maxnreg`` caps
    the registers per thread (ptxas spills past it)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    digest = hashlib.sha256(source.encode()).hexdigest()
    fn = getattr(_import_source(source, digest), name)
    sig = {k: ("constexpr" if k in constexprs else v) for k, v in signature.items()}
    names = list(signature)
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    options = backend.parse_options({"num_warps": num_warps, "num_stages": num_stages,
                                     **({} if maxnreg is None else {"maxnreg": maxnreg})})
    compiled = triton.compile(ASTSource(fn, sig, constexprs=dict(constexprs), attrs=attrs), target=target,
                              options=options.__dict__)
    md = compiled.metadata
    meta = {"name": md.name, "shared": int(md.shared), "num_warps": int(md.num_warps),
            "global_scratch_size": int(getattr(md, "global_scratch_size", 0) or 0),
            "profile_scratch_size": int(getattr(md, "profile_scratch_size", 0) or 0)}
    return compiled.asm["cubin"], meta


def kernel(source: str, name: str, signature: dict, constexprs: dict | None = None, aligned: tuple = (),
           num_warps: int = 4, num_stages: int = 3, device: int = 0, maxnreg: int | None = None) -> Launcher:
    """The launcher of ``name`` in ``source`` for this signature (``{arg: triton type}``, constexpr
    args valued in ``constexprs``; ``aligned`` names pointer/int args divisible by 16; ``maxnreg``: a
    register cap per thread, part of the key only when given, so other kernels keep their cache entries)."""
    constexprs = constexprs or {}
    key = (source, name, tuple(signature.items()), tuple(sorted(constexprs.items())), aligned, num_warps,
           num_stages, device) if maxnreg is None else \
        (source, name, tuple(signature.items()), tuple(sorted(constexprs.items())), aligned, num_warps,
         num_stages, ("maxnreg", maxnreg), device)
    launcher = _LOADED.get(key)
    if launcher is not None:
        return launcher
    with _LOCK:
        launcher = _LOADED.get(key)
        if launcher is None:
            launcher = _LOADED[key] = _build(key, source, name, signature, constexprs, aligned, num_warps,
                                             num_stages, device, maxnreg)
    return launcher


def launch(source: str, grid: tuple, args: dict, constexprs: dict, device: int, num_warps: int = 4) -> None:
    """Builds (or takes from the cache) kernel ``k`` of ``source`` for these arguments and launches it on the
    current stream: ``args`` in the kernel's order, tensors passed as pointers to their dtype, Python ints
    as i64; every constexpr named in ``constexprs`` (a build from a signature takes no Python default).
    For hand-written kernels launched now and then; hot paths keep their own launchers."""
    from ._elementwise import TRITON
    from ._streams import current_handle

    sig = {k: ("*" + TRITON[v.dtype]) if hasattr(v, "data_ptr") else "i64" for k, v in args.items()}
    sig.update({k: "constexpr" for k in constexprs})
    launcher = kernel(source, "k", sig, constexprs, (), num_warps, 1, device)
    launcher(grid, current_handle(device), *(v.data_ptr() if hasattr(v, "data_ptr") else v for v in args.values()))


def cubin_for(key, source, name, signature, constexprs, aligned, num_warps, num_stages, arch, maxnreg=None):
    """(cubin, metadata) from the disk cache, compiling (and storing) on a miss."""
    import triton  # noqa: F401 - the version is part of the disk cache key

    digest = hashlib.sha256(repr((key[:-1], arch, triton.__version__)).encode()).hexdigest()[:32]
    folder = cache_dir() / "bin"
    folder.mkdir(exist_ok=True)
    cubin_path, meta_path = folder / f"{digest}.cubin", folder / f"{digest}.json"
    if cubin_path.exists() and meta_path.exists():
        return cubin_path.read_bytes(), json.loads(meta_path.read_text())
    cubin, meta = compile_cubin(source, name, signature, constexprs, aligned, num_warps, num_stages, arch, maxnreg)
    # Both files through a temporary name and os.replace: a reader (another process sharing the cache)
    # sees a whole file or none, never a half-written one; the metadata goes last, as it marks the pair
    # complete.
    _write_atomic(cubin_path, cubin)
    _write_atomic(meta_path, json.dumps(meta).encode())
    return cubin, meta


def _write_atomic(path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _build(key, source, name, signature, constexprs, aligned, num_warps, num_stages, device,
           maxnreg=None) -> Launcher:
    cubin, meta = cubin_for(key, source, name, signature, constexprs, aligned, num_warps, num_stages,
                            _arch(device), maxnreg)
    if meta["profile_scratch_size"]:
        raise RuntimeError(f"kernel {name} needs Triton profile scratch memory, which ember's launcher lacks")
    kinds = ["ptr" if t.startswith("*") else _KIND[t] for k, t in signature.items() if k not in constexprs]
    if meta["global_scratch_size"]:
        # Global scratch (where a kernel writes the tensor descriptors it makes): the launchers append two null
        # scratch pointers after the arguments, so the buffer goes in as one more argument before them (the
        # driver reads as many parameters as the kernel has: the last null is never read).
        return ScratchLauncher(load(cubin, meta, kinds + ["ptr"], device), meta["global_scratch_size"], device)
    return load(cubin, meta, kinds, device)


class ScratchLauncher:
    """A launcher of a kernel that needs Triton's global scratch memory: ``size`` bytes per program, taken from
    the caching allocator on the launch's (current) stream for each launch and given back after it (stream
    order keeps a later launch from reusing the block early)."""

    __slots__ = ("launch", "size", "dev")

    def __init__(self, launch, size: int, device: int):
        self.launch, self.size = launch, size
        self.dev = SimpleNamespace(index=device)

    def __call__(self, grid, stream: int, *args) -> None:
        from ._storage import allocate

        gx, gy, gz = grid if len(grid) == 3 else (tuple(grid) + (1, 1))[:3]
        scratch = allocate(gx * gy * gz * self.size, dev=self.dev)
        self.launch(grid, stream, *args, scratch.data_ptr())


def load(cubin: bytes, meta: dict, kinds: list, device: int) -> Launcher:
    """Loads a cubin into device ``device``'s context and wraps its kernel in a Launcher."""
    _driver.ensure_context(device)
    drv = _driver._driver()
    from ._allocator import allocator

    if allocator(device).capturing:  # a kernel first met inside a CUDA-graph capture
        from ._graphs import relaxed_capture_mode

        with relaxed_capture_mode():
            module = check(drv.cuModuleLoadData(cubin), "cuModuleLoadData")
    else:
        module = check(drv.cuModuleLoadData(cubin), "cuModuleLoadData")
    _keep_modules.append(module)
    fn = check(drv.cuModuleGetFunction(module, meta["name"].encode()), "cuModuleGetFunction")
    if meta["shared"] > 49152:
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        check(drv.cuFuncSetAttribute(fn, attr, meta["shared"]), "cuFuncSetAttribute")
    return make_launcher(int(fn), kinds, meta["num_warps"], meta["shared"], meta["name"])


_keep_modules: list = []  # loaded modules live as long as the process

"""Running generated Triton kernels: the source cache, block-size tuning and the launch.

Sources live on disk under ``<cache_dir>/triton/<hash>.py`` (written to a file of this
process's own and renamed into place, as ``_codecache`` does for libraries): Triton reads a
kernel's source through its module file, and a later process imports the same file.

A launch on a CUDA tensor goes through the device plugin's hooks on its backend
(``Backend.compile_triton``: source + signature + constexprs -> a launcher on a cubin,
cached on disk by the plugin; ``Backend.current_stream``), so compile never imports the plugin
and kernels run on the stream ember's eager ops use. On CPU tensors (``config.cpu_backend =
"triton"``, the tests' path) the kernel runs in Triton's interpreter, in place on the host
memory.

Tuning: the first launch for a size class times each candidate configuration (block sizes,
warps) on the real buffers and keeps the fastest; ``max_autotune`` widens the candidates. A
kernel that reads what it writes (an in-place update) is never re-run for timing. What was
picked is kept on disk (``_triton_cache``): a later process launches it straight away.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
import time
from functools import reduce
from operator import or_

from . import config
from ._codecache import cache_dir
from ._triton import param_name

_MODULES: dict = {}
_all_aligned = "aligned"  # the launcher key of a call whose every pointer and size is a multiple of 16
_LOCK = threading.Lock()
# Launches over fewer elements take the first candidate untimed: they run for microseconds, where
# configurations differ by less than compiling the others costs (the mini-GPT's backward compiled
# ~60 kernels x 3-6 candidates on the H200: 63 s before its first step). max_autotune times all.
TUNE_MIN_ELEMENTS = 1 << 22


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:
        return False
    return True


def interpreter_ready() -> bool:
    """Whether Triton was imported in interpreter mode (``TRITON_INTERPRET=1`` set before the
    first ``import triton``: its own library functions are made interpretable at import)."""
    if not triton_available():
        return False
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.max, InterpretedFunction)


def _patch_interpreter_index() -> None:
    """Triton 3.6's interpreter turns a size into a Python int with ``int(array)`` on a
    one-element 1-d array, which NumPy 2.4 refuses (``for r in range(0, rnumel, RBLOCK)``
    with ``rnumel`` a tensor then fails). Its per-call patch of ``tl.tensor`` is wrapped to
    read the element instead; only the interpreter (the tests' path) is touched."""
    from triton.runtime import interpreter

    if getattr(interpreter, "_ember_index_patch", False):
        return
    original = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = patched
    interpreter._ember_index_patch = True


def backend_for(device):
    """The device backend able to run Triton kernels on ``device``, or None."""
    if device.type == "cpu":
        return "interpreter" if config.cpu_backend == "triton" and interpreter_ready() else None
    try:
        from ember._src.device import get_backend

        backend = get_backend(device.type)
    except Exception:
        return None
    if getattr(backend, "compile_triton", None) is None or not triton_available():
        return None
    return backend


def source_path(source: str) -> str:
    digest = hashlib.sha256(source.encode()).hexdigest()[:32]
    folder = os.path.join(cache_dir(), "triton")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"k{digest}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)  # atomic: readers see no file or a whole one
    return path


def load_module(source: str, interpret: bool):
    """The module of ``source``; ``interpret``: its functions run in Triton's interpreter."""
    path = source_path(source)
    key = (path, interpret)
    with _LOCK:
        mod = _MODULES.get(key)
        if mod is not None:
            return mod
        name = "ember_triton_" + os.path.basename(path)[:-3] + ("_interp" if interpret else "")
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # Triton resolves a kernel's globals through its module
        saved = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
        try:
            spec.loader.exec_module(mod)
        finally:
            if saved is None:
                del os.environ["TRITON_INTERPRET"]
            else:
                os.environ["TRITON_INTERPRET"] = saved
        if interpret:
            from ._triton_libdevice import numpy_libdevice

            mod.libdevice = numpy_libdevice()
        _MODULES[key] = mod
    return mod


def _pow2(n: int) -> int:
    return 1 << max(0, (max(n, 1) - 1).bit_length())


def configs(spec, xnumel: int, rnumel: int, max_autotune: bool) -> list:
    """Candidate ``(XBLOCK, RBLOCK, num_warps)`` for a launch over ``xnumel`` x ``rnumel``."""
    out = []
    if not spec.reduction:
        cap = max(16, _pow2(xnumel))
        sizes = [(1024, 4), (512, 4), (2048, 8)]
        if max_autotune:
            sizes += [(256, 2), (128, 1), (4096, 8), (4096, 16), (8192, 16)]
        for xb, w in sizes:
            xb = min(xb, cap)
            w = max(1, min(w, xb // 128 or 1))
            out.append((xb, 1, w))
    elif spec.persistent and getattr(spec, "outer", False):
        # a short column block (a split column sum's parts: 256 rows of 2304 columns, then the 32
        # parts of each column): a block spans 16-64 columns so each row's load is a whole line,
        # and enough blocks are left for every SM (the second pass over 2304 columns: 144)
        rb = max(2, _pow2(rnumel))
        cap = max(8, 1 << max(0, (xnumel // 128).bit_length() - 1))
        for xb, w in ((max(32, 8192 // rb), 8), (max(16, 4096 // rb), 4), (max(64, 16384 // rb), 16)):
            xb = min(xb, cap, max(1, _pow2(xnumel)))
            out.append((xb, rb, max(1, min(w, xb * rb // 256))))
    elif spec.persistent:
        rb = max(2, _pow2(rnumel))
        # first (the pick of an untuned launch): ~2K elements a block, 8 a thread
        xb = max(1, min(_pow2(xnumel), 2048 // rb))
        out.append((xb, rb, max(1, min(8, xb * rb // 256))))
        xbs = [1, 2, 4, 8, 16, 32, 64] if max_autotune else [1, 2, 4, 16]
        for xb in xbs:
            xb = min(xb, max(1, _pow2(xnumel)))
            # several rows a block share the loads every row reads (a weight): up to 16K elements
            if xb * rb > (32768 if max_autotune else 16384) and xb > 1:
                continue
            elems = xb * rb
            # 8 to 64 elements a thread; more variants under max-autotune
            warps = [max(1, min(16, elems // 2048)), max(1, min(16, elems // 1024)), max(1, min(16, elems // 512))]
            if max_autotune:
                warps += [max(1, min(16, elems // 256)), max(1, min(16, elems // 4096))]
            for w in warps:
                out.append((xb, rb, w))
    elif getattr(spec, "outer", False):
        # rows contiguous in memory, reduced elements strided: a block of many rows reads whole
        # lines (64 float32 rows a line of 256 bytes) where one row a block reads one element
        sizes = [(64, 64, 4), (32, 128, 4), (128, 32, 8)]
        if xnumel < 64 * 128:
            # few columns (GPT-2's 768 LayerNorm/bias gradients: 12 blocks of 64 for 132 SMs): narrower
            # blocks of longer row runs give every SM a block (8 float32 columns still fill a sector)
            sizes = [(8, 256, 4), (16, 256, 4), *sizes] if xnumel <= 16 * 128 else [(16, 256, 4), *sizes]
        if max_autotune:
            sizes += [(16, 256, 4), (256, 16, 8), (64, 128, 8), (4, 512, 4)]
        for xb, rb, w in sizes:
            out.append((min(xb, max(1, _pow2(xnumel))), min(rb, max(2, _pow2(rnumel))), w))
    else:
        sizes = [(1, 2048, 8), (1, 1024, 4), (8, 128, 4)]
        if max_autotune:
            sizes += [(1, 4096, 16), (1, 512, 4), (2, 1024, 8), (16, 64, 4), (32, 32, 4)]
        for xb, rb, w in sizes:
            out.append((min(xb, max(1, _pow2(xnumel))), min(rb, max(2, _pow2(rnumel))), w))
    seen, unique = set(), []
    for c in out:
        if c not in seen:
            seen.add(c)
            unique.append(c)
    return unique


class _HostArg:
    """A host buffer as Triton's interpreter takes a tensor argument (it copies "device"
    storages to the host and back: here they are host memory already, so both are no-ops)."""

    __slots__ = ("_ptr", "dtype")

    def __init__(self, ptr: int, dtype_name: str):
        self._ptr = ptr
        self.dtype = _DtypeName(dtype_name)

    def data_ptr(self):
        return self._ptr

    def untyped_storage(self):
        return self

    def cpu(self):
        return self

    def copy_(self, other):
        return self

    def new_empty(self, *args, **kwargs):
        return self

    def set_(self, *args):
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return ()

    def stride(self):
        return ()


class _DtypeName(str):
    """Triton reads an argument's element type from the end of ``str(arg.dtype)``."""


def signature_of(spec) -> dict:
    """Argument name -> Triton type, in the kernel's argument order."""
    from ._triton_ops import SIG_TYPES

    signature = {}
    for kind, what in spec.params:
        if kind == "ptr":
            signature[what] = "*" + SIG_TYPES[spec.dtypes[what]]
        else:
            signature[param_name(kind, what)] = "fp64" if kind == "number" else "i64"
    signature["xnumel"] = spec.index_type
    signature["XBLOCK"] = "constexpr"
    if spec.reduction:
        signature["RBLOCK"] = "constexpr"
    return signature


class TritonKernel:
    """One generated kernel bound to a device: picks a configuration per size class, launches."""

    def __init__(self, spec, device, backend):
        self.spec = spec
        self.device = device
        self.backend = backend
        self.name = spec.name
        self.interpret = backend == "interpreter"
        self.best: dict = {}  # (xnumel, rnumel) size class -> config
        self.max_autotune = config.max_autotune
        self.signature = signature_of(spec)
        self._launchers: dict = {}  # (config, alignment of each argument) -> device launcher
        self._sized: dict = {}  # (xnumel, rnumel) -> (config, grid)
        self._is_ptr = [kind == "ptr" for kind, _ in spec.params]
        # float arguments (number inputs of the graph) take no part in the alignment key
        self._is_number = [kind == "number" for kind, _ in spec.params]
        self._has_numbers = any(self._is_number)
        self._arg_names = [param_name(kind, what) for kind, what in spec.params if kind != "number"] + ["xnumel"]
        self._index = device.index or 0
        self._stream = backend.current_stream if backend != "interpreter" else None
        if not self.interpret and config.graph_cache:
            from ._triton_cache import load_tuning

            self.best.update(load_tuning(spec, device))

    def __call__(self, *args, xnumel: int, rnumel: int = 1):
        sized = self._sized.get((xnumel, rnumel))
        if sized is not None and not self.interpret:
            # the common call: this size was launched before (a fixed grid, a known configuration)
            cfg, grid = sized
            if self._has_numbers:
                values, ints = self._values(args, xnumel)
            else:
                values = ints = [a.data_ptr() if is_ptr else int(a) for is_ptr, a in zip(self._is_ptr, args)]
                values.append(xnumel)
            launcher = self._launchers.get((cfg, _all_aligned if not reduce(or_, ints) & 15 else
                                            tuple(v & 15 == 0 for v in ints)))
            if launcher is not None:
                launcher(grid, self._stream(self._index), *values)
                return
        if xnumel == 0:
            return  # an empty output: nothing to launch
        cfg = sized[0] if sized is not None else None
        if cfg is None:
            # tuned once per size class (a power of two of rows), looked up per exact size
            key = (_pow2(xnumel), rnumel if self.spec.persistent else _pow2(rnumel))
            cfg = self.best.get(key)
            if cfg is None:
                cfg = self.best[key] = self._choose(args, xnumel, rnumel)
                if not self.interpret and config.graph_cache:
                    from ._triton_cache import store_tuning

                    store_tuning(self.spec, self.device, self.best)  # a later process skips the timing
            self._sized[(xnumel, rnumel)] = (cfg, (-(-xnumel // cfg[0]), 1, 1))
        self._launch(cfg, args, xnumel)

    def site(self, xnumel: int, rnumel: int = 1):
        """A native launch site of this kernel at fixed sizes (``_C.DeviceLaunchSite``), called
        ``site(stream, *args)`` by a compiled wrapper: its first call goes through ``__call__`` (tuning,
        compiling), which arms it with the configuration's launcher and grid; later calls pack and launch
        in C. None where there is none (the interpreter, a core without it, ``config.triton.native_launch``
        off)."""
        if self.interpret or not config.triton.native_launch:
            return None
        from ember import _C

        site_type = getattr(_C, "DeviceLaunchSite", None)
        if site_type is None:
            return None
        return site_type(self._site_fallback, int(xnumel), int(rnumel))

    def _site_fallback(self, site, *args):
        """A site's call off the native path: the Python launch, then the site armed with the launcher this
        call used (where it is a native one) for calls of the same alignment."""
        xnumel, rnumel = site.xnumel, site.rnumel
        self(*args, xnumel=xnumel, rnumel=rnumel)
        sized = self._sized.get((xnumel, rnumel))
        if sized is None or self.interpret or len(args) >= 63:
            return
        values = [a.data_ptr() if is_ptr else int(a) for is_ptr, a in zip(self._is_ptr, args)]
        values.append(xnumel)
        aligned = tuple(v & 15 == 0 for v in values)
        launcher = self._launchers.get((sized[0], _all_aligned if all(aligned) else aligned))
        if launcher is not None and type(launcher).__name__ == "DeviceLauncher" \
                and type(launcher).__module__ == "ember._C" and site.launcher is not launcher:
            site.arm(launcher, sized[1][0], sum(1 << i for i, a in enumerate(aligned) if a))

    def _choose(self, args, xnumel, rnumel):
        candidates = configs(self.spec, xnumel, rnumel, self.max_autotune)
        small = xnumel * rnumel < TUNE_MIN_ELEMENTS and not self.max_autotune
        if len(candidates) == 1 or self.interpret or self.spec.inplace or not config.triton.autotune \
                or small or _capturing(self.device):
            return candidates[0]
        import ember

        timings = []
        for cfg in candidates:
            try:
                self._launch(cfg, args, xnumel)  # compiles and warms
                ember.cuda.synchronize()
                start = time.perf_counter()
                self._launch(cfg, args, xnumel)
                ember.cuda.synchronize()
                once = time.perf_counter() - start
                # enough launches for ~2 ms of work: one launch of a small kernel is all noise
                reps = max(3, min(100, int(2e-3 / max(once, 1e-6))))
                start = time.perf_counter()
                for _ in range(reps):
                    self._launch(cfg, args, xnumel)
                ember.cuda.synchronize()
                timings.append(((time.perf_counter() - start) / reps, cfg))
            except Exception:  # a configuration the device cannot run (registers, shared memory)
                continue
        if not timings:
            return candidates[0]
        return min(timings)[1]

    def _constexprs(self, cfg) -> dict:
        xb, rb, _ = cfg
        out = {"XBLOCK": xb}
        if self.spec.reduction:
            out["RBLOCK"] = rb
        return out

    def _launch(self, cfg, args, xnumel):
        grid = (-(-xnumel // cfg[0]), 1, 1)
        if self.interpret:
            self._interpret(cfg, args, grid, xnumel)
            return
        values, ints = self._values(args, xnumel)
        # which pointers and sizes are multiples of 16 (Triton's vectorization needs to know)
        aligned = tuple(v & 15 == 0 for v in ints)
        key = (cfg, _all_aligned if all(aligned) else aligned)
        launcher = self._launchers.get(key)
        if launcher is None:
            names = tuple(n for n, a in zip(self._arg_names, aligned) if a)
            launcher = self._launchers[key] = self.backend.compile_triton(
                self.spec.source, self.spec.name, self.signature, self._constexprs(cfg), names, cfg[2], 1,
                self._index)
        launcher(grid, self._stream(self._index), *values)

    def _values(self, args, xnumel) -> tuple[list, list]:
        """The launch's argument values, and those of them that are ints (pointers, sizes)."""
        values, ints = [], []
        for is_ptr, is_number, a in zip(self._is_ptr, self._is_number, args):
            if is_number:
                values.append(float(a))
            else:
                values.append(a.data_ptr() if is_ptr else int(a))
                ints.append(values[-1])
        values.append(xnumel)
        ints.append(xnumel)
        return values, ints

    def _interpret(self, cfg, args, grid, xnumel):
        import numpy as np

        from ._triton_ops import SIG_TYPES

        _patch_interpreter_index()
        fn = getattr(load_module(self.spec.source, True), self.spec.name)
        values = []
        for (kind, what), a in zip(self.spec.params, args):
            if kind == "ptr":
                name = {"i1": "bool", "u8": "uint8", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
                        "fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}[
                    SIG_TYPES[self.spec.dtypes[what]]]
                values.append(_HostArg(a.data_ptr(), name))
            elif kind == "number":
                values.append(_float64_scalar(a))
            else:
                values.append(int(a))
        values.append(xnumel)
        with np.errstate(all="ignore"):
            fn[grid[:1]](*values, **self._constexprs(cfg))


def _float64_scalar(value):
    """A float argument as the compiled kernel sees it (a float64 scalar; the interpreter would
    otherwise keep a Python float, which has no ``.to``)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    return tl.tensor(TensorHandle(np.array([float(value)], dtype=np.float64), tl.float64), tl.float64)


def _capturing(device) -> bool:
    if device.type != "cuda":
        return False
    import ember

    try:
        return bool(ember.cuda.is_current_stream_capturing())
    except Exception:
        return False


def compile_for_target(spec, cfg, arch: int = 90, num_stages: int = 1):
    """Compiles ``spec`` for ``sm_<arch>`` without a GPU (Triton's ``triton.compile``); returns
    Triton's compiled kernel (``.asm`` holds ttir, ttgir, llir, ptx, cubin)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    fn = getattr(load_module(spec.source, False), spec.name)
    signature, constexprs = signature_of(spec), {"XBLOCK": cfg[0]}
    if spec.reduction:
        constexprs["RBLOCK"] = cfg[1]
    target = GPUTarget("cuda", arch, 32)
    options = make_backend(target).parse_options({"num_warps": cfg[2], "num_stages": num_stages})
    return triton.compile(ASTSource(fn, signature, constexprs=constexprs), target=target, options=options.__dict__)

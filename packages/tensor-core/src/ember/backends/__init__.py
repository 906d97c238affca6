"""``ember.backends``: the switches PyTorch programs set (``backends.cudnn.benchmark = True``).

There is no cuDNN, MPS or MKL in this build; the flags are kept so programs that set them
run, and ``is_available()`` answers False.
"""

from __future__ import annotations

import contextlib
import sys
import types


def _flags_module(name: str, **flags) -> types.ModuleType:
    module = types.ModuleType(f"{__name__}.{name}")
    module.is_available = lambda: False
    for key, value in flags.items():
        setattr(module, key, value)
    # Registered as a module, so `import ember.backends.cudnn` works as well as the attribute.
    sys.modules[module.__name__] = module
    return module


cudnn = _flags_module("cudnn", enabled=True, benchmark=False, deterministic=False, allow_tf32=True,
                      version=lambda: None, is_acceptable=lambda tensor: False)
def _mps_is_macos_or_newer(major: int, minor: int) -> bool:
    raise RuntimeError("Cannot execute isOnMacOSorNewer() without MPS backend.")


mps = _flags_module("mps", is_built=lambda: False, is_macos_or_newer=_mps_is_macos_or_newer)
mkldnn = _flags_module("mkldnn", enabled=False)
mkl = _flags_module("mkl")
openmp = _flags_module("openmp")
openmp.is_available = lambda: True
cuda = _flags_module("cuda", is_built=lambda: False)
cuda.matmul = types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                                    allow_bf16_reduced_precision_reduction=True)

# Scaled-dot-product-attention backend switches (ember has one CPU implementation: they are
# recorded, reported back, and select nothing).
_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _sdp_switches(kind: str):
    def enable(enabled: bool) -> None:
        _SDP[kind] = bool(enabled)

    def enabled() -> bool:
        return _SDP[kind]

    return enable, enabled


cuda.enable_flash_sdp, cuda.flash_sdp_enabled = _sdp_switches("flash")
cuda.enable_mem_efficient_sdp, cuda.mem_efficient_sdp_enabled = _sdp_switches("mem_efficient")
cuda.enable_math_sdp, cuda.math_sdp_enabled = _sdp_switches("math")
cuda.enable_cudnn_sdp, cuda.cudnn_sdp_enabled = _sdp_switches("cudnn")
cuda.is_flash_attention_available = lambda: False


# --- flags()/set_flags() context managers, verbose switches and the smaller backend modules. ---
# They hold values only: ember has no cuDNN/MKLDNN/NNPACK/opt_einsum kernels for them to steer, so
# every setting is recorded, read back, and restored on leaving a `flags(...)` block, as PyTorch's.


def _flag_setters(module: types.ModuleType, names: tuple, defaults: tuple) -> None:
    def set_flags(*args, **kwargs):
        given = dict(zip(names, args))
        for key, value in kwargs.items():
            if key.lstrip("_") not in names:
                raise TypeError(f"set_flags() got an unexpected keyword argument '{key}'")
            given[key.lstrip("_")] = value
        orig = tuple(getattr(module, n) for n in names)
        for n, value in given.items():
            if value is not None:
                setattr(module, n, value)
        return orig

    @contextlib.contextmanager
    def flags(*args, **kwargs):
        given = dict(zip(names, defaults))
        given.update(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"flags() got an unexpected keyword argument '{key}'")
            given[key] = value
        orig = set_flags(**given)
        try:
            yield
        finally:
            set_flags(*orig)

    set_flags.__module__ = flags.__module__ = module.__name__
    module.set_flags, module.flags = set_flags, flags


cudnn.benchmark_limit = 10
cudnn.fp32_precision = "none"
cudnn.depthwise_kernel = "auto"
_flag_setters(cudnn, ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32", "fp32_precision",
                      "depthwise_kernel"), (False, False, 10, False, True, "none", "auto"))
mkldnn.deterministic = False
mkldnn.allow_tf32 = False
mkldnn.fp32_precision = "none"
mkldnn.is_acl_available = lambda: False
_flag_setters(mkldnn, ("enabled", "deterministic", "allow_tf32", "fp32_precision"), (False, False, True, "none"))
miopen = _flags_module("miopen", immediate=False)
_flag_setters(miopen, ("immediate",), (None,))
nnpack = _flags_module("nnpack", enabled=False)
_flag_setters(nnpack, ("enabled",), (False,))

mkl.VERBOSE_OFF, mkl.VERBOSE_ON = 0, 1
mkldnn.VERBOSE_OFF, mkldnn.VERBOSE_ON, mkldnn.VERBOSE_ON_CREATION = 0, 1, 2


def _verbose_class(module: types.ModuleType, argument: str, allowed: tuple) -> type:
    """``with backends.mkl.verbose(level):``: the library's verbose output switch. ember has no
    MKL/oneDNN to print it, so the level is checked and kept while the block runs."""

    def __init__(self, level):
        if level not in allowed:
            raise AssertionError(f"verbose: unsupported {argument} {level!r}")
        self.level = level
        self._previous = None

    def __enter__(self):
        self._previous = getattr(module, "_verbose_level", 0)
        module._verbose_level = self.level
        return self

    def __exit__(self, *exc):
        module._verbose_level = self._previous
        return False

    return type("verbose", (), {"__init__": __init__, "__enter__": __enter__, "__exit__": __exit__,
                                "__module__": module.__name__})


mkl.verbose = _verbose_class(mkl, "enable", (0, 1))
mkldnn.verbose = _verbose_class(mkldnn, "level", (0, 1, 2))

cpu = _flags_module("cpu")
del cpu.is_available  # torch.backends.cpu has only get_cpu_capability


def _get_cpu_capability() -> str:
    """The best vector instruction set of this CPU among those PyTorch names: "AVX512", "AVX2",
    "DEFAULT" on x86 (read from /proc/cpuinfo); "DEFAULT" elsewhere. ember's native code targets
    the build machine's CPU (docs/deviations.md), so this reports the CPU, not a dispatch choice."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        return "DEFAULT"
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return "DEFAULT"
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "AVX512"
    if "avx2" in flags:
        return "AVX2"
    return "DEFAULT"


cpu.get_cpu_capability = _get_cpu_capability


def _opt_einsum_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("opt_einsum") is not None


opt_einsum = _flags_module("opt_einsum")
opt_einsum.is_available = _opt_einsum_available
opt_einsum.enabled = _opt_einsum_available()
opt_einsum.strategy = "auto" if opt_einsum.enabled else None


def _get_opt_einsum():
    """The opt_einsum package if it is installed, else None."""
    if not _opt_einsum_available():
        return None
    import importlib

    return importlib.import_module("opt_einsum")


opt_einsum.get_opt_einsum = _get_opt_einsum
_flag_setters(opt_einsum, ("enabled", "strategy"), (None, None))

quantized = _flags_module("quantized", engine="x86", supported_engines=["qnnpack", "onednn", "x86", "fbgemm"])
del quantized.is_available
mha = _flags_module("mha")
del mha.is_available
_MHA_FASTPATH = [True]
mha.get_fastpath_enabled = lambda: _MHA_FASTPATH[0]


def _set_fastpath_enabled(value: bool) -> None:
    if not isinstance(value, bool):
        raise TypeError("set_fastpath_enabled(): argument 'enabled' must be bool")
    _MHA_FASTPATH[0] = value


mha.set_fastpath_enabled = _set_fastpath_enabled
kleidiai = _flags_module("kleidiai")
cusparselt = _flags_module("cusparselt", version=lambda: None, get_max_alg_id=lambda: None)

# backends.cuda: the deprecated sdp_kernel context, the preferred-library switches and the cuFFT plan
# cache (with no CUDA device the cache holds nothing).


@contextlib.contextmanager
def _sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True,
                enable_cudnn: bool = True):
    import warnings

    warnings.warn("`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager will be "
                  "removed. Please see `torch.nn.attention.sdpa_kernel()` for the new context manager, with "
                  "updated signature.", FutureWarning, stacklevel=3)
    previous = dict(_SDP)
    _SDP.update(flash=bool(enable_flash), math=bool(enable_math), mem_efficient=bool(enable_mem_efficient),
                cudnn=bool(enable_cudnn))
    try:
        yield
    finally:
        _SDP.update(previous)


cuda.sdp_kernel = _sdp_kernel


class _Backend:
    """A library choice (PyTorch's ``torch._C._LinalgBackend``/``_BlasBackend`` members)."""

    def __init__(self, kind: str, name: str, value: int) -> None:
        self.kind, self.name, self.value = kind, name, value

    def __repr__(self) -> str:
        return f"<{self.kind}.{self.name}: {self.value}>"

    def __str__(self) -> str:
        return f"{self.kind}.{self.name}"


_LINALG = {n.lower(): _Backend("_LinalgBackend", n, i) for i, n in enumerate(("Default", "Cusolver", "Magma"))}
_BLAS = {n.lower(): _Backend("_BlasBackend", n, i) for i, n in enumerate(("Default", "Cublas", "Cublaslt", "Ck"))}
_PREFERRED = {"linalg": _LINALG["default"], "blas": _BLAS["cublas"]}


def _preferred(kind: str, table: dict):
    def preferred(backend=None):
        if backend is None:
            return _PREFERRED[kind]
        if isinstance(backend, str):
            if backend.lower() not in table:
                raise RuntimeError(f"Unknown input value. Choose from: {', '.join(k for k in table)}.")
            _PREFERRED[kind] = table[backend.lower()]
        elif isinstance(backend, _Backend) and backend in table.values():
            _PREFERRED[kind] = backend
        else:
            raise RuntimeError(f"Unknown input value type: {type(backend).__name__}")
        return _PREFERRED[kind]

    preferred.__name__ = preferred.__qualname__ = f"preferred_{kind}_library"
    return preferred


cuda.preferred_linalg_library = _preferred("linalg", _LINALG)
cuda.preferred_blas_library = _preferred("blas", _BLAS)


class _cuFFTPlanCache:
    """The cuFFT plan cache of one device (the CUDA plugin's, ember._cuda._ops_fft; empty without one)."""

    def __init__(self, device_index: int = 0) -> None:
        self.device_index = device_index
        self.max_size = 4096

    @staticmethod
    def _plans():
        import sys

        return sys.modules.get("ember._cuda._ops_fft")  # loaded with the CUDA kernels: None before

    @property
    def size(self) -> int:
        plans = self._plans()
        return plans.plan_cache_size(self.device_index) if plans else 0

    def clear(self) -> None:
        plans = self._plans()
        if plans:
            plans.clear_plan_cache(self.device_index)


class _cuFFTPlanCacheManager:
    def __init__(self) -> None:
        self._caches: dict = {}

    def __getitem__(self, device) -> _cuFFTPlanCache:
        index = device if isinstance(device, int) else getattr(device, "index", None) or 0
        return self._caches.setdefault(index, _cuFFTPlanCache(index))

    def __getattr__(self, name):
        return getattr(self[0], name)

    def __setattr__(self, name, value):
        if name == "_caches":
            object.__setattr__(self, name, value)
        else:
            setattr(self[0], name, value)


cuda.cufft_plan_cache = _cuFFTPlanCacheManager()
cuda.is_ck_sdpa_available = lambda: False

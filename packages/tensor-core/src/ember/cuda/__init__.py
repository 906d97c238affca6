"""``ember.cuda``: what PyTorch programs ask before choosing a device, and the CUDA runtime API.

The CUDA device itself is a plugin (the ``ember-cuda`` distribution, ``pip install
ember[cuda]``) found through the ``ember.plugins`` entry point named "cuda". When it is
installed, every name here is answered by the plugin's API module. Without it this module
answers as PyTorch's CPU build does: ``is_available()`` is False, ``device_count()`` is 0,
seeding and cache calls are accepted and do nothing, and anything that needs a GPU raises
AssertionError ("not compiled with CUDA enabled"). Importing this module costs nothing:
the plugin is looked for on the first call.
"""

from __future__ import annotations

_API: list = []  # [the plugin's api module or None], filled on first use


def _api():
    if not _API:
        from ember._src import plugins

        plugin = plugins.load("cuda")
        _API.append(getattr(plugin, "api", None) if plugin is not None else None)
    return _API[0]


def _no_cuda(what: str):
    # AssertionError, as PyTorch's CPU build raises ("Torch not compiled with CUDA enabled").
    raise AssertionError(f"{what}: ember not compiled with CUDA enabled (no package providing 'cuda' is installed)")


def is_available() -> bool:
    api = _api()
    return bool(api is not None and api.is_available())


def device_count() -> int:
    api = _api()
    return api.device_count() if api is not None else 0


def is_initialized() -> bool:
    api = _api()
    return bool(api is not None and api.is_initialized())


def _is_in_bad_fork() -> bool:
    """Whether this process was forked after CUDA was initialized (never, without a CUDA device)."""
    api = _api()
    probe = getattr(api, "is_in_bad_fork", None) if api is not None else None
    return bool(probe()) if probe is not None else False


def current_device() -> int:
    api = _api()
    if api is None:
        _no_cuda("ember.cuda.current_device()")
    return api.current_device()


def set_device(device) -> None:
    api = _api()
    if api is None:
        _no_cuda("ember.cuda.set_device()")
    api.set_device(device)


def get_device_name(device=None) -> str:
    api = _api()
    if api is None:
        _no_cuda("ember.cuda.get_device_name()")
    return api.get_device_name(device)


def synchronize(device=None) -> None:
    api = _api()
    if api is None:
        _no_cuda("ember.cuda.synchronize()")
    api.synchronize(device)


def manual_seed(seed: int) -> None:
    """Accepted without a GPU, as in PyTorch (the call is silently ignored)."""
    api = _api()
    if api is not None:
        api.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Accepted without a GPU, as in PyTorch (the call is silently ignored)."""
    api = _api()
    if api is not None:
        api.manual_seed_all(seed)


def empty_cache() -> None:
    """Nothing is cached without a GPU."""
    api = _api()
    if api is not None:
        api.empty_cache()


def memory_allocated(device=None) -> int:
    api = _api()
    return api.memory_allocated(device) if api is not None else 0


def max_memory_allocated(device=None) -> int:
    api = _api()
    return api.max_memory_allocated(device) if api is not None else 0


def is_bf16_supported() -> bool:
    api = _api()
    return bool(api is not None and api.is_bf16_supported())


# --- CPU-build answers for the rest of torch.cuda's commonly used names. Each defers to the plugin
# when it provides the name; otherwise it answers as PyTorch's CPU build does (checked in 2.13).


def _plugin_attr(name: str):
    api = _api()
    return getattr(api, name, None) if api is not None else None


def get_rng_state(device="cuda"):
    f = _plugin_attr("get_rng_state")
    if f is None:
        _no_cuda("ember.cuda.get_rng_state()")
    return f(device)


def set_rng_state(new_state, device="cuda") -> None:
    """Accepted and ignored without a GPU (PyTorch's CPU build queues it as a lazy call)."""
    f = _plugin_attr("set_rng_state")
    if f is not None:
        f(new_state, device)


def get_rng_state_all() -> list:
    """One state per device: an empty list without a GPU."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def ipc_collect() -> None:
    f = _plugin_attr("ipc_collect")
    if f is None:
        _no_cuda("ember.cuda.ipc_collect()")
    f()


def memory_reserved(device=None) -> int:
    f = _plugin_attr("memory_reserved")
    return f(device) if f is not None else 0


def max_memory_reserved(device=None) -> int:
    f = _plugin_attr("max_memory_reserved")
    return f(device) if f is not None else 0


def memory_cached(device=None) -> int:
    """Deprecated name of ``memory_reserved``."""
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated name of ``max_memory_reserved``."""
    return max_memory_reserved(device)


def memory_stats(device=None) -> dict:
    """An empty ordered dict without a GPU (PyTorch's CPU build returns ``OrderedDict()``)."""
    import collections

    f = _plugin_attr("memory_stats")
    return f(device) if f is not None else collections.OrderedDict()


def memory_stats_as_nested_dict(device=None) -> dict:
    f = _plugin_attr("memory_stats_as_nested_dict")
    if f is not None:
        return f(device)
    if _plugin_attr("memory_stats") is None:
        return {}
    # The plugin's flat "a.b.c" keys, nested.
    nested: dict = {}
    for key, value in memory_stats(device).items():
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def _reset_stats(name: str, what: str):
    def reset(device=None) -> None:
        f = _plugin_attr(name)
        if f is None:
            _no_cuda(f"ember.cuda.{what}()")
        f(device)

    reset.__name__ = reset.__qualname__ = what
    return reset


reset_accumulated_memory_stats = _reset_stats("reset_accumulated_memory_stats", "reset_accumulated_memory_stats")
reset_max_memory_cached = _reset_stats("reset_peak_memory_stats", "reset_max_memory_cached")


def get_arch_list() -> list:
    """The architectures the CUDA code was built for: none without a GPU build."""
    f = _plugin_attr("get_arch_list")
    return f() if f is not None else []


def get_gencode_flags() -> str:
    arch_list = get_arch_list()
    return " ".join(f"-gencode compute={a.split('_')[0]},code={a}" for a in arch_list) if arch_list else ""


def is_tf32_supported() -> bool:
    if not is_available():
        return False
    return _api().get_device_capability()[0] >= 8


def seed() -> None:
    """Accepted without a GPU (ignored), as in PyTorch."""
    f = _plugin_attr("seed")
    if f is not None:
        f()


def seed_all() -> None:
    f = _plugin_attr("seed_all")
    if f is not None:
        f()


def initial_seed() -> int:
    f = _plugin_attr("initial_seed")
    if f is None or not is_available():
        _no_cuda("ember.cuda.initial_seed()")
    return f()


def mem_get_info(device=None):
    f = _plugin_attr("mem_get_info")
    if f is None:
        _no_cuda("ember.cuda.mem_get_info()")
    return f(device)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    f = _plugin_attr("memory_summary")
    if f is None:
        _no_cuda("ember.cuda.memory_summary()")
    return f(device, abbreviated)


reset_peak_memory_stats = _reset_stats("reset_peak_memory_stats", "reset_peak_memory_stats")
reset_max_memory_allocated = _reset_stats("reset_max_memory_allocated", "reset_max_memory_allocated")


has_half = True
has_magma = False
default_generators: tuple = ()


class device_of:
    """Context manager that makes the tensor's device current (a no-op for a CPU tensor)."""

    def __init__(self, obj):
        self.idx = obj.get_device() if obj.is_cuda else -1
        self.prev_idx = -1

    def __enter__(self):
        if self.idx != -1:
            self.prev_idx = current_device()
            if self.prev_idx != self.idx:
                set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx != -1 and self.prev_idx != self.idx:
            set_device(self.prev_idx)
        return False


def can_device_access_peer(device, peer_device) -> bool:
    f = _plugin_attr("can_device_access_peer")
    if f is None:
        _no_cuda("ember.cuda.can_device_access_peer()")
    return f(device, peer_device)


_SYNC_DEBUG_MODE = [0]


def set_sync_debug_mode(debug_mode) -> None:
    if not is_available():
        _no_cuda("ember.cuda.set_sync_debug_mode()")
    if isinstance(debug_mode, str):
        names = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in names:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = names[debug_mode]
    _SYNC_DEBUG_MODE[0] = int(debug_mode)


def get_sync_debug_mode() -> int:
    if not is_available():
        _no_cuda("ember.cuda.get_sync_debug_mode()")
    return _SYNC_DEBUG_MODE[0]


def set_per_process_memory_fraction(fraction, device=None) -> None:
    f = _plugin_attr("set_per_process_memory_fraction")
    if f is None:
        _no_cuda("ember.cuda.set_per_process_memory_fraction()")
    f(fraction, device)


def get_per_process_memory_fraction(device=None) -> float:
    f = _plugin_attr("get_per_process_memory_fraction")
    if f is None:
        _no_cuda("ember.cuda.get_per_process_memory_fraction()")
    return f(device)


def current_blas_handle():
    f = _plugin_attr("current_blas_handle")
    if f is None:
        _no_cuda("ember.cuda.current_blas_handle()")
    return f()


class CudaError(RuntimeError):
    """A CUDA runtime error code with its message."""

    def __init__(self, code: int) -> None:
        self.code = code
        super().__init__(f"CUDA error {code}")


class DeferredCudaCallError(Exception):
    pass


class _CudaLegacyTensorType(type):
    """``ember.cuda.FloatTensor`` and friends: isinstance holds for a CUDA tensor of the dtype;
    calling one builds the tensor on the current CUDA device (without one: PyTorch's TypeError)."""

    dtype: object

    def __instancecheck__(cls, obj) -> bool:
        from ember._src.tensor import Tensor

        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cuda"

    def __call__(cls, *args, device=None):
        if not is_available():
            raise TypeError(f"type torch.cuda.{cls.__name__} not available. Torch not compiled with CUDA enabled.")
        import ember

        return getattr(ember, cls.__name__)(*args).to("cuda" if device is None else device)

    @property
    def is_cuda(cls) -> bool:
        return True


def _cuda_legacy(name: str, dtype_name: str) -> type:
    from ember._src import dtypes

    return _CudaLegacyTensorType(name, (), {"dtype": getattr(dtypes, dtype_name), "__module__": "ember.cuda",
                                            "__qualname__": name})


FloatTensor = _cuda_legacy("FloatTensor", "float32")
DoubleTensor = _cuda_legacy("DoubleTensor", "float64")
HalfTensor = _cuda_legacy("HalfTensor", "float16")
BFloat16Tensor = _cuda_legacy("BFloat16Tensor", "bfloat16")
ByteTensor = _cuda_legacy("ByteTensor", "uint8")
CharTensor = _cuda_legacy("CharTensor", "int8")
ShortTensor = _cuda_legacy("ShortTensor", "int16")
IntTensor = _cuda_legacy("IntTensor", "int32")
LongTensor = _cuda_legacy("LongTensor", "int64")
BoolTensor = _cuda_legacy("BoolTensor", "bool")


def __getattr__(name):
    # ember.cuda.amp (deprecated aliases) is loaded on first use: it needs the rest of ember.
    if name in ("memory", "random", "nvtx"):
        import importlib

        return importlib.import_module(f"ember.cuda.{name}")
    if name == "amp":
        import importlib

        return importlib.import_module("ember.cuda.amp")
    if not name.startswith("__"):
        api = _api()
        if api is not None and hasattr(api, name):
            return getattr(api, name)
    raise AttributeError(f"module 'ember.cuda' has no attribute '{name}'")

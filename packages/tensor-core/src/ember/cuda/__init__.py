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


def __getattr__(name):
    # ember.cuda.amp (deprecated aliases) is loaded on first use: it needs the rest of ember.
    if name == "amp":
        import importlib

        return importlib.import_module("ember.cuda.amp")
    if not name.startswith("__"):
        api = _api()
        if api is not None and hasattr(api, name):
            return getattr(api, name)
    raise AttributeError(f"module 'ember.cuda' has no attribute '{name}'")

"""ember: tensors with PyTorch's API, native CPU kernels, and packages that plug in above.

This file belongs to ``ember-tensor-core``. Its first statement keeps the ``ember``
namespace open so that ``ember.autograd``, ``ember.nn``, ... (other distributions) are
found in every install mode (docs/packaging.md).
"""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from ember._src._native import _C  # noqa: E402,F401  (preloads OpenBLAS, then imports ember._C)
from ember._src.api import *  # noqa: E402,F401,F403
from ember._src.api import __all__ as _api_all  # noqa: E402
from ember._src.ops.nn.tbc_permuted import AcceleratorError, OutOfMemoryError  # noqa: E402,F401
from ember._src import torch_alias as _torch_alias  # noqa: E402

_torch_alias.install()  # `sys.modules['torch'] = ember` then `import torch.nn` (see the module)

# This distribution's public subpackages and modules, imported on first attribute access (PEP 562):
# `ember.randn(3) + 1` needs none of them, and each one imported costs its unmarshal (issue 18:
# `import ember` < 0.1 s). They are in `dir(ember)` before that, `hasattr`, `from ember import linalg`
# and `import ember.linalg` behave as if imported eagerly, and `ember.linalg` is the module object
# `import ember.linalg` gives (the import system sets it on ember once imported).
_LAZY_SUBMODULES = frozenset((
    "accelerator", "amp", "backends", "cpu", "cuda", "fft", "functional", "futures", "hub", "linalg", "masked",
    "mps", "nested", "profiler", "random", "return_types", "serialization", "signal", "sparse", "special",
    "storage", "testing", "torch_version", "types", "version", "xpu",
))
# Top-level names that live in such a module: name -> (module, attribute). torch.GradScaler is
# torch.amp.GradScaler, torch.save/load are torch.serialization's.
_LAZY_NAMES = {
    "GradScaler": ("amp", "GradScaler"),
    "load": ("serialization", "load"),
    "save": ("serialization", "save"),
    "__version__": ("version", "__version__"),
}


def __dir__():
    return sorted({*globals(), *_LAZY_SUBMODULES, *_LAZY_NAMES})


# Subpackages provided by other distributions; resolved on first attribute access so that
# `ember.nn` works without `import ember.nn`, and the core never imports them itself.
_OPTIONAL_SUBPACKAGES = (
    "autograd", "nn", "optim", "utils", "distributions", "func", "compiler", "fx", "_dynamo", "_logging",
    "export", "onnx", "jit", "distributed", "multiprocessing", "library", "_higher_order_ops",
    "_inductor", "_export", "_ops", "_subclasses", "_jit_internal",
)


_FROM_NN = frozenset(("grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator", "max_pool3d",
                      "ctc_loss", "embedding_bag"))


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module("ember." + name)  # also sets it on ember: __getattr__ runs once
    if name in _LAZY_NAMES:
        import importlib

        module, attribute = _LAZY_NAMES[name]
        value = getattr(importlib.import_module("ember." + module), attribute)
        globals()[name] = value
        return value
    if name == "__all__":  # `from ember import *`: every public name, lazy ones too (ember keeps no list)
        return [n for n in __dir__() if not n.startswith("_")]
    if name in _OPTIONAL_SUBPACKAGES:
        import importlib

        try:
            return importlib.import_module("ember." + name)
        except ModuleNotFoundError as exc:
            if exc.name != "ember." + name:
                raise
            raise AttributeError(
                f"module 'ember' has no attribute '{name}': install the package that provides ember.{name}"
            ) from None
    if name in ("__config__", "quasirandom", "_utils", "_tensor", "mtia"):  # torch.__config__, ...: on first use
        import importlib

        return importlib.import_module("ember." + name)
    if name == "vmap":  # torch.vmap is torch.func.vmap; ember.func ships with ember-autograd
        try:
            return __getattr__("func").vmap  # an optional subpackage: the core imports no upper package
        except AttributeError:
            raise AttributeError("ember.vmap needs the 'ember-autograd' package") from None
    if name in _FROM_NN:  # ATen-style nn entry points (torch.grid_sampler, torch.ctc_loss, ...) live in ember-nn
        import importlib

        nn = __getattr__("nn")  # an optional subpackage: the core imports no upper package
        return getattr(importlib.import_module(nn.__name__ + "._aten_entry"), name)
    if name == "while_loop":  # torch.while_loop is torch._higher_order_ops.while_loop (ember-compile)
        return __getattr__("_higher_order_ops").while_loop
    if name in ("SymInt", "SymFloat", "SymBool"):  # symbolic sizes come with ember-compile's tracer
        import importlib

        try:
            compiler = __getattr__("compiler")  # an optional subpackage: the core imports no upper package
        except AttributeError:
            raise AttributeError(f"ember.{name} needs the 'ember-compile' package") from None
        return getattr(importlib.import_module(compiler.__name__ + ".symbolic_shapes"), name)
    if name in ("compile", "cond"):
        from ember._src import plugins

        compiler = plugins.load("compile")
        if compiler is None:
            raise AttributeError(f"ember.{name} needs the 'ember-compile' package")
        return getattr(compiler, name)
    raise AttributeError(f"module 'ember' has no attribute '{name}'")

"""ember: tensors with PyTorch's API, native CPU kernels, and packages that plug in above.

This file belongs to ``ember-tensor-core``. Its first statement keeps the ``ember``
namespace open so that ``ember.autograd``, ``ember.nn``, ... (other distributions) are
found in every install mode (docs/packaging.md).
"""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from ember._src._native import _C  # noqa: E402,F401  (preloads OpenBLAS, then imports ember._C)
from ember._src.api import *  # noqa: E402,F401,F403
from ember._src.api import __all__ as _api_all  # noqa: E402
from ember import accelerator, amp, backends, cpu, cuda, fft, linalg, profiler, random, sparse, special, testing  # noqa: E402,F401,E501
from ember import futures, masked, mps, nested, storage, types, xpu  # noqa: E402,F401

from ember.amp import GradScaler  # noqa: E402,F401  (torch.GradScaler is torch.amp.GradScaler)
from ember._src.ops.nn.tbc_permuted import AcceleratorError, OutOfMemoryError  # noqa: E402,F401

from ember import functional, hub, return_types, signal, torch_version, version  # noqa: E402,F401

__version__ = version.__version__

from ember._src import torch_alias as _torch_alias  # noqa: E402

_torch_alias.install()  # `sys.modules['torch'] = ember` then `import torch.nn` (see the module)

# Subpackages provided by other distributions; resolved on first attribute access so that
# `ember.nn` works without `import ember.nn`, and the core never imports them itself.
_OPTIONAL_SUBPACKAGES = (
    "autograd", "nn", "optim", "utils", "distributions", "func", "compiler", "fx", "_dynamo", "_logging",
    "export", "onnx", "jit", "distributed", "multiprocessing", "library", "_higher_order_ops",
    "_inductor", "_export", "_ops", "_subclasses", "_jit_internal",
)


_FROM_NN = frozenset(("grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator", "max_pool3d",
                      "ctc_loss"))


def __getattr__(name):
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

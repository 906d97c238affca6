"""``ember.autograd``: reverse- and forward-mode automatic differentiation.

The engine is active as soon as the package is installed: the core loads it through the
``ember.plugins`` entry point the first time a tensor requires grad.
"""

from __future__ import annotations

import importlib as _importlib

from ember._src.grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled

from . import grad_mode, graph, profiler, profiler_util
from ._engine import _is_checkpoint_valid, backward, grad
from ._plugin import plugin as _plugin
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from .function import Function, FunctionCtx, InplaceFunction, once_differentiable
from .grad_mode import enforce_grad_layout_policy, is_multithreading_enabled, set_multithreading_enabled
from .graph import SavedTensor
from .variable import Variable

_plugin.install()

__all__ = [
    "Function",
    "FunctionCtx",
    "InplaceFunction",
    "Variable",
    "backward",
    "SavedTensor",
    "detect_anomaly",
    "enforce_grad_layout_policy",
    "enable_grad",
    "forward_ad",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "grad_mode",
    "graph",
    "is_multithreading_enabled",
    "is_view_replay_enabled",
    "inference_mode",
    "no_grad",
    "once_differentiable",
    "profiler",
    "set_detect_anomaly",
    "set_grad_enabled",
    "set_multithreading_enabled",
]

def variable(*args, **kwargs):
    """PyTorch's removed factory (the name shadows the ``variable`` submodule there too, whose
    ``Variable`` stays importable from ``ember.autograd.variable``)."""
    raise RuntimeError("torch.autograd.variable(...) is deprecated, use torch.tensor(...) instead")


def is_view_replay_enabled() -> bool:
    """Whether autograd replays the chain of view ops to rebuild a view (PyTorch's opt-in for
    backends without as_strided). ember regenerates views from their base's geometry, so always
    False."""
    return False


# Provided by sibling modules that may land separately: resolved on first access.
_LAZY_MODULES = ("functional", "forward_ad", "gradcheck", "profiler")


def __getattr__(name: str):
    if name in ("gradcheck", "gradgradcheck"):
        module = _importlib.import_module(f"{__name__}.gradcheck")
        globals()["gradcheck"] = module.gradcheck  # the function shadows its module, as in PyTorch
        globals()["gradgradcheck"] = module.gradgradcheck
        return globals()[name]
    if name in _LAZY_MODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

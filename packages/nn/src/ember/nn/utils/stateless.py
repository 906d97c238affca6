"""``functional_call``: run a module with some parameters and buffers temporarily replaced.

The implementation lives in ``ember.func`` (ember-autograd); this is PyTorch's deprecated alias.
"""

from __future__ import annotations

import warnings

from ..modules.module import Module

__all__ = ["functional_call"]


def functional_call(module: Module, parameters_and_buffers: dict, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):
    """Deprecated alias of ``ember.func.functional_call`` (a single dict only)."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed "
                  "in a future version of PyTorch. Please use `torch.func.functional_call` instead which is a "
                  "drop-in replacement.", FutureWarning, stacklevel=2)
    from ember.func._functional_call import functional_call_single  # ember.func loads on first use

    return functional_call_single(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights,
                                  strict=strict)


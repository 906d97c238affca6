"""``ember.autograd.Variable``: PyTorch's legacy tensor wrapper.

Since PyTorch 0.4 a Variable *is* a Tensor: constructing one returns a detached tensor that
shares the data, and ``isinstance(t, Variable)`` holds for every tensor.
"""

from __future__ import annotations

import warnings

from ember import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data=None, requires_grad=False, volatile=False)`` -> Tensor."""

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if data is None:
            import ember

            result = ember.empty(0)
        elif isinstance(data, Tensor):
            result = data.detach()
        else:
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if requires_grad:
            result.requires_grad_(True)  # raises PyTorch's RuntimeError for integer dtypes
        return result

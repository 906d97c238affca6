"""Tensor methods PyTorch keeps for older code or for ``load_state_dict``: ``is_nonzero``,
``is_distributed``, ``is_set_to``, the deprecated out-of-place ``resize``/``resize_as``,
``to_sparse_coo``, ``module_load``, ``storage_type`` and the ``xpu``/``mtia``/``ipu`` moves (which, as in
PyTorch's CPU build, have no device to move to)."""

from __future__ import annotations

import warnings

from .optable import declare
from .runtime import is_nonzero  # noqa: F401  (bound as a method by the table below)
from .runtime_compat import is_distributed  # noqa: F401
from .tensor import Tensor


def is_set_to(self: Tensor, tensor: Tensor) -> bool:
    """True when both tensors view the same memory the same way (storage, offset, sizes, strides)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"is_set_to(): argument 'tensor' (position 1) must be Tensor, not {type(tensor).__name__}")
    return (self._storage is tensor._storage and self._offset == tensor._offset and self._shape == tensor._shape
            and self._stride == tensor._stride)


def _resize_to(self: Tensor, sizes: tuple, what: str) -> Tensor:
    n = 1
    for s in sizes:
        n *= s
    if n != self.numel():
        raise RuntimeError(f"requested resize to {'x'.join(map(str, sizes))} ({n} elements in total), but the "
                           f"given tensor has a size of {'x'.join(map(str, self.shape))} ({self.numel()} elements). "
                           f"autograd's {what} can only change the shape of a given tensor, while preserving the "
                           "number of elements. ")
    return self.contiguous().view(sizes)


def resize(self: Tensor, *sizes) -> Tensor:
    """Deprecated: a reshaped tensor of the same number of elements (use ``reshape``)."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    return _resize_to(self, tuple(sizes), "resize")


def resize_as(self: Tensor, tensor: Tensor) -> Tensor:
    """Deprecated: ``self`` reshaped to ``tensor``'s shape (same number of elements)."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    return _resize_to(self, tuple(tensor.shape), "resize")


def to_sparse_coo(self: Tensor) -> Tensor:
    """The COO sparse form of a strided tensor (``to_sparse()``)."""
    return self.to_sparse()


def module_load(self: Tensor, other: Tensor, assign: bool = False) -> Tensor:
    """How ``nn.Module.load_state_dict`` turns ``other`` into this parameter's new value: ``other``
    itself with ``assign``, else ``self`` with ``other``'s values copied in (detached)."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()


def storage_type(self: Tensor) -> type:
    """The legacy typed-storage class of the tensor's dtype (``ember.FloatStorage`` for float32)."""
    from . import storage

    for name in dir(storage):
        cls = getattr(storage, name)
        if name.endswith("Storage") and isinstance(cls, type) and getattr(cls, "dtype", None) is self.dtype \
                and name not in ("TypedStorage", "UntypedStorage"):
            return cls
    raise RuntimeError(f"storage_type(): no legacy storage class for {self.dtype}")


def xpu(self: Tensor, device=None, non_blocking: bool = False, memory_format=None) -> Tensor:
    """A copy on an Intel GPU: ember has none, so this raises PyTorch's CPU-build AssertionError."""
    raise AssertionError("Torch not compiled with XPU enabled")


def mtia(self: Tensor, device=None, non_blocking: bool = False, memory_format=None) -> Tensor:
    """A copy on an MTIA accelerator: ember has none (PyTorch's CPU build raises the same)."""
    raise AssertionError("Torch not compiled with MTIA enabled.")


def ipu(self: Tensor, device=None, non_blocking: bool = False, memory_format=None) -> Tensor:
    """A copy on a Graphcore IPU: ember has none (PyTorch's CPU build raises the same RuntimeError)."""
    raise RuntimeError("PyTorch is not linked with support for ipu devices")


declare(__name__, """
is_nonzero       method
is_distributed   method
is_set_to        method
resize           method
resize_as        method
to_sparse_coo    method
module_load      method
storage_type     method
xpu              method
mtia             method
ipu              method
""")

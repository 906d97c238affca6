"""Tensor introspection and memory helpers: is_signed/is_inference/is_neg/isreal, get_device,
is_storage, detach, share_memory_/is_shared, pin_memory/is_pinned, cuda, output_nr,
const_data_ptr, the legacy ``Tensor.new`` constructor, and apply_/map_/map2_.

apply_/map_/map2_ call a Python function on each element: that is their documented
semantics (PyTorch's too), so they are the one place elements pass through Python.
"""

from __future__ import annotations

import numbers

from .. import dtypes
from .._native import _C
from ..device import _BACKENDS, META, get_backend, to_device
from ..optable import declare
from ..shapes import Size
from ..tensor import Tensor
from ._common import type_name
from .creation.factories import empty, ones_like, tensor
from .pointwise.complex import imag
from .pointwise.elementwise import eq_op
from .shape import views


def _tensor_arg(name: str, input) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


def is_signed(input: Tensor) -> bool:
    _tensor_arg("is_signed", input)
    return input.dtype.is_signed


def is_inference(input: Tensor) -> bool:
    """Whether ``input``'s memory was allocated under ``inference_mode`` (views share the flag)."""
    _tensor_arg("is_inference", input)
    return input._storage.inference


def is_neg(input: Tensor) -> bool:
    """Always False: ember negates eagerly, it has no lazy negative bit."""
    _tensor_arg("is_neg", input)
    return False


def isreal(input: Tensor) -> Tensor:
    """True where the element has no imaginary part (everywhere for a real dtype)."""
    _tensor_arg("isreal", input)

    if not input.dtype.is_complex:
        return ones_like(input, dtype=dtypes.bool)

    return eq_op(imag(input), 0)


def get_device(input: Tensor) -> int:
    """-1 for CPU (and meta) tensors, the device index otherwise, as in PyTorch."""
    _tensor_arg("get_device", input)
    return input.get_device()


def is_storage(obj, /) -> bool:
    from ..storage import TypedStorage

    return isinstance(obj, (_C.Storage, TypedStorage))


def detach(input: Tensor) -> Tensor:
    _tensor_arg("detach", input)
    return views.detach(input)


def const_data_ptr(self: Tensor) -> int:
    return self.data_ptr()


def output_nr(self: Tensor) -> int:
    """Which output of its ``grad_fn`` this tensor is (0 for leaves and single-output ops)."""
    meta = self._autograd_meta
    return 0 if meta is None else getattr(meta, "output_nr", 0)


# -- memory -------------------------------------------------------------------------------------

def share_memory_(self: Tensor) -> Tensor:
    """Moves the storage into shared memory (a memfd mapping) in place: every view of it, and
    any process it is sent to or forked into, sees the same memory. A no-op if already shared."""
    self._storage.share_memory_()
    return self


def is_shared(self: Tensor) -> bool:
    return self._storage.is_shared()


def _no_accelerator():
    raise RuntimeError("Cannot access accelerator device when none is available.")


def _pinning_backend():
    """The accelerator plugin that provides page-locked host memory, or None (CPU-only install)."""

    for name in ("cuda",):
        try:
            backend = _BACKENDS.get(name) or get_backend(name)
        except (AssertionError, RuntimeError):
            continue
        if backend.pin_memory is not None:
            return backend
    return None


def pin_memory(self: Tensor, device=None) -> Tensor:
    """A copy in page-locked host memory (needs an accelerator plugin; PyTorch's CPU build raises too)."""
    backend = _pinning_backend()
    if backend is None:
        _no_accelerator()
    if self._device.type != "cpu":
        raise RuntimeError(f"cannot pin '{self._device.type}' memory: only dense CPU tensors can be pinned")
    return backend.pin_memory(self)


def is_pinned(self: Tensor, device=None) -> bool:
    if self._device.type != "cpu":
        return False

    backend = _BACKENDS.get("cuda")  # nothing is pinned unless the plugin is already in use
    return bool(backend is not None and backend.is_pinned is not None and backend.is_pinned(self))


def cuda(self: Tensor, device=None, non_blocking: bool = False, memory_format=None) -> Tensor:
    if device is None:
        target = to_device("cuda")
    elif isinstance(device, int):
        target = to_device(device)
    else:
        target = to_device(device)
        if target.type != "cuda":
            raise RuntimeError(f"Invalid device, must be cuda device, got {target}")
    get_backend("cuda")  # raises as PyTorch's CPU build does when no CUDA backend is installed
    return views.to(self, target)


# -- the legacy constructor ---------------------------------------------------------------------

def new(self: Tensor, *args, device=None) -> Tensor:
    """``x.new(2, 3)`` (uninitialized, of ``x``'s dtype and device), ``x.new(data)``, ``x.new()``."""

    dev = self._device if device is None else to_device(device)
    if not args:
        return empty((0,), dtype=self.dtype, device=dev)
    if len(args) == 1:
        a = args[0]
        if isinstance(a, Tensor):
            if a.dtype is not self.dtype:
                raise TypeError(f"new(): expected a tensor of type {type_name(self.dtype)}, got "
                                f"{type_name(a.dtype)}")
            return views.alias_op(a)
        from ..storage import is_storage_object, tensor_over_storage

        if is_storage_object(a):
            return tensor_over_storage(a, self.dtype)
        if not isinstance(a, Size) and (isinstance(a, (list, tuple)) or hasattr(a, "__array_interface__")):
            return tensor(a, dtype=self.dtype, device=dev)
    return empty(*args, dtype=self.dtype, device=dev)


# -- per-element Python callables ---------------------------------------------------------------

def _check_python_fill(self: Tensor, name: str) -> None:
    if self._requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use var.detach().{name}() "
                           "instead.")


def _store(self: Tensor, values: list) -> Tensor:
    for v in values:
        if not isinstance(v, numbers.Number):
            raise TypeError(f"'{type(v).__name__}' object cannot be interpreted as a number of type "
                            f"{type_name(self.dtype)}")
    if self.dtype is dtypes.bool:
        values = [bool(v) for v in values]
    elif not (self.dtype.is_floating_point or self.dtype.is_complex):
        values = [int(v) for v in values]  # truncates toward zero, as a C++ cast
    views.copy_(self, views.reshape(tensor(values, dtype=self.dtype), self._shape))
    return self


def _elements(t: Tensor) -> list:
    return views.tolist(views.reshape(t, (-1,)))


def apply_(self: Tensor, callable) -> Tensor:
    """Replaces each element ``v`` by ``callable(v)``, on the CPU."""
    _check_python_fill(self, "apply_")
    if self._device is META:
        return self
    return _store(self, [callable(v) for v in _elements(self)])


def _operand(self: Tensor, other, name: str, arg: str, pos: int) -> Tensor:
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not {type(other).__name__}")
    if other.dtype is not self.dtype:
        raise TypeError(f"{name}: expected ember.{type_name(self.dtype)}Tensor for '{arg}' (got "
                        f"ember.{type_name(other.dtype)}Tensor)")
    return views.expand_op(other, self._shape)


def map_(self: Tensor, tensor: Tensor, callable) -> Tensor:
    """``self[i] = callable(self[i], tensor[i])`` with ``tensor`` broadcast to ``self``."""
    _check_python_fill(self, "map_")
    other = _operand(self, tensor, "map_", "other", 1)
    if self._device is META:
        return self
    return _store(self, [callable(a, b) for a, b in zip(_elements(self), _elements(other))])


def map2_(self: Tensor, x: Tensor, y: Tensor, callable) -> Tensor:
    """``self[i] = callable(self[i], x[i], y[i])`` with ``x`` and ``y`` broadcast to ``self``."""
    _check_python_fill(self, "map2_")
    a = _operand(self, x, "map2_", "x", 1)
    b = _operand(self, y, "map2_", "y", 2)
    if self._device is META:
        return self
    values = [callable(u, v, w) for u, v, w in zip(_elements(self), _elements(a), _elements(b))]
    return _store(self, values)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
apply_                      method
const_data_ptr              method
cuda                        method
detach                      function method=views.detach
get_device                  function
is_inference                function method
is_neg                      function method
is_pinned                   method
is_shared                   method
is_signed                   function
is_storage                  function
isreal                      function method
map2_                       method
map_                        method
new                         method
output_nr                   property
pin_memory                  method
share_memory_               method
""")

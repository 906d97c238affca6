"""Lazy tensors: the values a capture has recorded but not computed yet.

A ``LazyTensor`` is an ``ember.Tensor`` whose metadata (shape, strides, offset, dtype, the
REAL device, requires_grad) is exact and whose storage is a data-less meta storage. It
names one value of the recorder's pending segment (``_lz_v``) and keeps the meta tensor its
op's meta kernel produced (``_lz_meta``), which is what the next op's meta kernel reads.

When the segment runs, each live lazy tensor takes over the real result's fields and its
class becomes ``Tensor`` again (``materialize``): user code that kept a reference now holds
an ordinary tensor, with the same identity it had during tracing.

The class has no slots of its own, so ``__class__`` assignment between it and ``Tensor`` is
allowed; its bookkeeping lives in the instance ``__dict__`` every Tensor already has.
"""

from __future__ import annotations

from ember import _C
from ember._src.dispatch import sync_pending
from ember._src.tensor import Tensor
from ember._src.torch_function import _disabled_torch_function_impl

_GRAD_FN = Tensor.__dict__["grad_fn"]  # the slot behind Tensor.grad_fn
_SET_GRAD_FN = _GRAD_FN.__set__


class LazyTensor(Tensor):
    """A recorded, not yet computed, tensor (see the module docstring)."""

    __torch_function__ = _disabled_torch_function_impl  # not dispatched on (ember.overrides)

    __slots__ = ()

    @property
    def grad_fn(self):
        # A result that requires grad has a backward node in eager: it exists once computed.
        if self._requires_grad and "_lz_v" in self.__dict__:
            sync_pending(self, "Tensor.grad_fn")
        return _GRAD_FN.__get__(self, Tensor)

    @grad_fn.setter
    def grad_fn(self, value) -> None:
        _SET_GRAD_FN(self, value)

    # Python-level methods of Tensor that do not go through an op: each either syncs first
    # (the value is needed) or is answered from metadata.

    @property
    def is_leaf(self) -> bool:
        # An op result is a leaf exactly when it does not require grad (it has no grad_fn).
        return not self._requires_grad

    def detach(self) -> Tensor:
        from ._hooks import record_python_call

        return record_python_call(_detach, (self,), "detach")

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        sync_pending(self, "Tensor.requires_grad_() on a traced tensor")
        return Tensor.requires_grad_(self, requires_grad)

    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, other: Tensor) -> None:
        sync_pending(self, "Tensor.data = ...")
        Tensor.data.fset(self, other)

    def set_(self, *args, **kwargs) -> Tensor:
        sync_pending(self, "Tensor.set_()")
        return Tensor.set_(self, *args, **kwargs)

    def register_hook(self, hook):
        sync_pending(self, "Tensor.register_hook()")
        return Tensor.register_hook(self, hook)

    def retain_grad(self):
        sync_pending(self, "Tensor.retain_grad()")
        return Tensor.retain_grad(self)

    def as_subclass(self, cls):
        sync_pending(self, "Tensor.as_subclass()")
        return Tensor.as_subclass(self, cls)

    def item(self):
        from ._unbacked import item_of

        return item_of(self, Tensor.item)

    def __deepcopy__(self, memo):
        sync_pending(self, "copy.deepcopy of a tensor")
        return Tensor.__deepcopy__(self, memo)


def _detach(t: Tensor) -> Tensor:
    return t.detach()


def make_lazy(meta: Tensor, device, requires_grad: bool, value_index: int) -> LazyTensor:
    """A lazy tensor described by ``meta`` (a meta-device tensor) that reports ``device``."""
    t = object.__new__(LazyTensor)
    t._storage = meta._storage
    t._shape = meta._shape
    t._stride = meta._stride
    t._offset = meta._offset
    t.dtype = meta.dtype
    t._device = device
    t._requires_grad = requires_grad
    t.grad = None
    _SET_GRAD_FN(t, None)
    t._base = None
    t._autograd_meta = None
    d = t.__dict__
    d["_lz_v"] = value_index
    d["_lz_meta"] = meta
    return t


def refresh_from_meta(t: LazyTensor) -> None:
    """After an in-place op changed the meta tensor's layout (``unsqueeze_``, ``t_``, ...)."""
    meta = t.__dict__["_lz_meta"]
    t._storage, t._shape, t._stride, t._offset = meta._storage, meta._shape, meta._stride, meta._offset


def materialize(t: LazyTensor, real: Tensor) -> None:
    """Makes ``t`` the computed tensor ``real``: same fields, class ``Tensor`` again."""
    t._storage = real._storage
    t._shape = real._shape
    t._stride = real._stride
    t._offset = real._offset
    t.dtype = real.dtype
    t._device = real._device
    t._requires_grad = real._requires_grad
    t.grad_fn = real.grad_fn
    t._base = real._base
    _C._share_version_counter(t, real)
    t._autograd_meta = real._autograd_meta
    d = t.__dict__
    d.pop("_lz_v", None)
    d.pop("_lz_meta", None)
    t.__class__ = Tensor


class AbandonedTensor(Tensor):
    """A lazy tensor whose capture was abandoned (a ``fullgraph=True`` error, the end of a
    make_fx trace): it never got a value, and says so instead of reading missing data."""

    __torch_function__ = _disabled_torch_function_impl  # not dispatched on (ember.overrides)

    __slots__ = ()

    def _abandoned(self, *args, **kwargs):
        raise RuntimeError(
            "this tensor was traced by a capture that stopped before computing it "
            "(a fullgraph=True error or a make_fx trace); it has no value"
        )

    item = tolist = numpy = __array__ = data_ptr = _abandoned

    def __repr__(self) -> str:
        return f"<abandoned traced tensor: size={tuple(self._shape)}, dtype={self.dtype}>"

    __str__ = __repr__


def abandon(t: LazyTensor) -> None:
    d = t.__dict__
    d.pop("_lz_v", None)
    d.pop("_lz_meta", None)
    t.__class__ = AbandonedTensor

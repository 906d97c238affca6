"""Fake tensors: metadata without data, for node.meta["val"] and for tracing without inputs.

A ``FakeTensor`` is an ``ember.Tensor`` with exact shape, strides, dtype, requires_grad and
the device it stands for, over a data-less meta storage. Inside a ``FakeTensorMode`` every
op on fake tensors runs its meta kernel and returns fake tensors; reading data raises
``DataDependentOutputException`` (PyTorch's name) instead of touching memory.
"""

from __future__ import annotations

from ember import _C
from ember._src import dispatch
from ember._src.device import CPU, META, to_device
from ember._src.tensor import Tensor, make_tensor
from ember._src.torch_function import _disabled_torch_function_impl


class DataDependentOutputException(RuntimeError):
    """An operation needs the data of a fake tensor (``item``, ``tolist``, ``bool`` ...)."""


def _no_data(what):
    def method(self, *args, **kwargs):
        raise DataDependentOutputException(f"{what} needs the data of a FakeTensor, which has none")

    return method


class FakeTensor(Tensor):
    """Shape, strides, dtype and device of a tensor, with no data (see the module docstring)."""

    __torch_function__ = _disabled_torch_function_impl  # not dispatched on (ember.overrides)

    __slots__ = ()

    item = _no_data("Tensor.item()")
    tolist = _no_data("Tensor.tolist()")
    numpy = _no_data("Tensor.numpy()")
    __array__ = _no_data("Tensor.__array__()")
    data_ptr = _no_data("Tensor.data_ptr()")

    @property
    def fake_mode(self):
        return self.__dict__.get("_fk_mode")

    def __repr__(self) -> str:
        return f"FakeTensor(..., size={tuple(self._shape)}, dtype={self.dtype}, device={self._device})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __bool__(self) -> bool:
        raise DataDependentOutputException("bool() of a FakeTensor needs its data")

    def meta_tensor(self) -> Tensor:
        """The meta-device twin this fake tensor stands on."""
        return make_tensor(self._storage, self._shape, self._stride, self._offset, self.dtype, META)


def fake_of(meta: Tensor, device=CPU, requires_grad: bool = False, mode=None) -> FakeTensor:
    """A fake tensor with ``meta``'s layout that reports ``device``."""
    t = object.__new__(FakeTensor)
    t._storage = meta._storage
    t._shape = meta._shape
    t._stride = meta._stride
    t._offset = meta._offset
    t.dtype = meta.dtype
    t._device = device
    t._requires_grad = requires_grad
    t.grad = None
    t.grad_fn = None
    t._base = None
    t._autograd_meta = None
    if mode is not None:
        t.__dict__["_fk_mode"] = mode
    return t


def fake_from_tensor(t: Tensor, mode=None) -> FakeTensor:
    meta = make_tensor(_C.Storage.meta(t._storage.nbytes()), t._shape, t._stride, t._offset, t.dtype, META)
    return fake_of(meta, t._device, t._requires_grad, mode)


def _has_no_data(t: Tensor) -> bool:
    """A fake tensor, or a tensor over one's storage (``nn.Parameter(fake)`` made inside the mode)."""
    return type(t) is FakeTensor or t._storage.device_type == "meta"


def _to_meta(a):
    if isinstance(a, Tensor):
        if a._device is META:
            return a
        return make_tensor(a._storage if _has_no_data(a) else _C.Storage.meta(a._storage.nbytes()),
                           a._shape, a._stride, a._offset, a.dtype, META)
    if type(a) in (list, tuple):
        return type(a)(_to_meta(b) for b in a)
    return a


class FakeTensorMode(dispatch.DispatchMode):
    """Runs every op on meta kernels and returns fake tensors (PyTorch's FakeTensorMode).

    ``allow_non_fake_inputs`` lets real tensors in (they are read as their metadata only).
    """

    def __init__(self, *, allow_non_fake_inputs: bool = False, shape_env=None):
        self.allow_non_fake_inputs = allow_non_fake_inputs
        self.shape_env = shape_env

    def from_tensor(self, t: Tensor, **kwargs) -> FakeTensor:
        return fake_from_tensor(t, self)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        device = None
        requires_grad = False
        for a in list(args) + list(kwargs.values()):
            for t in (a if type(a) in (list, tuple) else (a,)):
                if isinstance(t, Tensor):
                    if not _has_no_data(t) and not self.allow_non_fake_inputs and t._device is not META:
                        raise RuntimeError(
                            f"ember.ops.{func.name}: a real tensor met fake ones under FakeTensorMode "
                            "(allow_non_fake_inputs=False)"
                        )
                    device = device or t._device
                    requires_grad = requires_grad or t._requires_grad
        if kwargs.get("device") is not None:
            device = to_device(kwargs["device"])
            kwargs["device"] = META
        device = device or CPU
        margs = [_to_meta(a) for a in args]
        out = func.call_kernel(margs, {k: _to_meta(v) for k, v in kwargs.items()})
        from ember._src import grad_mode

        requires_grad = requires_grad and grad_mode.STATE.grad_enabled

        def wrap(o, i):
            if not isinstance(o, Tensor):
                return o
            for j, m in enumerate(margs):
                if m is o:
                    src = args[j]
                    if isinstance(src, Tensor):
                        src._shape, src._stride, src._offset = o._shape, o._stride, o._offset
                    return src
            if o._device is not META:
                o = _to_meta(o)
            rg = requires_grad and (o.dtype.is_floating_point or o.dtype.is_complex)
            return fake_of(o, device, rg, self)

        if isinstance(out, Tensor):
            return wrap(out, 0)
        if isinstance(out, (tuple, list)):
            return type(out)(wrap(o, i) for i, o in enumerate(out))
        return out

"""``nn.Parameter`` and ``nn.Buffer``: tensors that modules register by assignment."""

from __future__ import annotations

import ember
from ember import Tensor
from ember._src.torch_function import _disabled_torch_function_impl


class _ParameterMeta(type):
    """``isinstance(t, Parameter)`` also holds for a tensor of another subclass flagged ``_is_param``:
    as in PyTorch, ``nn.Parameter(dtensor)`` stays a ``DTensor`` (its ``type`` is ``DTensor``) and
    is a parameter to ``isinstance`` and to modules."""

    def __instancecheck__(cls, instance):
        if cls is Parameter and isinstance(instance, Tensor) and getattr(instance, "_is_param", False):
            return True
        return super().__instancecheck__(instance)


class Parameter(Tensor, metaclass=_ParameterMeta):
    """A tensor that is a module parameter: assigning it to a ``Module`` attribute registers it.

    It shares the storage of the data it wraps and requires grad by default. Ops on a
    Parameter return plain tensors, as in PyTorch.
    """

    __torch_function__ = _disabled_torch_function_impl  # not dispatched on (ember.overrides)

    _is_param = True  # the core's detach() and .data give plain tensors for these

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = ember.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter data must be a Tensor, got {type(data).__name__}")
        return Tensor._make_subclass(cls, data, requires_grad)

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.data.clone(), self.requires_grad)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach(), self.requires_grad))


def _rebuild_parameter(data: Tensor, requires_grad: bool) -> Parameter:
    return Parameter(data, requires_grad)


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a ``Module`` attribute.

    Registration stores the plain tensor (as PyTorch does), remembering ``persistent``.
    """

    __torch_function__ = _disabled_torch_function_impl  # not dispatched on (ember.overrides)

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        if data is None:
            data = ember.empty(0)
        out = Tensor._make_subclass(cls, data, data.requires_grad)
        out.persistent = persistent
        return out

    def __init__(self, data=None, *, persistent=True):
        pass


class _UninitializedTensorMixin:
    """A tensor whose shape is not known yet (lazy modules); ``materialize`` gives it one and turns it
    into a ``cls_to_become``."""

    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None) -> None:
        data = ember.empty(shape, device=device or self.device, dtype=dtype or self.dtype)
        self.data = data
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class UninitializedParameter(_UninitializedTensorMixin, Parameter):
    """A parameter of a lazy module (``LazyLinear``), until its first input gives it a shape."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        out = Tensor._make_subclass(cls, ember.empty(0, device=device, dtype=dtype), requires_grad)
        return out

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass

    def __deepcopy__(self, memo):
        # Parameter's deepcopy passes data positionally, which this constructor does not take.
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]


class UninitializedBuffer(_UninitializedTensorMixin, Tensor):
    """A buffer of a lazy module (``LazyBatchNorm``'s running stats), until its first input."""

    __torch_function__ = _disabled_torch_function_impl  # not dispatched on (ember.overrides)

    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None, persistent: bool = True):
        out = Tensor._make_subclass(cls, ember.empty(0, device=device, dtype=dtype), requires_grad)
        out.persistent = persistent
        return out

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass


def is_lazy(param) -> bool:
    return isinstance(param, _UninitializedTensorMixin)

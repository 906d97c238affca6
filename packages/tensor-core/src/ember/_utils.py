"""``torch._utils`` helpers programs call directly: rebuilding a tensor or parameter from a storage
(custom checkpoint loaders), ``_element_size``, ``is_compiling``.

ember's own checkpoint loader never calls these (``serialization/_torch_globals.py`` validates each
global a pickle names); they are for code that rebuilds tensors itself.
"""

from __future__ import annotations

import warnings

import ember

__all__: list[str] = []


def _element_size(dtype) -> int:
    """The size in bytes of one element of ``dtype``."""
    if not isinstance(dtype, ember.dtype):
        raise RuntimeError(f"expected torch.dtype, but got {type(dtype)}")
    return dtype.itemsize


def _rebuild_tensor(storage, storage_offset, size, stride):
    """The tensor of ``size``/``stride`` at ``storage_offset`` into the typed ``storage`` (sharing it)."""
    untyped = storage._untyped_storage
    t = ember.empty((0,), dtype=storage.dtype, device=untyped.device)
    return t.set_(untyped, storage_offset, size, stride)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
    tensor = _rebuild_tensor(storage, storage_offset, size, stride)
    tensor.requires_grad = requires_grad
    if metadata:
        raise RuntimeError(f"tensor metadata {metadata!r:.80} (conjugate/negative views) is not supported by ember")
    tensor._backward_hooks = backward_hooks  # kept for old checkpoints, as PyTorch (usually empty)
    return tensor


def _rebuild_parameter(data, requires_grad, backward_hooks):
    param = ember.nn.Parameter(data, requires_grad)
    param._backward_hooks = backward_hooks
    return param


def is_compiling() -> bool:
    """Deprecated: ``ember.compiler.is_compiling()``."""
    warnings.warn("`torch._utils.is_compiling` is deprecated. Use `torch.compiler.is_compiling` instead.",
                  stacklevel=2)
    try:
        compiler = ember.compiler
    except AttributeError:  # ember-compile not installed: nothing compiles
        return False
    return compiler.is_compiling()


def _set_obj_state(obj, state):
    """Sets the pickled attributes ``state`` (a ``__dict__``, or a (dict, slots) pair) on ``obj``."""
    if isinstance(state, tuple):
        if not len(state) == 2:
            raise RuntimeError(f"Invalid serialized state: {state}")
        dict_state, slots_state = state
    else:
        dict_state, slots_state = state, None
    if dict_state:
        for k, v in dict_state.items():
            setattr(obj, k, v)
    if slots_state:
        for k, v in slots_state.items():
            setattr(obj, k, v)
    return obj

"""``torch._tensor``: where PyTorch defines ``Tensor``; checkpoint loaders call its
``_rebuild_from_type_v2`` (the pickle reduction of a tensor subclass or of a tensor with attributes)."""

from __future__ import annotations

from ember._src.tensor import Tensor

__all__ = ["Tensor"]


def _rebuild_from_type_v2(func, new_type, args, state):
    """``func(*args)`` as ``new_type``, with its pickled attributes ``state`` restored."""
    ret = func(*args)
    if type(ret) is not new_type:
        ret = ret.as_subclass(new_type)
    setstate = getattr(ret.__class__, "__setstate__", None)
    if setstate is not None and setstate is not getattr(Tensor, "__setstate__", None):
        ret.__setstate__(state)
    else:
        from ember._utils import _set_obj_state

        ret = _set_obj_state(ret, state)
    return ret

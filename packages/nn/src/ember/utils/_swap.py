"""``torch.utils.swap_tensors``: two tensor objects exchange their contents, keeping their identities."""

from __future__ import annotations

import copyreg
import weakref

_POISONED = ("Trying to execute AccumulateGrad node that was poisoned by swap_tensors this can happen when you try to "
             "run backward on a tensor that was swapped. For a module m with "
             "`torch.__future__.set_swap_module_params_on_conversion(True)` you should not change the device or dtype "
             "of the module (e.g. `m.cpu()` or `m.half()`) between running forward and backward. To resolve this, "
             "please only change the device/dtype before running forward (or after both forward and backward).")


def _poison_live_accumulator(t) -> None:
    """A leaf already used in a graph: that graph's AccumulateGrad would now write into the other
    contents, so running it raises (PyTorch poisons it the same way)."""
    if t.grad_fn is not None or not t.requires_grad:
        return
    from ember.autograd.graph import get_meta

    meta = get_meta(t)
    acc = meta.grad_acc() if getattr(meta, "grad_acc", None) is not None else None
    if acc is not None:
        def error_pre_hook(grad_outputs):
            raise RuntimeError(_POISONED)

        acc.register_prehook(error_pre_hook)


def swap_tensors(t1, t2):
    """Swaps the contents of the tensor objects ``t1`` and ``t2`` (data, shape, dtype, device,
    autograd state, ``__dict__``, slots and class): afterwards ``t1`` is what ``t2`` was and the
    other way round, while every reference to either object stays valid."""
    import ember

    if weakref.getweakrefs(t1):
        raise RuntimeError("Cannot swap t1 because it has weakref associated with it")
    if weakref.getweakrefs(t2):
        raise RuntimeError("Cannot swap t2 because it has weakref associated with it")
    t1_slots = set(copyreg._slotnames(t1.__class__))
    t2_slots = set(copyreg._slotnames(t2.__class__))
    if t1_slots != t2_slots:
        raise RuntimeError("Cannot swap t1 and t2 if they have different slots")
    if not isinstance(t1, ember.Tensor) or not isinstance(t2, ember.Tensor):
        raise TypeError(f"swap_tensors expects two tensors, got {type(t1).__name__} and {type(t2).__name__}")

    def swap_attr(name):
        tmp = getattr(t1, name)
        setattr(t1, name, getattr(t2, name))
        setattr(t2, name, tmp)

    _poison_live_accumulator(t1)
    _poison_live_accumulator(t2)
    if t1.dtype is not t2.dtype:
        from ember._src.tensor import DTYPE_CHANGES

        DTYPE_CHANGES[0] += 1
    swap_attr("__class__")
    for slot in t1_slots:
        if hasattr(t1, slot) and hasattr(t2, slot):
            swap_attr(slot)
        elif hasattr(t1, slot):
            setattr(t2, slot, getattr(t1, slot))
            delattr(t1, slot)
        elif hasattr(t2, slot):
            setattr(t1, slot, getattr(t2, slot))
            delattr(t2, slot)
    # the rest (storage, sizes, strides, dtype, device, grad, grad_fn, version counter, __dict__) lives
    # in the C struct: exchanged there in one step
    ember._C._swap_tensor_impl(t1, t2)

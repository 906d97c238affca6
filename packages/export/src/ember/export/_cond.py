"""``cond(pred, true_fn, false_fn, operands)``: PyTorch's ``torch.cond``, exportable.

Called eagerly, it runs the branch ``pred`` picks. While ``ember.export`` traces (where a
tensor predicate has no value), both branches are traced and their results are selected
with ``ember.where(pred, true_result, false_result)``: one graph that computes exactly what
the eager call computes for either value of ``pred``, saves and loads like any program and
becomes an ONNX ``Where``. As in PyTorch, the branches must be functions of ``operands``
without side effects (no in-place writes to operands or module state), returning the same
structure of tensors with the same shapes and dtypes; ``pred`` is a Python bool or a
one-element bool tensor. Both branches run at export time only (never in eager).
"""

from __future__ import annotations

import threading

import ember

from . import _pytree as pytree
from ._errors import UserError, UserErrorType


class _Tracing(threading.local):
    def __init__(self):
        self.depth = 0


TRACING = _Tracing()


def _check_pred(pred) -> None:
    if isinstance(pred, ember.Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
    elif not isinstance(pred, bool):
        raise RuntimeError(f"Expected pred to be bool or a tensor, but got {type(pred).__name__}.")


def cond(pred, true_fn, false_fn, operands=()):
    """Runs ``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (see the module docstring).

    Example:
        >>> import ember
        >>> from ember.export import cond
        >>> cond(ember.tensor(True), lambda x: x + 1, lambda x: x - 1, (ember.zeros(2),))
        tensor([1., 1.])
    """
    _check_pred(pred)
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"Expected a tuple or list of operands, got {type(operands).__name__}")
    operands = tuple(operands)
    if isinstance(pred, bool) or TRACING.depth == 0:
        return true_fn(*operands) if bool(pred) else false_fn(*operands)
    true_out = true_fn(*operands)
    false_out = false_fn(*operands)
    t_leaves, t_spec = pytree.tree_flatten(true_out)
    f_leaves, f_spec = pytree.tree_flatten(false_out)
    if t_spec != f_spec:
        raise UserError(UserErrorType.DYNAMIC_CONTROL_FLOW,
                        f"cond: the true branch returns {t_spec} but the false branch returns {f_spec}; both must "
                        "return the same structure")
    cond_pred = pred.reshape(()) if pred.dtype is ember.bool else pred.reshape(()) != 0
    selected = []
    for i, (a, b) in enumerate(zip(t_leaves, f_leaves)):
        if not isinstance(a, ember.Tensor) or not isinstance(b, ember.Tensor):
            if a != b:
                raise UserError(UserErrorType.DYNAMIC_CONTROL_FLOW,
                                f"cond: output {i} is a non-tensor value that differs between branches ({a!r} vs "
                                f"{b!r})")
            selected.append(a)
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            raise UserError(UserErrorType.DYNAMIC_CONTROL_FLOW,
                            f"cond: output {i} of the branches differs: {tuple(a.shape)} {a.dtype} vs "
                            f"{tuple(b.shape)} {b.dtype}; both branches must return the same shapes and dtypes")
        selected.append(ember.where(cond_pred, a, b))
    return pytree.tree_unflatten(selected, t_spec)

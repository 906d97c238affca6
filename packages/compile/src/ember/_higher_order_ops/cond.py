"""``cond(pred, true_fn, false_fn, operands)``: PyTorch's ``torch.cond``, as a graph op with subgraphs.

Called eagerly (no capture running) it runs the branch ``pred`` picks, with ordinary autograd.
Under a capture (``ember.compile``, ``make_fx``, ``ember.export``, or inside another subgraph)
both branches are traced into subgraphs (``_subgraph``) and ONE op is recorded:
``ember.ops.cond(pred, true_graph, false_graph, operands + lifted)``; at run time its kernel
runs only the chosen subgraph. So a data-dependent branch costs no graph break, exports as one
node with both branches as subgraphs, and the branches may compute entirely different things.

As in PyTorch: ``pred`` is a Python bool or a one-element tensor; the branches take the
operands, must not write them in place, and return the same structure of tensors with the same
dtypes and shapes.
"""

from __future__ import annotations

import ember
from ember._src.device import META
from ember._src.dispatch import OPS, define
from ember._src.tensor import Tensor
from ember.autograd._pytree import tree_flatten, tree_unflatten
from ember.compiler.symbolic_shapes import SymBool

from ._subgraph import (
    STATE,
    finish_subgraph,
    merged_lifted,
    trace_subgraph,
    without_modes,
)


def _check_pred(pred) -> None:
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            # PyTorch prints the tensor; a stand-in without data (under a capture) is named by its shape
            shown = pred if pred.numel() <= 1000 and not capturing(pred) else f"a tensor of shape {tuple(pred.shape)}"
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {shown}.")
    elif not isinstance(pred, (bool, SymBool)):
        raise RuntimeError(f"Expected pred to be bool or tensor, but got {type(pred).__name__}.")


def capturing(*tensors) -> bool:
    """Whether a graph op must be recorded rather than run: a capture is running on this thread,
    or an argument is a stand-in without data."""
    from ember.compiler._recorder import current

    rec = current()
    if STATE.depth or (rec is not None and not rec.suspended):
        return True
    from ember.compiler._fake import FakeTensor

    return any(isinstance(t, FakeTensor) or (isinstance(t, Tensor) and t._device is META) for t in tensors)


def check_no_alias(outputs, inputs, op: str = "torch.cond") -> None:
    """A branch may not return one of its inputs, or a view of one (PyTorch refuses it in every mode:
    the op's outputs are new tensors)."""
    from ember.compiler._exc import UncapturedHigherOrderOpError

    for out in outputs:
        if not isinstance(out, Tensor):
            continue
        storage = getattr(out, "_storage", None)
        for value in inputs:
            if isinstance(value, Tensor) and (out is value or (storage is not None and storage is value._storage)):
                raise UncapturedHigherOrderOpError(
                    "This higher order operator doesn't work unless it is captured completely with torch.compile. "
                    "Got graph break/error:\n\nEncountered aliasing during higher order op tracing\n"
                    f"  Higher Order Operator: {op}\n  Explanation: Higher order ops do not support aliasing.\n"
                    "  Hint: Replace `return input` with `return input.clone()` to avoid aliasing.")


def _same_outputs(t_leaves, f_leaves, t_spec, f_spec) -> None:
    from ember.compiler._exc import TorchRuntimeError as RuntimeError  # noqa: A001 - PyTorch's type

    if t_spec != f_spec or len(t_leaves) != len(f_leaves):
        raise RuntimeError("cond: the true and false branches must return the same structure of outputs "
                           f"(got {len(t_leaves)} and {len(f_leaves)} tensors)")
    for i, (a, b) in enumerate(zip(t_leaves, f_leaves)):
        if not isinstance(a, Tensor) or not isinstance(b, Tensor):
            raise RuntimeError(f"cond: output {i} is not a tensor; both branches must return tensors")
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            raise RuntimeError(
                f"cond: output {i} differs between the branches: {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} "
                f"{b.dtype}; both branches must return the same shapes and dtypes")


def _is_wrapped(t) -> bool:
    """A tensor subclass that batches values (vmap's BatchedTensor): its predicate differs per sample."""
    from ember.compiler._fake import FakeTensor
    from ember.compiler._lazy import LazyTensor

    return isinstance(t, Tensor) and type(t) not in (Tensor, FakeTensor, LazyTensor)


def _select_both(pred, true_fn, false_fn, operands):
    """cond under vmap (as PyTorch batches it): both branches run, ``where`` picks per sample."""
    t_leaves, t_spec = tree_flatten(true_fn(*operands))
    f_leaves, f_spec = tree_flatten(false_fn(*operands))
    _same_outputs(t_leaves, f_leaves, t_spec, f_spec)
    flag = pred.reshape(()) if pred.dtype is ember.bool else pred.reshape(()) != 0
    return tree_unflatten([ember.where(flag, a, b) for a, b in zip(t_leaves, f_leaves)], t_spec)


def cond(pred, true_fn, false_fn, operands=()):
    """Runs ``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (see the module docstring).

    Example:
        >>> import ember
        >>> ember.cond(ember.tensor(True), lambda x: x + 1, lambda x: x - 1, (ember.zeros(2),))
        tensor([1., 1.])
    """
    _check_pred(pred)
    if not callable(true_fn) or not callable(false_fn):
        raise RuntimeError("Expect both branches to be callable.")
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError("Expect operands to be a tuple of possibly nested dict/list/tuple that only consists of "
                           f"tensor leaves, but got {operands}.")
    operands = tuple(operands)
    for i, op in enumerate(operands):
        if not isinstance(op, (Tensor, int, float, bool)):
            raise RuntimeError(f"cond: operand {i} is a {type(op).__name__}; operands must be tensors or numbers")
    if isinstance(pred, bool):
        return true_fn(*operands) if pred else false_fn(*operands)
    if isinstance(pred, SymBool):
        pred = _symbolic_pred(pred, operands)
    if _is_wrapped(pred):
        return _select_both(pred, true_fn, false_fn, operands)
    if not capturing(pred, *operands):
        # Both branches are traced for their checks (outputs that agree and alias no input), as
        # PyTorch's eager cond captures them; the chosen one runs.
        _trace_branches(true_fn, false_fn, operands)
        return true_fn(*operands) if bool(pred) else false_fn(*operands)
    tensor_ops, (t_tracer, t_leaves, t_spec), (f_tracer, f_leaves, _) = _trace_branches(true_fn, false_fn,
                                                                                         operands)
    lifted = merged_lifted(t_tracer, f_tracer)
    true_graph = finish_subgraph(t_tracer, t_leaves, lifted, "cond true branch")
    false_graph = finish_subgraph(f_tracer, f_leaves, lifted, "cond false branch")
    out = COND(pred, true_graph, false_graph, tensor_ops + lifted)
    return tree_unflatten(list(out), t_spec)


def _symbolic_pred(pred, operands):
    """A SymBool predicate (export's symbolic trace: ``p = x.shape[0] > 4`` on any line before
    ``torch.cond(p, ...)``, or inline) as a 0-d bool tensor computed from each call's sizes, so
    the program is not specialized to one branch (PyTorch keeps the SymBool in the graph)."""
    return _relation_tensor(pred.rel, pred.env, _device_of(operands))


def _relation_tensor(rel, env, device):
    import sympy

    from ember.compiler.symbolic_shapes import SymInt

    if isinstance(rel, (sympy.And, sympy.Or)):
        parts = [_relation_tensor(r, env, device) for r in rel.args]
        combine = ember.logical_and if isinstance(rel, sympy.And) else ember.logical_or
        out = parts[0]
        for part in parts[1:]:
            out = combine(out, part)
        return out
    if isinstance(rel, sympy.Not):
        return ember.logical_not(_relation_tensor(rel.args[0], env, device))
    compare = {sympy.StrictGreaterThan: ember.gt, sympy.GreaterThan: ember.ge, sympy.StrictLessThan: ember.lt,
               sympy.LessThan: ember.le, sympy.Equality: ember.eq, sympy.Unequality: ember.ne}[type(rel)]
    diff = sympy.expand(rel.lhs - rel.rhs)
    hint = int(diff.subs(env.var_to_val))
    value = ember.full((), SymInt(diff, hint, env) if diff.free_symbols else hint, dtype=ember.int64, device=device)
    return compare(value, 0)


def _device_of(operands):
    return next((op.device for op in operands if isinstance(op, Tensor)), None)


def _trace_branches(true_fn, false_fn, operands):
    """(tensor operands, (tracer, leaves, spec) of each branch), checked: no output aliases an
    input, and both branches return the same structure, shapes and dtypes."""
    # A number operand is a constant of the trace (as PyTorch specializes on it).
    tensor_ops = [op for op in operands if isinstance(op, Tensor)]

    def bind(fn):
        def run(*tensors):
            it = iter(tensors)
            return fn(*[next(it) if isinstance(op, Tensor) else op for op in operands])

        return run

    t_tracer, t_leaves, t_spec = trace_subgraph(bind(true_fn), tensor_ops, "cond true branch")
    f_tracer, f_leaves, f_spec = trace_subgraph(bind(false_fn), tensor_ops, "cond false branch")
    check_no_alias(t_leaves, t_tracer.inputs)
    check_no_alias(f_leaves, f_tracer.inputs)
    _same_outputs(t_leaves, f_leaves, t_spec, f_spec)
    return tensor_ops, (t_tracer, t_leaves, t_spec), (f_tracer, f_leaves, f_spec)


# ---------------------------------------------------------------------------------- the graph op


def _run_cond(pred, true_graph, false_graph, operands):
    chosen = true_graph if bool(pred.reshape(()).item() if isinstance(pred, Tensor) else pred) else false_graph
    return tuple(chosen(*operands))


def _meta_cond(pred, true_graph, false_graph, operands):
    # The shapes and dtypes of both branches are equal (checked when traced): run the true one.
    return tuple(without_modes(true_graph, *operands))


COND = define("cond(Tensor pred, Any true_fn, Any false_fn, Tensor[] operands) -> Tensor[]",
              ("higher_order", "batch_loop"), meta=_meta_cond)
COND.kernels["cpu"] = _run_cond
COND.kernels["cuda"] = _run_cond
COND.kernels["meta"] = _meta_cond
COND.__module__ = __name__


def _cond_backward(grads, inputs, outputs):
    """The chosen branch run again with autograd, differentiated with the output gradients."""
    pred, true_graph, false_graph, operands = inputs.args
    chosen = true_graph if bool(pred) else false_graph
    return (None, None, None, subgraph_vjp(chosen, list(operands), grads))


def subgraph_vjp(graph, operands: list, grads) -> list:
    leaves = [op.detach().requires_grad_(op.requires_grad) if isinstance(op, Tensor) else op for op in operands]
    with ember.enable_grad():
        outs = [o for o in graph(*leaves)]
    pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
    wants = [x for x in leaves if isinstance(x, Tensor) and x.requires_grad]
    if not pairs or not wants:
        return [None] * len(operands)
    got = iter(ember.autograd.grad([o for o, _ in pairs], wants, [g for _, g in pairs], allow_unused=True))
    return [next(got) if isinstance(x, Tensor) and x.requires_grad else None for x in leaves]


def _register_formula() -> None:
    from ember.autograd.formulas import FORMULAS, Formula

    if "cond" not in FORMULAS:
        FORMULAS["cond"] = Formula("cond", _cond_backward)


_register_formula()
assert OPS["cond"] is COND

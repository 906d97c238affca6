"""``while_loop(cond_fn, body_fn, carried_inputs)``: PyTorch's ``torch._higher_order_ops.while_loop``.

Semantics (as PyTorch documents them)::

    def while_loop(cond_fn, body_fn, carried_inputs):
        val = carried_inputs
        while cond_fn(*val):
            val = body_fn(*val)
        return val

``cond_fn`` returns a one-element bool tensor (or a Python bool); ``body_fn`` returns carried
values with the same structure, shapes and dtypes as ``carried_inputs`` (a tuple or list of
tensors). Eagerly the loop runs in Python. Under a capture both functions are traced into
subgraphs and ONE op ``ember.ops.while_loop(cond_graph, body_graph, carried, lifted)`` is
recorded; its kernel runs the loop. As in PyTorch the functions must not write their inputs in
place. The op's backward (``_while_backward``) runs the loop again keeping each iteration's
carried values, then goes back through the iterations, differentiating ``body_fn`` at each
with autograd (memory grows with the trip count; PyTorch 2.13 also differentiates
``while_loop`` under ``torch.compile``).
"""

from __future__ import annotations

from ember._src.dispatch import OPS, define
from ember._src.tensor import Tensor

from ._subgraph import finish_subgraph, merged_lifted, trace_subgraph
from .cond import capturing


def _check_carried(carried) -> tuple:
    if not isinstance(carried, (tuple, list)):
        raise RuntimeError(f"carried_inputs must be a tuple or list, got {type(carried).__name__}")
    for i, c in enumerate(carried):
        if not isinstance(c, Tensor):
            raise RuntimeError(f"while_loop: carried input {i} is a {type(c).__name__}; carried inputs must be "
                               "tensors")
    return tuple(carried)


def _as_pred(value):
    if isinstance(value, Tensor):
        if value.numel() != 1 or value.dtype.name != "bool":
            raise _uncaptured(
                "torch.while_loop: unsupported cond_fn return type\n  Higher Order Operator: torch.while_loop\n"
                "  Explanation: Expected cond_fn to return a scalar tensor or a bool but got "
                f"{value.shape} of dtype {value.dtype}.")
        return bool(value)
    if isinstance(value, bool):
        return value
    raise _uncaptured("torch.while_loop: unsupported cond_fn return type\n  Higher Order Operator: torch.while_loop\n"
                      f"  Explanation: Expected cond_fn to return a scalar tensor or a bool but got "
                      f"{type(value).__name__}.")


def _uncaptured(detail: str):
    """PyTorch's eager while_loop runs through Dynamo: a bad cond_fn is its UncapturedHigherOrderOpError."""
    from ember.compiler._exc import UncapturedHigherOrderOpError

    return UncapturedHigherOrderOpError("This higher order operator doesn't work unless it is captured completely "
                                        f"with torch.compile. Got graph break/error:\n\n{detail}")


def _check_body(new, carried) -> tuple:
    from ember.compiler._exc import UncapturedHigherOrderOpError

    if not isinstance(new, (tuple, list)) or len(new) != len(carried):
        got = [type(n).__name__ for n in new] if isinstance(new, (tuple, list)) else [type(new).__name__]
        raise UncapturedHigherOrderOpError(
            "Expected body_fn_output and carried_inputs to have same number of outputs but got "
            f"lhs:{got} and rhs:{[type(c).__name__ for c in carried]}")
    for i, (n, c) in enumerate(zip(new, carried)):
        if not isinstance(n, Tensor) or tuple(n.shape) != tuple(c.shape) or n.dtype != c.dtype:
            what = (f"shape: {n.shape} vs {c.shape}" if tuple(n.shape) != tuple(c.shape)
                    else f"dtype: {n.dtype} vs {c.dtype}") if isinstance(n, Tensor) else f"type: {type(n).__name__}"
            raise UncapturedHigherOrderOpError(
                f"Expected body_fn_output and carried_inputs to have same metadata but found:\npair[{i}] differ in "
                f"'{what}'\n  Higher Order Operator: torch.while_loop")
    return tuple(new)


def while_loop(cond_fn, body_fn, carried_inputs):
    """Runs ``body_fn`` while ``cond_fn`` holds (see the module docstring); returns the final values.

    Example:
        >>> import ember
        >>> from ember._higher_order_ops import while_loop
        >>> while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), (ember.tensor(0), ember.ones(2)))
        (tensor(3), tensor([8., 8.]))
    """
    if not callable(cond_fn) or not callable(body_fn):
        raise RuntimeError("while_loop: cond_fn and body_fn must be callable")
    carried = _check_carried(carried_inputs)
    extra = ()  # closures' tensors are lifted by the trace
    if not capturing(*carried, *extra):
        val = carried
        while _as_pred(cond_fn(*val, *extra)):
            val = _check_body(body_fn(*val, *extra), val)
        return tuple(val)
    operands = list(carried) + list(extra)
    c_tracer, c_leaves, _ = trace_subgraph(cond_fn, operands, "while_loop cond_fn")
    b_tracer, b_leaves, b_spec = trace_subgraph(body_fn, operands, "while_loop body_fn")
    if len(c_leaves) != 1 or not isinstance(c_leaves[0], Tensor) or c_leaves[0].numel() != 1 or (
            c_leaves[0].dtype.name != "bool"):
        _as_pred(c_leaves[0] if len(c_leaves) == 1 else tuple(c_leaves))  # PyTorch's error for most
        raise _uncaptured("torch.while_loop: unsupported cond_fn return type\n  Higher Order Operator: "
                          "torch.while_loop\n  Explanation: cond_fn must return a boolean scalar tensor when traced.")
    _check_body(b_leaves, carried)
    lifted = merged_lifted(c_tracer, b_tracer)
    cond_graph = finish_subgraph(c_tracer, c_leaves, lifted, "while_loop cond_fn")
    body_graph = finish_subgraph(b_tracer, b_leaves, lifted, "while_loop body_fn")
    return tuple(WHILE_LOOP(cond_graph, body_graph, list(carried), list(extra) + lifted))


def _run_while(cond_graph, body_graph, carried, additional):
    val = tuple(carried)
    while bool(cond_graph(*val, *additional)[0]):
        val = tuple(body_graph(*val, *additional))
    return tuple(v.clone() if any(v is c for c in carried) else v for v in val)


def _meta_while(cond_graph, body_graph, carried, additional):
    return tuple(c.clone() for c in carried)


WHILE_LOOP = define("while_loop(Any cond_fn, Any body_fn, Tensor[] carried_inputs, Tensor[] additional_inputs) -> "
                    "Tensor[]", ("higher_order", "batch_loop"), meta=_meta_while)
WHILE_LOOP.kernels["cpu"] = _run_while
WHILE_LOOP.kernels["cuda"] = _run_while
WHILE_LOOP.kernels["meta"] = _meta_while


def _differentiable(t) -> bool:
    return isinstance(t, Tensor) and (t.dtype.is_floating_point or t.dtype.is_complex)


def _while_backward(grads, inputs, outputs):
    """Reverse mode through the loop: the iterations' carried values are recomputed (no grad),
    then each ``body_fn`` step is differentiated from the last to the first."""
    import ember

    cond_graph, body_graph, carried, additional = inputs.args
    history = []
    with ember.no_grad():
        val = tuple(c.detach() for c in carried)
        extra = [a.detach() for a in additional]
        while bool(cond_graph(*val, *extra)[0]):
            history.append(val)
            val = tuple(body_graph(*val, *extra))
    # One gradient per carried value (the outputs mirror the carried inputs); ints get none.
    grad = [g if _differentiable(c) else None for g, c in zip(list(grads) + [None] * len(carried), carried)]
    extra_grads: list = [None] * len(additional)
    for val in reversed(history):
        if all(g is None for g in grad):
            break
        leaves = [v.detach().requires_grad_(_differentiable(v)) for v in val]
        extra_leaves = [a.detach().requires_grad_(_differentiable(a) and a.requires_grad) for a in additional]
        with ember.enable_grad():
            outs = list(body_graph(*leaves, *extra_leaves))
        pairs = [(o, g) for o, g in zip(outs, grad) if g is not None and o.requires_grad]
        wants = [x for x in leaves + extra_leaves if x.requires_grad]
        if not pairs or not wants:
            grad = [None] * len(leaves)
            break
        got = iter(ember.autograd.grad([o for o, _ in pairs], wants, [g for _, g in pairs], allow_unused=True))
        new = [next(got) if x.requires_grad else None for x in leaves + extra_leaves]
        grad = new[:len(leaves)]
        for k, g in enumerate(new[len(leaves):]):
            if g is not None:
                extra_grads[k] = g if extra_grads[k] is None else extra_grads[k] + g
    carried_grads = [g if _differentiable(c) else None for g, c in zip(grad, carried)]
    return (None, None, carried_grads, extra_grads)


def _register_formula() -> None:
    from ember.autograd.formulas import FORMULAS, Formula

    if "while_loop" not in FORMULAS:
        FORMULAS["while_loop"] = Formula("while_loop", _while_backward)


_register_formula()
assert OPS["while_loop"] is WHILE_LOOP

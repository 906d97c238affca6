"""``ember.autograd.functional``: vjp, jvp, jacobian, hessian, hvp and vhp of a function.

Each call differentiates ``func`` at ``inputs`` with the reverse-mode engine (jvp uses the
double-backward trick). Results mirror the structure of the arguments: a tuple of inputs
gives tuples, a single tensor gives a tensor. Without ``create_graph`` results are detached;
``strict=True`` raises where an output does not depend on an input (instead of zeros).
``vectorize`` is accepted for PyTorch compatibility; the result is the same either way.
"""

from __future__ import annotations

from collections.abc import Callable

import ember
from ember._src.tensor import Tensor

from ._engine import grad as _grad

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _as_tuple(x, arg_name: str, fn_name: str) -> tuple[bool, tuple]:
    # A tuple only, as PyTorch's: a list is refused as a whole (its type named).
    is_tuple = isinstance(x, tuple)
    items = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            which = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                            f"{which} has type {type(t)}.")
    return is_tuple, items


def _prepare_inputs(inputs: tuple, create_graph: bool, need_graph: bool) -> tuple:
    # A fresh graph root per input: differentiate with respect to exactly these tensors.
    if create_graph and any(t.requires_grad for t in inputs):
        return tuple(t.view_as(t) if t.requires_grad else t.detach().requires_grad_(need_graph) for t in inputs)
    return tuple(t.detach().requires_grad_(need_graph) for t in inputs)


def _finish(tensors, create_graph: bool):
    if isinstance(tensors, tuple):
        return tuple(_finish(t, create_graph) for t in tensors)
    return tensors if create_graph or tensors is None else tensors.detach()


def _unpack(is_tuple: bool, values: tuple):
    return values if is_tuple else values[0]


def _validate_v(v: tuple, other: tuple, what: str) -> None:
    if len(v) != len(other):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
    for i, (a, b) in enumerate(zip(v, other)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"Entry {i} in v has invalid size: should be {tuple(b.shape)} but got {tuple(a.shape)}.")


def _default_v(outputs: tuple, fn_name: str) -> tuple:
    if len(outputs) != 1 or outputs[0].numel() != 1:
        raise RuntimeError("The vector v can only be None if the user-provided function returns a single Tensor "
                           "with a single element.")
    return (ember.ones_like(outputs[0]),)


def _grads(outputs, inputs, grad_outputs, create_graph: bool, strict: bool, stage: str) -> tuple:
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if pairs:
        result = _grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs],
                       retain_graph=True, create_graph=create_graph, allow_unused=True)
    else:
        result = (None,) * len(inputs)
    out = []
    for i, (g, x) in enumerate(zip(result, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The {stage} of the user-provided function is independent of input {i}. "
                                   "This is not allowed in strict mode.")
            g = ember.zeros_like(x)
        out.append(g)
    return tuple(out)


def _call(func: Callable, inputs: tuple, fn_name: str) -> tuple[bool, tuple]:
    return _as_tuple(func(*inputs), "outputs of the user-provided function", fn_name)


def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T J): the vector-Jacobian product at ``inputs``."""
    with ember.enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", "vjp")
        xs = _prepare_inputs(xs, create_graph, True)
        out_tuple, outs = _call(func, xs, "vjp")
        if v is None:
            vs = _default_v(outs, "vjp")
        else:
            _, vs = _as_tuple(v, "v", "vjp")
            _validate_v(vs, outs, "outputs")
        result = _grads(outs, xs, vs, create_graph, strict, "output")
    return _finish(_unpack(out_tuple, outs), create_graph), _finish(_unpack(in_tuple, result), create_graph)


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), J v): the Jacobian-vector product, by the double-backward trick."""
    with ember.enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", "jvp")
        xs = _prepare_inputs(xs, create_graph, True)
        if v is None:
            if len(xs) != 1 or xs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function "
                                   "is a single Tensor with a single element.")
            vs = (ember.ones_like(xs[0]),)
        else:
            _, vs = _as_tuple(v, "v", "jvp")
            _validate_v(vs, xs, "inputs")
        out_tuple, outs = _call(func, xs, "jvp")
        # u -> J^T u is linear in u; differentiating (J^T u) . v in u gives J v.
        dummies = tuple(ember.zeros_like(o).requires_grad_(True) for o in outs)
        jt_u = _grads(outs, xs, dummies, True, strict, "output")
        pairs = [(g, w) for g, w in zip(jt_u, vs) if g.requires_grad]
        if pairs:
            result = _grad([g for g, _ in pairs], list(dummies), [w for _, w in pairs],
                           create_graph=create_graph, allow_unused=True)
        else:
            result = (None,) * len(dummies)
        final = []
        for i, (r, o) in enumerate(zip(result, outs)):
            if r is None:
                if strict:
                    raise RuntimeError(f"The output of the user-provided function is independent of input {i}. "
                                       "This is not allowed in strict mode.")
                r = ember.zeros_like(o)
            final.append(r)
    return _finish(_unpack(out_tuple, outs), create_graph), _finish(_unpack(out_tuple, tuple(final)), create_graph)


def jacobian(func: Callable, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: shape ``output.shape + input.shape`` per pair,
    nested as ``[output][input]`` when either side is a tuple."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                         'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                         'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("torch.autograd.functional.jacobian: `strategy=\"forward-mode\"` is only "
                                  "implemented when `vectorize=True`.")
    with ember.enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", "jacobian")
        xs = _prepare_inputs(xs, create_graph, True)
        out_tuple, outs = _call(func, xs, "jacobian")
        blocks = []
        for o in outs:
            rows = [[] for _ in xs]
            flat = o.reshape(-1)
            for k in range(flat.numel()):
                if flat.requires_grad:
                    gs = _grad(flat[k], list(xs), retain_graph=True, create_graph=create_graph, allow_unused=True)
                else:
                    gs = (None,) * len(xs)
                for i, (g, x) in enumerate(zip(gs, xs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(f"Output {len(blocks)} of the user-provided function is independent "
                                               f"of input {i}. This is not allowed in strict mode.")
                        g = ember.zeros_like(x)
                    rows[i].append(g)
            per_input = []
            for i, x in enumerate(xs):
                if rows[i]:
                    j = ember.stack(rows[i]).reshape(tuple(o.shape) + tuple(x.shape))
                else:
                    j = ember.zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype)
                per_input.append(_finish(j, create_graph))
            blocks.append(_unpack(in_tuple, tuple(per_input)))
    return _unpack(out_tuple, tuple(blocks))


def hessian(func: Callable, inputs, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar ``func``: shape ``input.shape + input.shape`` per pair of inputs."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*args):
        out_tuple, outs = _call(func, args, "hessian")
        if out_tuple or len(outs) != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if outs[0].numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return _grads((outs[0].reshape(()),), args, (ember.ones((), dtype=outs[0].dtype),), True, strict, "output")

    result = jacobian(gradient, xs, create_graph=create_graph, strict=strict)
    if not in_tuple:
        return result[0][0]
    return result


def _second_order(func, inputs, v, create_graph, strict, fn_name):
    with ember.enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", fn_name)
        xs = _prepare_inputs(xs, create_graph, True)
        if v is None:
            if len(xs) != 1 or xs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function "
                                   "is a single Tensor with a single element.")
            vs = (ember.ones_like(xs[0]),)
        else:
            _, vs = _as_tuple(v, "v", fn_name)
            _validate_v(vs, xs, "inputs")
        out_tuple, outs = _call(func, xs, fn_name)
        if out_tuple or len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError(f"The function given to {fn_name} should return a single Tensor with a single element.")
        first = _grads(outs, xs, (ember.ones_like(outs[0]),), True, strict, "output")
        # The Hessian is symmetric for twice-differentiable functions: v^T H == H v.
        result = _grads(first, xs, vs, create_graph, strict, "jacobian")
    return _finish(outs[0], create_graph), _finish(_unpack(in_tuple, result), create_graph)


def vhp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T H) for a scalar function."""
    return _second_order(func, inputs, v, create_graph, strict, "vhp")


def hvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), H v) for a scalar function."""
    return _second_order(func, inputs, v, create_graph, strict, "hvp")

"""Reverse-mode transforms: ``grad``, ``grad_and_value`` and ``vjp``, on ember's autograd tape.

Each call is one *grad level*: its inputs become fresh leaves (a recorded alias when the input
already carries history for an outer level, so that outer levels still see through it), the
function runs, and the tape gives the gradients. Results come back unwrapped: detached from
this level's leaves unless something outside the level (an outer transform, a closed-over tensor
that requires grad, an input with history) is reachable from them, in which case the backward
is recorded too (``create_graph``) so that the outer level can differentiate the result.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import ember
from ember._src import grad_mode
from ember._src.tensor import Tensor
from ember.autograd import _engine
from ember.autograd import forward_ad as _fwad
from ember.autograd import graph as _graph
from ember.autograd._pytree import tree_flatten, tree_unflatten
from ember.autograd.graph import _SEQ, AccumulateGrad

from . import _levels

__all__ = ["grad", "grad_and_value", "vjp"]

_fwad.GRAD_LEVEL[0] = None  # set below, once autograd_level exists


# -- levels: fresh inputs and unwrapped outputs ------------------------------------------------------

class GradLevel:
    """The bookkeeping of one grad level: its fresh leaves and where its part of the tape starts."""

    def __init__(self, level):
        self.level = level
        self.start = level.start_seq = next(_SEQ)
        self.leaves: set[int] = set()
        self._outside: dict[int, bool] = {}  # grad_fn id -> reaches_outside, for plain tensors
        level.state = self

    def plain_reaches_outside(self, t) -> bool:
        """reaches_outside for one plain tensor, remembered per node (asked once per op under vmap)."""
        key = id(t.grad_fn)
        known = self._outside.get(key)
        if known is None:
            known = self._outside[key] = self._walk([t])
        return known

    def fresh(self, x):
        """``x`` as an input of this level (a new leaf, or a recorded alias of a tensor with history)."""
        if not isinstance(x, Tensor):
            return x
        from ._batched import BatchedTensor, make_batched

        if x._requires_grad:
            out = ember.ops["alias"](x)
        elif type(x) is BatchedTensor:
            # A logical leaf over the same physical value (which keeps any history of outer levels).
            out = make_batched(x._value, x._level)
            out.requires_grad_(True)
            out._func_grad_level = self.level.number
            _link_tangent(x, out)
        else:
            # alias, not detach: under jvp the alias keeps the forward-mode tangent (jacfwd(jacrev)).
            out = ember.ops["alias"](x).requires_grad_(True)
            out._func_grad_level = self.level.number
        self.leaves.add(id(out))
        return out

    def reaches_outside(self, tensors) -> bool:
        """Whether the tape behind ``tensors`` reaches anything that is not this level's own."""
        if self.level.physical_seen:
            return True
        return self._walk(tensors)

    def _walk(self, tensors) -> bool:
        from ._batched import BatchedTensor

        stack, seen = [], set()
        for t in tensors:
            if not isinstance(t, Tensor) or not t._requires_grad:
                continue
            if t.grad_fn is None:
                if _physical_requires_grad(t, BatchedTensor):
                    return True
                if id(t) not in self.leaves and getattr(t, "_func_grad_level", 0) <= self.level.number:
                    return True
                continue
            stack.append(t.grad_fn)
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if type(node) is AccumulateGrad:
                var = node.variable
                if _physical_requires_grad(var, BatchedTensor):
                    return True
                # A leaf of this level, or of a level nested inside it (already finished), is not outside.
                if id(var) not in self.leaves and getattr(var, "_func_grad_level", 0) <= self.level.number:
                    return True
                continue
            if node._seq < self.start:
                return True
            for fn, _ in node._next:
                if fn is not None:
                    stack.append(fn)
        return False


@contextlib.contextmanager
def autograd_level():
    """A grad level for autograd run by other code (forward mode's double backward) inside vmap."""
    with _levels.entered("grad") as level:
        GradLevel(level)
        yield level


def _physical_requires_grad(t, batched_type) -> bool:
    while type(t) is batched_type:
        t = t._value
        if t._requires_grad:
            return True
    return False


def _link_tangent(src, dst) -> None:
    """Under jvp, ``dst`` (a new wrapper of ``src``'s value) reads ``src``'s forward-mode tangent."""
    link = _graph._COPY_TANGENT[0]
    if link is not None:
        link(src, dst)


def unwrap_level(t, keep: bool):
    """A result of a level as the caller sees it: as computed when ``keep``, else without this
    level's history (a BatchedTensor keeps its physical value, which belongs to outer levels)."""
    if keep or not isinstance(t, Tensor) or not t._requires_grad:
        return t
    from ._batched import BatchedTensor, make_batched

    if type(t) is BatchedTensor:
        out = make_batched(t._value, t._level)
        _link_tangent(t, out)
        return out
    with grad_mode.no_grad():
        out = ember.ops["alias"](t)  # an op, unlike detach: an enclosing jvp keeps the tangent
    out._base = None  # not a view of t: a view would require grad through it
    return out


# -- argnums ------------------------------------------------------------------------------------------

def check_argnums(argnums, num_args: int, name: str = "grad"):
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        items = (argnums,)
    elif isinstance(argnums, tuple) and argnums and all(isinstance(a, int) for a in argnums):
        items = argnums
    elif isinstance(argnums, tuple) and not argnums:
        raise RuntimeError("argnums must be non-empty")
    else:
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    for a in items:
        if a < -num_args or a >= num_args:
            raise RuntimeError(f"Got argnum={a}, but only {num_args} positional inputs")
    wrapped = tuple(a % num_args for a in items)
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"argnums must be unique, got {argnums}")
    return wrapped


def _select(args, argnums):
    return args[argnums] if isinstance(argnums, int) else tuple(args[i] for i in argnums)


def _replace(args, argnums, values):
    args = list(args)
    if isinstance(argnums, int):
        args[argnums] = values
    else:
        for i, v in zip(argnums, values):
            args[i] = v
    return tuple(args)


# -- grad / grad_and_value ------------------------------------------------------------------------------

def grad_and_value(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """Like ``grad``, returning ``(gradient, value)`` (``(gradient, (value, aux))`` with ``has_aux``, as
    PyTorch's)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if not args:
            raise RuntimeError("grad_and_value(f)(*args): Expected at least one positional input")
        check_argnums(argnums, len(args))
        with grad_mode.enable_grad(), _levels.entered("grad") as level:
            state = GradLevel(level)
            diff = _select(args, argnums)
            flat, spec = tree_flatten(diff)
            fresh = [state.fresh(x) for x in flat]
            output = func(*_replace(args, argnums, tree_unflatten(fresh, spec)), **kwargs)
            aux = None
            if has_aux:
                if not (isinstance(output, tuple) and len(output) == 2):
                    raise RuntimeError("grad_and_value(f)(*args): output of function f should be a tuple: "
                                       "(output, aux) if has_aux is True")
                output, aux = output
            if not isinstance(output, Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                                   f"{type(output)}")
            if output.dim() != 0:
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                   f"tensor with {output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs "
                                   "instead?")
            keep = grad_mode.STATE.grad_enabled and state.reaches_outside([output])
            grads = _gradients([output], fresh, None, keep, retain=keep)
        grads = tree_unflatten([unwrap_level(g, keep) for g in grads], spec)
        value = unwrap_level(output, keep)
        if has_aux:
            aux = _unwrap_tree(aux, keep)
            return grads, (value, aux)
        return grads, value

    return wrapper


def grad(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """The gradient of scalar-valued ``func`` with respect to the inputs named by ``argnums``.

    Args:
        func: a function returning a 0-d tensor (and an auxiliary output with ``has_aux``).
        argnums: which positional input(s) to differentiate (an int or a tuple of ints); an input
            may be a pytree of tensors (a dict of parameters, say).
        has_aux: ``func`` returns ``(output, aux)``; ``aux`` is returned beside the gradient.

    Returns:
        A function computing the gradient (with the structure of the selected inputs).

    Example:
        >>> import ember
        >>> from ember.func import grad
        >>> grad(lambda x: (x ** 3).sum())(ember.tensor([1.0, 2.0]))
        tensor([ 3., 12.])
    """
    inner = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        result = inner(*args, **kwargs)
        if has_aux:
            g, (_, aux) = result
            return g, aux
        return result[0]

    return wrapper


def _unwrap_tree(tree, keep: bool):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([unwrap_level(x, keep) for x in leaves], spec)


def _gradients(outputs, inputs, grad_outputs, create_graph: bool, retain: bool):
    """d outputs / d inputs (zeros for inputs the outputs do not depend on)."""
    live_out, live_go = [], []
    for i, o in enumerate(outputs):
        if isinstance(o, Tensor) and o._requires_grad:
            live_out.append(o)
            live_go.append(None if grad_outputs is None else grad_outputs[i])
    wanted = [x for x in inputs if isinstance(x, Tensor)]
    if not live_out or not wanted:
        return [ember.zeros_like(x) if isinstance(x, Tensor) else None for x in inputs]
    grads = _engine.grad(live_out, wanted, None if grad_outputs is None else live_go, retain_graph=retain,
                         create_graph=create_graph, allow_unused=True)
    it = iter(grads)
    out = []
    for x in inputs:
        if not isinstance(x, Tensor):
            out.append(None)
            continue
        g = next(it)
        out.append(ember.zeros_like(x) if g is None else g)
    return out


# -- vjp ---------------------------------------------------------------------------------------------------

def vjp(func: Callable, *primals, has_aux: bool = False):
    """``(func(*primals), vjp_fn)``: ``vjp_fn(cotangents)`` is the vector-Jacobian product.

    ``vjp_fn`` may be called many times (under ``vmap`` too: that is ``jacrev``).

    Example:
        >>> import ember
        >>> from ember.func import vjp
        >>> out, vjp_fn = vjp(ember.sin, ember.zeros(2))
        >>> vjp_fn(ember.ones(2))
        (tensor([1., 1.]),)
    """
    with grad_mode.enable_grad(), _levels.entered("grad") as level:
        state = GradLevel(level)
        flat, spec = tree_flatten(primals)
        fresh = [state.fresh(x) for x in flat]
        output = func(*tree_unflatten(fresh, spec))
        aux = None
        if has_aux:
            if not (isinstance(output, tuple) and len(output) == 2):
                raise RuntimeError("vjp(f, *primals): output of function f should be a tuple: (output, aux) if "
                                   "has_aux is True")
            output, aux = output
        flat_out, out_spec = tree_flatten(output)
        if not flat_out:
            raise RuntimeError(f"vjp(f, *primals): Expected f to be a function that has non-empty output (got "
                               f"output = {output})")
        for o in flat_out:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"vjp(f, *primals): expected f(*primals) to return only tensors, got unsupported "
                                   f"type {type(o)}")
        for o in flat_out:
            # PyTorch's check: an integer output has no gradient (jacrev gave zeros for it)
            if not (o.is_floating_point() or o.is_complex()):
                raise RuntimeError(f"vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got "
                                   f"Tensor with dtype {o.dtype}")
        keep = grad_mode.STATE.grad_enabled and state.reaches_outside(flat_out)

    def vjp_fn(cotangents):
        flat_ct, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function. cotangents: {ct_spec}, primal output: {out_spec}")
        for o, c in zip(flat_out, flat_ct):
            if tuple(o.shape) != tuple(c.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of torch.Size({list(c.shape)}) "
                                   f"and output[0] has a shape of torch.Size({list(o.shape)}).")
        create = keep or (grad_mode.STATE.grad_enabled and any(
            isinstance(c, Tensor) and c._requires_grad for c in flat_ct))
        with grad_mode.enable_grad():
            grads = _gradients(flat_out, fresh, flat_ct, create, retain=True)
        return tree_unflatten([unwrap_level(g, create) for g in grads], spec)

    result = tree_unflatten([unwrap_level(o, keep) for o in flat_out], out_spec)
    if has_aux:
        return result, vjp_fn, _unwrap_tree(aux, keep)
    return result, vjp_fn


_fwad.GRAD_LEVEL[0] = autograd_level

"""Forward-mode AD: ``dual_level``, ``make_dual``, ``unpack_dual``.

Inside ``with dual_level():`` a dispatch mode sees every op; when an argument carries a
tangent, ``propagate`` computes the outputs' tangents (no change to the engine is needed).
An op's tangent comes from its ``jvp`` rule in the derivative table when it has one, else
from its backward formula by the double-backward trick: the formula is linear in the output
gradient ``u``, so differentiating ``<backward(u), t>`` with respect to ``u`` gives ``J t``.
Tangents live in a table keyed by tensor identity for the duration of the level.
"""

from __future__ import annotations

import weakref
from collections import namedtuple

import ember
from ember._src import grad_mode
from ember._src.dispatch import DispatchMode
from ember._src.tensor import Tensor

from . import graph as _graph
from ._engine import grad as _grad
from .formulas import FORMULAS, NON_DIFFERENTIABLE, Inputs
from .formulas.forward import flagged as _flagged

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

_LEVEL = [None]  # the active _DualLevel, or None
_TANGENTS: dict[int, tuple] = {}  # id(tensor) -> (weakref to tensor, tangent)


def _get_tangent(t):
    entry = _TANGENTS.get(id(t))
    if entry is None or entry[0]() is not t:
        # An alias autograd made (a saved tensor) reads the tangent of what it aliases, which the
        # forward mode may set only after the op that saved it has returned.
        src = getattr(t, "_tangent_src", None)
        return None if src is None else _get_tangent(src)
    return entry[1]


def _set_tangent(t: Tensor, tangent: Tensor) -> None:
    key = id(t)
    _TANGENTS[key] = (weakref.ref(t, lambda _, key=key: _TANGENTS.pop(key, None)), tangent)


def _copy_tangent(src: Tensor, dst: Tensor) -> None:
    if _LEVEL[0] is not None:
        dst._tangent_src = src


_graph._COPY_TANGENT[0] = _copy_tangent


class _ForwardMode(DispatchMode):
    suspended = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.suspended or not _TANGENTS:
            return func(*args, **kwargs)
        tangents = _arg_tangents(args)
        if not _any(tangents):
            return func(*args, **kwargs)
        before = args
        if "inplace" in func.tags:
            # The rule needs self as it was before the op overwrote it.
            before = (args[0].clone(),) + tuple(args[1:])
        out = func(*args, **kwargs)
        propagate(func, before, kwargs, out, tangents)
        if "inplace" in func.tags and isinstance(args[0], Tensor) and args[0]._base is not None:
            _write_into_base(args[0])
        return out


def _write_into_base(view: Tensor) -> None:
    # An in-place op on a view changes its base: the base's tangent takes the view's tangent in
    # the viewed region (zeros elsewhere when it had none), as PyTorch's forward AD does for
    # `out = zeros(n); out[i] = dual`. The region is found by element positions (a tensor laid out
    # as the base, holding each element's index, viewed as the view is), and written out of place,
    # so that a tangent batched by vmap (jacfwd) may land in a base that is not.
    tangent = _get_tangent(view)
    base = view._base
    if tangent is None or not base.dtype.is_floating_point:
        return
    with _suspended():
        n = base.numel()
        laid_out = ember.empty_strided(tuple(base.shape), tuple(base.stride()), dtype=ember.int64)
        laid_out.copy_(ember.arange(n).view(tuple(base.shape)))
        positions = laid_out.as_strided(tuple(view.shape), tuple(view.stride()),
                                        view.storage_offset() - base.storage_offset())
        old = _get_tangent(base)
        flat = (ember.zeros((n,), dtype=base.dtype) if old is None else old.reshape(-1))
        new = ember.index_put(flat, (positions.reshape(-1),), tangent.reshape(-1)).view(tuple(base.shape))
    _set_tangent(base, new)


def _arg_tangents(args) -> list:
    result = []
    for a in args:
        if isinstance(a, Tensor):
            result.append(_get_tangent(a))
        elif isinstance(a, (list, tuple)) and any(isinstance(b, Tensor) for b in a):
            result.append([_get_tangent(b) if isinstance(b, Tensor) else None for b in a])
        else:
            result.append(None)
    return result


def _any(tangents) -> bool:
    for t in tangents:
        if isinstance(t, list):
            if any(x is not None for x in t):
                return True
        elif t is not None:
            return True
    return False


def _formula_of(op):
    formula = FORMULAS.get(op.name)
    if formula is None and "inplace" in op.tags and op.name[:-1] in FORMULAS:
        formula = FORMULAS[op.name[:-1]]
    return formula


def propagate(op, args, kwargs, outputs, tangents=None) -> None:
    """Sets the tangents of ``outputs`` of ``op(*args, **kwargs)`` from the args' tangents."""
    if tangents is None:
        tangents = _arg_tangents(args)
        if not _any(tangents):
            return
    if op.name in NON_DIFFERENTIABLE:
        return
    formula = _formula_of(op)
    if formula is None:
        raise NotImplementedError(
            f"Trying to use forward AD with {op.name} that does not support it because it has not been "
            "implemented yet."
        )
    outs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    with _suspended():
        if formula.jvp is not None:
            result = formula.jvp(tangents, Inputs(tuple(args), dict(kwargs)), outs)
        else:
            result = _jvp_by_double_backward(formula, tangents, args, kwargs, outs)
    result = (result,) if isinstance(result, Tensor) or result is None else tuple(result)
    skip = formula.nondiff_outputs
    for i, (o, t) in enumerate(zip(outs, result)):
        if t is not None and isinstance(o, Tensor) and o.dtype.is_floating_point and i not in skip:
            if t.dtype is not o.dtype:
                t = t.to(o.dtype)
            _set_tangent(o, t if tuple(t.shape) == tuple(o.shape) else t.expand(tuple(o.shape)).clone())


class _suspended:
    def __enter__(self):
        mode = _LEVEL[0].mode if _LEVEL[0] is not None else None
        self.mode, self.prev = mode, getattr(mode, "suspended", False)
        if mode is not None:
            mode.suspended = True

    def __exit__(self, *exc):
        if self.mode is not None:
            self.mode.suspended = self.prev
        return False


# Set by ember.func: a context in which a BatchedTensor records its ops for the backward below
# (a grad level), for tangents batched by vmap (jacfwd, hessian).
GRAD_LEVEL: list = [None]


def _requires_grad(values) -> bool:
    for v in values:
        if isinstance(v, Tensor):
            if v.requires_grad:
                return True
        elif isinstance(v, (list, tuple)) and _requires_grad(v):
            return True
    return False


def _jvp_by_double_backward(formula, tangents, args, kwargs, outs):
    # With grad mode on, the tangent keeps its history (reverse over forward: jacrev(jacfwd(f)))
    # when a primal or a tangent has one to keep; otherwise the history would lead only to the
    # seeds below, and the tangent would require grad as no PyTorch tangent does.
    differentiable = grad_mode.STATE.grad_enabled and (
        _requires_grad(args) or _requires_grad(kwargs.values()) or _requires_grad(tangents))
    level = GRAD_LEVEL[0]
    with grad_mode.enable_grad(), (level() if level is not None else _no_level()):
        seeds = [ember.zeros_like(o).requires_grad_(True) if isinstance(o, Tensor) and o.dtype.is_floating_point
                 else None for o in outs]  # (a backward op's unrequested gradients are None)
        inputs = Inputs(tuple(_flagged(a) for a in args), {k: _flagged(v) for k, v in kwargs.items()})
        saved = tuple(_flagged(o) for o in outs) if formula.save_output else ()
        grads = formula.backward(tuple(seeds), inputs, saved)
        if isinstance(grads, Tensor) or grads is None:
            grads = (grads,)
        total = None
        for g, t in zip(grads, tangents):
            if g is None:  # no gradient for this argument (an index list, ...)
                continue
            pairs = zip(g, t) if isinstance(t, list) else [(g, t)]
            for gi, ti in pairs:
                if gi is not None and ti is not None:
                    term = (gi * ti).sum()
                    total = term if total is None else total + term
        live = [s for s in seeds if s is not None]
        if total is None or not total.requires_grad:
            return tuple(ember.zeros_like(s) if s is not None else None for s in seeds)
        result = iter(_grad(total, live, allow_unused=True, create_graph=differentiable))
    out = []
    for s in seeds:
        if s is None:
            out.append(None)
            continue
        r = next(result)
        out.append(ember.zeros_like(s) if r is None else r if differentiable else r.detach())
    return tuple(out)


class _no_level:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


# -- the public API -------------------------------------------------------------------------------


class _DualLevel:
    def __init__(self):
        self.mode = _ForwardMode()


def enter_dual_level() -> int:
    if _LEVEL[0] is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    level = _DualLevel()
    level.mode.__enter__()
    _LEVEL[0] = level
    return 0


def exit_dual_level(*, level: int | None = None) -> None:
    current = _LEVEL[0]
    if current is None:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. "
                           "This is not supported.")
    current.mode.__exit__(None, None, None)
    _LEVEL[0] = None
    _TANGENTS.clear()


class dual_level:
    """Context manager of a forward-AD level: tangents exist only inside it.

    Example:
        >>> import ember.autograd.forward_ad as fwAD
        >>> with fwAD.dual_level():
        ...     x = fwAD.make_dual(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 0.0]))
        ...     fwAD.unpack_dual(x * x).tangent
        tensor([2., 0.])
    """

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> bool:
        exit_dual_level()
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)

        return wrapper


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A view of ``tensor`` carrying ``tangent`` as its forward gradient."""
    if _LEVEL[0] is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual(): expected Tensor arguments")
    if not tensor.dtype.is_floating_point or not tangent.dtype.is_floating_point:
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if tuple(tensor.shape) != tuple(tangent.shape):
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the original Tensor, this is "
            f"not supported. Tensor is of size {list(tensor.shape)} while the given forward gradient is of size "
            f"{list(tangent.shape)}."
        )
    with _suspended():
        dual = ember.ops["alias"](tensor)
    _set_tangent(dual, tangent if tangent.dtype is tensor.dtype else tangent.to(tensor.dtype))
    return dual


def unpack_dual(tensor: Tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """(primal, tangent) of a dual tensor; the tangent is None when it has none."""
    if _LEVEL[0] is None:
        return UnpackedDualTensor(tensor, None)
    tangent = _get_tangent(tensor)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    with _suspended():
        primal = ember.ops["alias"](tensor)
    return UnpackedDualTensor(primal, tangent)

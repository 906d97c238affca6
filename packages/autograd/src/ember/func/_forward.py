"""Forward-mode transforms: ``jvp`` and ``linearize``.

``jvp`` runs on ember's forward-mode AD (``ember.autograd.forward_ad``) when no forward level is
active. That AD has one level, so a ``jvp`` inside another (``jacfwd(jacfwd(f))``) uses the
double-vjp identity instead: ``u -> vjp(u) = J^T u`` is linear in ``u``, and its vjp with
cotangent ``t`` is ``J t``. ``linearize`` uses the same identity on a tape recorded once, so its
``jvp_fn`` never reruns ``func``.
"""

from __future__ import annotations

from collections.abc import Callable

import ember
from ember._src import grad_mode
from ember._src.tensor import Tensor
from ember.autograd import _engine
from ember.autograd import forward_ad as fwad
from ember.autograd._pytree import tree_flatten, tree_unflatten

from . import _levels
from ._grad import unwrap_level, vjp

__all__ = ["jvp", "linearize"]


def _check_tangents(primals, tangents, name: str = "jvp"):
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{name}(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid "
                           "to call f(*primals).")
    if not isinstance(tangents, tuple):
        raise RuntimeError(f"{name}(f, primals, tangents): Expected tangents to be a tuple.")
    flat_p, spec_p = tree_flatten(primals)
    flat_t, spec_t = tree_flatten(tangents)
    if spec_p != spec_t:
        raise RuntimeError(f"{name}(f, primals, tangents): Expected primals and tangents to have the same python "
                           f"structure. For example, if primals is a tuple of 3 tensors, tangents also must be. Got "
                           f"primals with structure {spec_p} and tangents with structure {spec_t}")
    for p, t in zip(flat_p, flat_t):
        if not isinstance(p, Tensor) or not isinstance(t, Tensor):
            raise RuntimeError(f"{name}(f, primals, tangents): Expected primals and tangents to be Tensors")
        if tuple(p.shape) != tuple(t.shape):
            # PyTorch's text: its jvp finds the mismatch when it makes the dual tensor
            raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                               f"Tensor, this is not supported. Tensor is of size {list(p.shape)} while the given "
                               f"forward gradient is of size {list(t.shape)}.")
    return flat_p, flat_t, spec_p


def jvp(func: Callable, primals: tuple, tangents: tuple, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), J @ tangents)``: the Jacobian-vector product (forward mode).

    Example:
        >>> import ember
        >>> from ember.func import jvp
        >>> jvp(ember.sin, (ember.zeros(2),), (ember.ones(2),))[1]
        tensor([1., 1.])
    """
    if strict:
        raise RuntimeError("jvp(f, primals, tangents): strict=True is not supported")
    flat_p, flat_t, spec = _check_tangents(primals, tangents)
    if fwad._LEVEL[0] is None:
        return _jvp_forward_ad(func, flat_p, flat_t, spec, has_aux)
    return _jvp_double_vjp(func, primals, flat_t, has_aux)


def _split_aux(output, has_aux, name="jvp"):
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(f"{name}(f, primals, tangents): output of function f should be a tuple: (output, aux) "
                           "if has_aux is True")
    return output


def _jvp_forward_ad(func, flat_p, flat_t, spec, has_aux):
    with fwad.dual_level():
        duals = [fwad.make_dual(p, t) for p, t in zip(flat_p, flat_t)]
        output, aux = _split_aux(func(*tree_unflatten(duals, spec)), has_aux)
        flat_out, out_spec = tree_flatten(output)
        primals_out, tangents_out = [], []
        for o in flat_out:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"jvp(f, primals, tangents): Expected f(*primals) to return only tensors, got "
                                   f"unsupported type {type(o)}")
            primal, tangent = fwad.unpack_dual(o)
            primals_out.append(primal)
            tangents_out.append(ember.zeros_like(primal) if tangent is None else tangent)
    # History kept only where an outer level can use it (as grad's results, see _grad.unwrap_level).
    keep = _levels.innermost_grad() is not None or any(t._requires_grad for t in flat_p + flat_t)
    primals_out = [unwrap_level(o, keep) for o in primals_out]
    tangents_out = [unwrap_level(t, keep) for t in tangents_out]
    result = (tree_unflatten(primals_out, out_spec), tree_unflatten(tangents_out, out_spec))
    return result + (aux,) if has_aux else result


def _jvp_double_vjp(func, primals, flat_t, has_aux):
    out = vjp(func, *primals, has_aux=has_aux)
    output, vjp_fn = out[0], out[1]
    flat_out, out_spec = tree_flatten(output)
    with grad_mode.enable_grad():
        dummies = [ember.zeros_like(o).requires_grad_(True) for o in flat_out]
        grads = tree_flatten(vjp_fn(tree_unflatten(dummies, out_spec)))[0]
        live = [(g, t) for g, t in zip(grads, flat_t) if g is not None and g._requires_grad]
        if live:
            result = _engine.grad([g for g, _ in live], dummies, [t for _, t in live], allow_unused=True,
                                  create_graph=grad_mode.STATE.grad_enabled)
        else:
            result = [None] * len(dummies)
    tangents_out = [ember.zeros_like(o) if r is None else r for o, r in zip(flat_out, result)]
    res = (output, tree_unflatten(tangents_out, out_spec))
    return res + (out[2],) if has_aux else res


def linearize(func: Callable, *primals):
    """``(func(*primals), jvp_fn)`` where ``jvp_fn(*tangents)`` is the JVP at ``primals``.

    The function runs once; each ``jvp_fn`` call differentiates the recorded tape again.

    Example:
        >>> import ember
        >>> from ember.func import linearize
        >>> out, jvp_fn = linearize(ember.sin, ember.zeros(2))
        >>> jvp_fn(ember.ones(2))
        tensor([1., 1.])
    """
    output, vjp_fn = vjp(func, *primals)
    flat_out, out_spec = tree_flatten(output)
    flat_p, spec_p = tree_flatten(primals)
    with grad_mode.enable_grad():
        dummies = [ember.zeros_like(o).requires_grad_(True) for o in flat_out]
        # vjp_fn records its backward when a cotangent requires grad: g(u) = J^T u, linear in u.
        grads = tree_flatten(vjp_fn(tree_unflatten(dummies, out_spec)))[0]

    def jvp_fn(*tangents):
        _, flat_t, _ = _check_tangents(primals, tangents, "linearize")
        live = [(g, t) for g, t in zip(grads, flat_t) if g is not None and g._requires_grad]
        if not live:
            return tree_unflatten([ember.zeros_like(o) for o in flat_out], out_spec)
        with grad_mode.enable_grad():
            result = _engine.grad([g for g, _ in live], dummies, [t for _, t in live], allow_unused=True,
                                  retain_graph=True)
        return tree_unflatten([ember.zeros_like(o) if r is None else unwrap_level(r, False)
                               for o, r in zip(flat_out, result)], out_spec)

    return output, jvp_fn

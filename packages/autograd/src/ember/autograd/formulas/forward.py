"""Forward-mode (JVP) rules: ``jvp(tangents, inputs, outputs)`` for the elementwise, linear,
matrix-product and softmax-like ops. Ops without a rule here get their tangent from their
backward formula (see ``forward_ad``), which is slower but exact.

Elementwise ops have diagonal Jacobians, so their JVP is their backward formula applied to
each input's tangent (broadcast to the output's shape) in place of the output gradient.
Linear ops (views, sums, cat, ...) apply themselves to the tangent.
"""

from __future__ import annotations

import ember
from ember._src import grad_mode
from ember._src.dispatch import OPS
from ember._src.tensor import Tensor

# The backward formulas these rules attach to are registered first by formulas/__init__.py,
# which imports this module last.
from ._common import arg
from ._registry import FORMULAS, Inputs, forward_derivative


def flagged(a):
    """A graph-free alias of ``a`` marked as requiring grad, so a backward formula computes
    every input's contribution (formulas skip inputs that do not require grad)."""
    if isinstance(a, Tensor):
        alias = a.detach()
        alias._requires_grad = a.dtype.is_floating_point
        return alias
    if isinstance(a, (list, tuple)) and any(isinstance(b, Tensor) for b in a):
        return [flagged(b) for b in a]
    return a


def _pointwise_jvp(formula):
    def jvp(tangents, inputs, outputs):
        out = outputs[0]
        # With grad mode on, inputs that require grad stay as they are, so that the tangent keeps
        # its history through the primal too (reverse over forward: ember.func.jacrev(jacfwd(f))).
        differentiable = grad_mode.STATE.grad_enabled and (
            any(t is not None and t.requires_grad for t in tangents)
            or any(isinstance(a, Tensor) and a.requires_grad for a in inputs.args))
        flagged_inputs = Inputs(tuple(a if differentiable and isinstance(a, Tensor) and a.requires_grad
                                      else flagged(a) for a in inputs.args), inputs.kwargs)
        saved = outputs if formula.save_output else ()
        total = None
        with grad_mode.set_grad_enabled(differentiable):
            for i, t in enumerate(tangents):
                if t is None:
                    continue
                seed = t.expand(tuple(out.shape)) if tuple(t.shape) != tuple(out.shape) else t
                part = formula.backward((seed,), flagged_inputs, saved)[i]
                if part is not None:
                    total = part if total is None else total + part
        return total

    return jvp


def _linear_jvp(op):
    """JVP of an op linear in its first (tensor or tensor-list) argument."""

    def jvp(tangents, inputs, outputs):
        t = tangents[0]
        if isinstance(t, list):
            t = [ti if ti is not None else ember.zeros_like(x) for ti, x in zip(t, inputs.args[0])]
        elif t is None:
            return None
        return op(t, *inputs.args[1:], **inputs.kwargs)

    return jvp


def register_generic() -> None:
    for name, op in OPS.items():
        formula = FORMULAS.get(name)
        if formula is None or formula.jvp is not None:
            continue
        if "pointwise" in op.tags and "inplace" not in op.tags and name != "where":
            formula.jvp = _pointwise_jvp(formula)
    linear = (
        "alias", "clone", "_to_copy", "expand", "permute", "transpose", "select", "slice", "narrow", "diagonal",
        "unfold", "squeeze", "unsqueeze", "flip", "cat", "index", "index_select", "sum", "mean",
        "cumsum",
    )
    for name in linear:
        if name in FORMULAS and FORMULAS[name].jvp is None:
            FORMULAS[name].jvp = _linear_jvp(OPS[name])


@forward_derivative("view")
def _view(tangents, inputs, outputs):
    # The tangent may be laid out differently from the primal: reshape, not view.
    return tangents[0].reshape(outputs[0].shape)


@forward_derivative("where")
def _where(tangents, inputs, outputs):
    cond = inputs.args[0]
    t_self, t_other = tangents[1], tangents[2]
    zero = ember.zeros((), dtype=outputs[0].dtype)
    return ember.where(cond, zero if t_self is None else t_self, zero if t_other is None else t_other)


def _bilinear(fn, a_pos=0, b_pos=1):
    def jvp(tangents, inputs, outputs):
        a, b = inputs.args[a_pos], inputs.args[b_pos]
        ta, tb = tangents[a_pos], tangents[b_pos]
        total = None
        if ta is not None:
            total = fn(ta, b)
        if tb is not None:
            part = fn(a, tb)
            total = part if total is None else total + part
        return total

    return jvp


forward_derivative("mm")(_bilinear(ember.mm))
forward_derivative("bmm")(_bilinear(ember.bmm))
forward_derivative("mv")(_bilinear(ember.mv))
forward_derivative("dot")(_bilinear(ember.dot))


def _add_product(fn):
    """addmm/addmv/baddbmm/addbmm: beta * t_self + alpha * (product's bilinear JVP)."""
    product = _bilinear(fn, 1, 2)

    def jvp(tangents, inputs, outputs):
        beta, alpha = arg(inputs, 3, "beta", 1), arg(inputs, 4, "alpha", 1)
        total = product(tangents, inputs, outputs)
        if total is not None:
            total = total * alpha
        if tangents[0] is not None:
            part = tangents[0] * beta
            total = part if total is None else total + part
        return total

    return jvp


forward_derivative("addmm")(_add_product(ember.mm))
forward_derivative("addmv")(_add_product(ember.mv))
forward_derivative("baddbmm")(_add_product(ember.bmm))
forward_derivative("addbmm")(_add_product(lambda a, b: ember.bmm(a, b).sum(0)))


@forward_derivative("softmax")
def _softmax(tangents, inputs, outputs):
    y, t = outputs[0], tangents[0]
    dim = arg(inputs, 1, "dim")
    if y.ndim == 0:
        return t * 0
    yt = y * t
    return yt - y * ember.sum(yt, dim, keepdim=True)


@forward_derivative("log_softmax")
def _log_softmax(tangents, inputs, outputs):
    y, t = outputs[0], tangents[0]
    dim = arg(inputs, 1, "dim")
    if y.ndim == 0:
        return t * 0
    return t - ember.sum(ember.exp(y) * t, dim, keepdim=True)


@forward_derivative("logsumexp")
def _logsumexp(tangents, inputs, outputs):
    x, t = inputs.args[0], tangents[0]
    dim = arg(inputs, 1, "dim")
    keepdim = arg(inputs, 2, "keepdim", False)
    if x.ndim == 0:
        return t
    weights = ember.exp(x - ember.logsumexp(x, dim, keepdim=True))
    return ember.sum(weights * t, dim, keepdim=keepdim)

"""Derivatives of the elementwise math ops (arithmetic and unary functions).

Each follows PyTorch's documented math, including its conventions at non-differentiable
points: abs and sign-like ops give 0 at 0, maximum/minimum split the gradient evenly on
ties, pow's exponent gradient is 0 where the base is 0 and the exponent non-negative.
"""

from __future__ import annotations

import math

import ember

from ..graph import SavedTensor, freed_error
from ._common import arg, input_requires_grad, is_tensor, not_implemented, where_zero, zero_grads
from ._registry import derivative, forward_derivative

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _unary(name: str, save_output: bool = False):
    """Registers ``fn(g, x, result)`` as the backward of a one-input op."""

    def register(fn):
        if save_output or not _loads(fn, 1):
            # x is not needed (neg, frac, or from the result): not read, so not saved.
            @derivative(name, save_output=save_output)
            def backward(grads, unused, outputs):
                return (fn(grads[0], None, outputs[0] if save_output else None),)

        else:

            @derivative(name)
            def backward(grads, inputs, outputs):
                return (fn(grads[0], inputs.args[0], None),)

        return fn

    return register


def _loads(fn, index: int) -> bool:
    """Whether ``fn`` ever reads its parameter at ``index``."""
    import dis

    name = fn.__code__.co_varnames[index]
    return any(i.opname.startswith("LOAD_") and i.argval == name for i in dis.get_instructions(fn))


# -- binary arithmetic --------------------------------------------------------------------------


@derivative("add")
def _add(grads, inputs, outputs):
    g = grads[0]
    return g, g


@derivative("sub")
def _sub(grads, unused, outputs):
    # Reads no input (PyTorch saves none): the engine drops the gradient of a number ``other``.
    g = grads[0]
    return g, -g


def _check_number_kept(inputs) -> None:
    """``x * 2`` and ``x / 2``: PyTorch saves the number as a (wrapped-number) tensor, so running the node
    again after its graph was freed raises. ember keeps the number itself; the tensor argument, saved
    beside it and freed with the graph, tells that the graph is gone."""
    raw = tuple(tuple.__iter__(inputs.args))
    if any(type(a) in (int, float, complex) for a in raw[:2]):
        for a in raw[:2]:
            if type(a) is SavedTensor and a.data is None:
                raise freed_error()


@derivative("mul")
def _mul(grads, inputs, outputs):
    # Each input is unpacked only for the other's gradient, as PyTorch saves it only then.
    _check_number_kept(inputs)
    g = grads[0]
    return (
        g * inputs.args[1] if input_requires_grad(inputs, 0) else None,
        g * inputs.args[0] if input_requires_grad(inputs, 1) else None,
    )


@derivative("div")
def _div(grads, inputs, outputs):
    _check_number_kept(inputs)
    g = grads[0]
    other = inputs.args[1]
    grad_self = g / other if input_requires_grad(inputs, 0) else None
    grad_other = None
    if input_requires_grad(inputs, 1):
        grad_other = -g * ((inputs.args[0] / other) / other)  # PyTorch's grouping (the same infs and NaNs)
    return grad_self, grad_other


@derivative("div_rounding")
def _div_rounding(grads, inputs, outputs):
    """div with a rounding mode is piecewise constant: PyTorch gives both inputs zeros (also where
    other is 0). It reads no input, so none is saved (div_ overwrites self after this op ran); the
    engine drops the zeros of an argument that is a number or does not require grad."""
    zeros = ember.zeros_like(grads[0])
    return zeros, zeros


@forward_derivative("div_rounding")
def _div_rounding_jvp(tangents, inputs, outputs):
    return ember.zeros_like(outputs[0])


@derivative("pow", save_output=True)
def _pow(grads, inputs, outputs):
    g = grads[0]
    self, exponent = inputs.args[0], inputs.args[1]
    result = outputs[0]
    grad_self = grad_exponent = None
    if is_tensor(self) and self.requires_grad:
        # d/dx x**0 is 0 everywhere, including at x == 0 where 0 * x**-1 would give nan.
        if not is_tensor(exponent):
            grad_self = g * 0 if exponent == 0 else g * exponent * ember.pow(self, exponent - 1)
        else:
            local = exponent * ember.pow(self, exponent - 1)
            grad_self = where_zero(ember.eq(exponent, 0), g * local)
    if is_tensor(exponent) and exponent.requires_grad:
        # 0**y has no gradient in y for y >= 0 (PyTorch's convention; log(0) would give nan).
        if not is_tensor(self):
            log_base = ember.full((), self, dtype=g.dtype).log()
            grad_exponent = g * result * log_base
            if self == 0:
                grad_exponent = where_zero(ember.ge(exponent, 0), grad_exponent)
        else:
            at_zero = ember.logical_and(ember.eq(self, 0), ember.ge(exponent, 0))
            grad_exponent = where_zero(at_zero, g * result * ember.log(self))
    return grad_self, grad_exponent


@derivative("atan2")
def _atan2(grads, inputs, outputs):
    g = grads[0]
    self, other = inputs.args[0], inputs.args[1]
    # 1 / (x^2 + y^2), taken as 0 where it is infinite (at the origin), as PyTorch's formula does.
    recip = (self * self + other * other).reciprocal()
    recip = where_zero(recip.isinf(), recip)
    return g * other * recip, g * -self * recip


@derivative("copysign", save_output=True)
def _copysign(grads, inputs, outputs):
    # self: result / self (the sign flip), 0 where self is 0; other: no gradient.
    g = grads[0]
    self = inputs.args[0]
    other = inputs.args[1]
    grad_self = where_zero(ember.eq(self, 0), g * (outputs[0] / self))
    grad_other = ember.zeros(other.shape, dtype=g.dtype) if is_tensor(other) else None
    return grad_self, grad_other


@derivative("fmod")
def _fmod(grads, inputs, outputs):
    g = grads[0]
    self, other = inputs.args[0], inputs.args[1]
    grad_other = None
    if is_tensor(other) and other.requires_grad:
        grad_other = -g * ember.div(self, other, rounding_mode="trunc")
    return g, grad_other


@derivative("remainder")
def _remainder(grads, inputs, outputs):
    g = grads[0]
    self, other = inputs.args[0], inputs.args[1]
    grad_other = None
    if is_tensor(other) and other.requires_grad:
        grad_other = -g * ember.div(self, other, rounding_mode="floor")
    return g, grad_other


@derivative("hypot", save_output=True)
def _hypot(grads, inputs, outputs):
    g = grads[0]
    scale = g / outputs[0]
    return scale * inputs.args[0], scale * inputs.args[1]


@derivative("logaddexp")
def _logaddexp(grads, inputs, outputs):
    g = grads[0]
    self, other = inputs.args[0], inputs.args[1]
    return g / (1 + ember.exp(other - self)), g / (1 + ember.exp(self - other))


@derivative("logaddexp2")
def _logaddexp2(grads, inputs, outputs):
    g = grads[0]
    self, other = inputs.args[0], inputs.args[1]
    return g / (1 + ember.exp2(other - self)), g / (1 + ember.exp2(self - other))


@derivative("xlogy")
def _xlogy(grads, inputs, outputs):
    g = grads[0]
    self, other = inputs.args[0], inputs.args[1]
    grad_self = grad_other = None
    if is_tensor(self) and self.requires_grad:
        grad_self = g * ember.xlogy(ember.ne(self, 0).to(g.dtype), other)
    if is_tensor(other) and other.requires_grad:
        grad_other = g * self / other
    return grad_self, grad_other


def _extremum(greater):
    """maximum/minimum (``greater``: which side wins): the winner gets the gradient, a tie
    splits it in half between both inputs."""

    def backward(grads, inputs, outputs):
        g = grads[0]
        self, other = inputs.args[0], inputs.args[1]
        shared = ember.where(ember.eq(self, other), g / 2, g)
        self_loses = ember.lt(self, other) if greater else ember.gt(self, other)
        other_loses = ember.gt(self, other) if greater else ember.lt(self, other)
        return where_zero(self_loses, shared), where_zero(other_loses, shared)

    return backward


def _clamp_args(inputs):
    """clamp's (self, min, max); a number bound next to a tensor one (which PyTorch does not
    accept) as a 0-d tensor, so that the tensor-bounds rules apply."""
    self, low, high = (list(inputs.args) + [None, None])[:3]
    low = inputs.kwargs.get("min", low)
    high = inputs.kwargs.get("max", high)
    if is_tensor(low) != is_tensor(high) and low is not None and high is not None:
        low, high = (b if is_tensor(b) else ember.tensor(b, dtype=self.dtype) for b in (low, high))
    return self, low, high


@derivative("clamp")
def _clamp(grads, inputs, outputs):
    """PyTorch's clamp_backward and clamp_backward_min_max: the input gets the gradient where
    min <= self <= max holds (so never where min > max, nor at a NaN); a tensor min gets it where
    self < min < max, a tensor max where self > max or max < min (max wins when the bounds cross)."""
    g = grads[0]
    self, low, high = _clamp_args(inputs)
    zero = ember.zeros((), dtype=g.dtype)
    inside = None
    if low is not None:
        inside = ember.ge(self, low)
    if high is not None:
        below_max = ember.le(self, high)
        inside = below_max if inside is None else ember.logical_and(inside, below_max)
    grad_self = g if inside is None else ember.where(inside, g, zero)
    grad_low = grad_high = None
    both = is_tensor(low) and is_tensor(high)
    if is_tensor(low) and low.requires_grad:
        picked = ember.lt(self, low)
        if both:
            picked = ember.logical_and(picked, ember.lt(low, high))
        grad_low = ember.where(picked, g, zero)
    if is_tensor(high) and high.requires_grad:
        picked = ember.gt(self, high)
        if both:
            picked = ember.logical_or(picked, ember.lt(high, low))
        grad_high = ember.where(picked, g, zero)
    return grad_self, grad_low, grad_high


@forward_derivative("clamp")
def _clamp_jvp(tangents, inputs, outputs):
    """PyTorch's clamp_jvp: the tangent of whichever value was selected (a tensor bound's when the
    comparison with self fails, NaN included); scalar bounds have no tangent."""
    self, low, high = _clamp_args(inputs)
    t_self = tangents[0]
    if not (is_tensor(low) or is_tensor(high)):
        return None if t_self is None else _clamp((t_self,), inputs, ())[0]
    zero = ember.zeros((), dtype=outputs[0].dtype)
    t_self, t_low, t_high = ((list(tangents) + [None, None])[:3])
    t_self, t_low, t_high = (zero if t is None else t for t in (t_self, t_low, t_high))
    if is_tensor(low) and is_tensor(high):
        inner = ember.where(ember.lt(self, low), t_low, ember.where(ember.gt(self, high), t_high, t_self))
        return ember.where(ember.gt(low, high), t_high, inner)
    if is_tensor(low):
        return ember.where(ember.gt(self, low), t_self, t_low)
    return ember.where(ember.lt(self, high), t_self, t_high)


derivative("maximum")(_extremum(True))
derivative("minimum")(_extremum(False))


def _nan_ignoring_extremum(greater):
    """fmax/fmin: the gradient goes to the input that was selected (self on ties)."""

    def backward(grads, inputs, outputs):
        g = grads[0]
        self, other = inputs.args[0], inputs.args[1]
        wins = ember.ge(self, other) if greater else ember.le(self, other)
        self_selected = ember.logical_or(wins, ember.isnan(other))
        return where_zero(ember.logical_not(self_selected), g), where_zero(self_selected, g)

    return backward


derivative("fmax")(_nan_ignoring_extremum(True))
derivative("fmin")(_nan_ignoring_extremum(False))


@derivative("nextafter")
def _nextafter(grads, inputs, outputs):
    g = grads[0]
    other = inputs.args[1]
    return g, ember.zeros(other.shape, dtype=g.dtype) if is_tensor(other) else None


@derivative("lerp")
def _lerp(grads, inputs, outputs):
    g = grads[0]
    self, end, weight = inputs.args[0], inputs.args[1], inputs.args[2]
    grad_weight = g * (end - self) if is_tensor(weight) and weight.requires_grad else None
    return g * (1 - weight), g * weight, grad_weight


@derivative("where")
def _where(grads, inputs, outputs):
    g = grads[0]
    cond = inputs.args[0]
    return None, where_zero(ember.logical_not(cond), g), where_zero(cond, g)


derivative("floor_divide")(not_implemented("floor_divide"))

# PyTorch gives these a zero gradient (they are piecewise constant).
for _name in ("floor", "ceil", "round", "trunc", "sign", "round_decimals"):
    derivative(_name, meta_only=True)(zero_grads)

# -- unary math --------------------------------------------------------------------------------


@_unary("neg")
def _neg(g, x, result):
    return -g


@_unary("abs")
def _abs(g, x, result):
    return g * ember.sign(x)


@_unary("frac")
def _frac(g, x, result):
    return g


@_unary("square")
def _square(g, x, result):
    return 2 * g * x


@_unary("sqrt", save_output=True)
def _sqrt(g, x, result):
    return g / (2 * result)


@_unary("rsqrt", save_output=True)
def _rsqrt(g, x, result):
    return -0.5 * g * result * result * result


@_unary("reciprocal", save_output=True)
def _reciprocal(g, x, result):
    return -g * result * result


@_unary("exp", save_output=True)
def _exp(g, x, result):
    return g * result


@_unary("exp2", save_output=True)
def _exp2(g, x, result):
    return g * result * _LN2


@_unary("expm1", save_output=True)
def _expm1(g, x, result):
    return g * (result + 1)


@_unary("log")
def _log(g, x, result):
    return g / x


@_unary("log2")
def _log2(g, x, result):
    return g / (x * _LN2)


@_unary("log10")
def _log10(g, x, result):
    return g / (x * _LN10)


@_unary("log1p")
def _log1p(g, x, result):
    return g / (x + 1)


@_unary("sin")
def _sin(g, x, result):
    return g * ember.cos(x)


@_unary("cos")
def _cos(g, x, result):
    return -g * ember.sin(x)


@_unary("tan", save_output=True)
def _tan(g, x, result):
    return g * (1 + result * result)


@_unary("asin")
def _asin(g, x, result):
    return g * ember.rsqrt(1 - x * x)


@_unary("acos")
def _acos(g, x, result):
    return -g * ember.rsqrt(1 - x * x)


@_unary("atan")
def _atan(g, x, result):
    return g / (x * x + 1)


@_unary("sinh")
def _sinh(g, x, result):
    return g * ember.cosh(x)


@_unary("cosh")
def _cosh(g, x, result):
    return g * ember.sinh(x)


@_unary("tanh", save_output=True)
def _tanh(g, x, result):
    return g * (1 - result * result)


@_unary("asinh")
def _asinh(g, x, result):
    return g * ember.rsqrt(x * x + 1)


@_unary("acosh")
def _acosh(g, x, result):
    return g * ember.rsqrt(x * x - 1)


@_unary("atanh")
def _atanh(g, x, result):
    return g / (1 - x * x)


def _no_forward_ad(op_name: str):
    def jvp(tangents, inputs, outputs):
        raise NotImplementedError(
            f"Trying to use forward AD with {op_name} that does not support it because it has not been "
            "implemented yet."
        )

    return jvp


# PyTorch has no derivative for these in-place forms (derivatives.yaml: not_implemented), in either
# mode; every other in-place op differentiates with its out-of-place formula.
for _name in ("acosh", "asinh", "atanh"):
    derivative(_name + "_")(not_implemented(f"inplace version of {_name}", NotImplementedError))
    forward_derivative(_name + "_")(_no_forward_ad(_name + "_"))


@_unary("sigmoid", save_output=True)
def _sigmoid(g, x, result):
    return g * result * (1 - result)


@_unary("erf")
def _erf(g, x, result):
    return g * _TWO_OVER_SQRT_PI * ember.exp(-(x * x))


@_unary("erfc")
def _erfc(g, x, result):
    return -g * _TWO_OVER_SQRT_PI * ember.exp(-(x * x))


@_unary("erfinv", save_output=True)
def _erfinv(g, x, result):
    return g * (0.5 * math.sqrt(math.pi)) * ember.exp(result * result)


@_unary("lgamma")
def _lgamma(g, x, result):
    return g * ember.digamma(x)


@_unary("digamma")
def _digamma(g, x, result):
    return g * ember.polygamma(1, x)


@derivative("polygamma")
def _polygamma(grads, inputs, outputs):
    n, x = inputs.args[0], inputs.args[1]
    return None, grads[0] * ember.polygamma(n + 1, x)


@derivative("logit")
def _logit(grads, inputs, outputs):
    g = grads[0]
    x = inputs.args[0]
    eps = arg(inputs, 1, "eps", -1.0)
    local = g / (x * (1 - x))
    if eps < 0:
        outside = ember.logical_or(ember.lt(x, 0), ember.gt(x, 1))
        return (ember.where(outside, ember.full((), math.nan, dtype=g.dtype), local),)
    outside = ember.logical_or(ember.lt(x, eps), ember.gt(x, 1 - eps))
    return (where_zero(outside, local),)


@derivative("nan_to_num")
def _nan_to_num(grads, inputs, outputs):
    g = grads[0]
    return (where_zero(ember.logical_not(ember.isfinite(inputs.args[0])), g),)

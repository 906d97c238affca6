"""ONNX translations of pointwise ops written with a few ONNX ops each: the bounded activations
of mobile networks (``relu6``, ``hardsigmoid``), ``celu``, ``threshold``, and the arithmetic
helpers losses and optimizers use (``log1p``, ``expm1``, ``xlogy``, ``logaddexp``, ``hypot``,
``lerp``, ``addcmul``/``addcdiv``, ``nan_to_num``, ``atan2``)."""

from __future__ import annotations

import numpy as np

from ._translations import arg, dtype_of, register


def _float(b, node, value):
    return b.const(value, dtype_of(node))


@register("relu6")
def _relu6(b, node):
    return b.emit("Clip", [b.value(node.args[0]), _float(b, node, 0.0), _float(b, node, 6.0)])


@register("hardsigmoid")
def _hardsigmoid(b, node):
    return b.emit("HardSigmoid", [b.value(node.args[0])], alpha=1.0 / 6.0, beta=0.5)


@register("celu")
def _celu(b, node):
    return b.emit("Celu", [b.value(node.args[0])], alpha=float(arg(node, 1, "alpha", 1.0)))


@register("threshold")
def _threshold(b, node):
    """``x if x > threshold else value``."""
    x = b.value(node.args[0])
    above = b.emit("Greater", [x, _float(b, node, float(arg(node, 1, "threshold", 0.0)))])
    return b.emit("Where", [above, x, _float(b, node, float(arg(node, 2, "value", 0.0)))])


@register("log1p")
def _log1p(b, node):
    return b.emit("Log", [b.emit("Add", [b.value(node.args[0]), _float(b, node, 1.0)])])


@register("expm1")
def _expm1(b, node):
    return b.emit("Sub", [b.emit("Exp", [b.value(node.args[0])]), _float(b, node, 1.0)])


@register("xlogy")
def _xlogy(b, node):
    """``x * log(y)``, 0 where x is 0 (and y is not NaN)."""
    dt = dtype_of(node)
    x, y = b.value(node.args[0], dt), b.value(node.args[1], dt)
    product = b.emit("Mul", [x, b.emit("Log", [y])])
    zero_x = b.emit("And", [b.emit("Equal", [x, _float(b, node, 0.0)]), b.emit("Not", [b.emit("IsNaN", [y])])])
    return b.emit("Where", [zero_x, _float(b, node, 0.0), product])


@register("logaddexp")
def _logaddexp(b, node):
    """max(x, y) + log(1 + exp(-|x - y|)), stable for large inputs."""
    dt = dtype_of(node)
    x, y = b.value(node.args[0], dt), b.value(node.args[1], dt)
    gap = b.emit("Neg", [b.emit("Abs", [b.emit("Sub", [x, y])])])
    tail = b.emit("Log", [b.emit("Add", [b.emit("Exp", [gap]), _float(b, node, 1.0)])])
    return b.emit("Add", [b.emit("Max", [x, y]), tail])


@register("hypot")
def _hypot(b, node):
    dt = dtype_of(node)
    x, y = b.value(node.args[0], dt), b.value(node.args[1], dt)
    return b.emit("Sqrt", [b.emit("Add", [b.emit("Mul", [x, x]), b.emit("Mul", [y, y])])])


@register("lerp")
def _lerp(b, node):
    """start + weight * (end - start)."""
    dt = dtype_of(node)
    start, end = b.value(node.args[0], dt), b.value(node.args[1], dt)
    weight = b.value(arg(node, 2, "weight"), dt)
    return b.emit("Add", [start, b.emit("Mul", [weight, b.emit("Sub", [end, start])])])


@register("addcmul", "addcdiv")
def _addc(b, node):
    """self + value * t1 (*|/) t2."""
    dt = dtype_of(node)
    x, t1, t2 = (b.value(a, dt) for a in node.args[:3])
    combined = b.emit("Mul" if node.target.name == "addcmul" else "Div", [t1, t2])
    value = arg(node, 3, "value", 1)
    if value != 1:
        combined = b.emit("Mul", [combined, b.value(value, dt)])
    return b.emit("Add", [x, combined])


@register("nan_to_num")
def _nan_to_num(b, node):
    """NaN -> ``nan``; +-inf -> ``posinf``/``neginf`` (the dtype's largest values by default)."""
    dt = dtype_of(node)
    finfo = np.finfo(np.float32 if str(dt).endswith("float32") else np.float64)
    nan = arg(node, 1, "nan", 0.0)
    posinf = arg(node, 2, "posinf", None)
    neginf = arg(node, 3, "neginf", None)
    x = b.value(node.args[0])
    out = b.emit("Where", [b.emit("IsNaN", [x]), _float(b, node, 0.0 if nan is None else float(nan)), x])
    out = b.emit("Where", [b.emit("IsInf", [out], detect_negative=0),
                           _float(b, node, float(finfo.max) if posinf is None else float(posinf)), out])
    return b.emit("Where", [b.emit("IsInf", [out], detect_positive=0),
                            _float(b, node, float(finfo.min) if neginf is None else float(neginf)), out])


@register("atan2")
def _atan2(b, node):
    """atan(y / x) moved to the quadrant of (x, y); x == 0 gives +-pi/2 (0 where y is 0 too)."""
    dt = dtype_of(node)
    y, x = b.value(node.args[0], dt), b.value(node.args[1], dt)
    zero = _float(b, node, 0.0)
    base = b.emit("Atan", [b.emit("Div", [y, x])])
    y_neg = b.emit("Less", [y, zero])
    shift = b.emit("Where", [y_neg, _float(b, node, -np.pi), _float(b, node, np.pi)])
    left = b.emit("Add", [base, shift])
    on_axis = b.emit("Where", [y_neg, _float(b, node, -np.pi / 2),
                               b.emit("Where", [b.emit("Greater", [y, zero]), _float(b, node, np.pi / 2), zero])])
    out = b.emit("Where", [b.emit("Less", [x, zero]), left, base])
    return b.emit("Where", [b.emit("Equal", [x, zero]), on_axis, out])

"""The translation table: one function per ember op, emitting standard ONNX ops (opset 18+).

``TRANSLATIONS[op name](builder, node)`` returns the ONNX value name of the node's result
(or a list of names for ops returning several tensors). An op missing from the table fails
the export naming it; a use the translation cannot express (a training-mode batch norm,
max-pool indices, a grouped-query attention) fails the same way.
"""

from __future__ import annotations

import math

import ember
from ember.export._program import node_shape_dtype

from ._builder import Builder, UnsupportedOp, onnx_dtype

TRANSLATIONS: dict = {}


def register(*names: str):
    def wrap(fn):
        for n in names:
            TRANSLATIONS[n] = fn
        return fn

    return wrap


def arg(node, index: int, name: str, default=None):
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name, default)


def dtype_of(node):
    return node_shape_dtype(node)[1]


def shape_of(node):
    return node_shape_dtype(node)[0]


def operand(b: Builder, x, like):
    """An operand of a pointwise op: numbers take the dtype of ``like`` (the op's result)."""
    return b.value(x, dtype_of(like) if not hasattr(x, "op") else None)


# ------------------------------------------------------------------ pointwise

_UNARY = {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "neg": "Neg", "abs": "Abs", "erf": "Erf", "reciprocal": "Reciprocal", "floor": "Floor", "ceil": "Ceil",
          "sin": "Sin", "cos": "Cos", "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh",
          "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh", "sign": "Sign",
          "logical_not": "Not", "bitwise_not": "Not", "isnan": "IsNaN", "round": "Round", "softsign": "Softsign",
          "selu": "Selu", "mish": "Mish", "hardswish": "HardSwish"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "eq": "Equal", "lt": "Less",
           "gt": "Greater", "le": "LessOrEqual", "ge": "GreaterOrEqual", "maximum": "Max", "minimum": "Min",
           "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor", "bitwise_and": "And",
           "bitwise_or": "Or", "remainder": "Mod", "fmod": "Mod"}


def _unary(onnx_op):
    def translate(b, node):
        return b.emit(onnx_op, [b.value(node.args[0])])

    return translate


def _binary(name, onnx_op):
    def translate(b, node):
        x, y = node.args[0], node.args[1]
        like = x if hasattr(x, "op") else y
        out_dtype = dtype_of(node)
        in_dtype = dtype_of(like) if hasattr(like, "op") else out_dtype
        if onnx_op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"):
            # Compare in the promoted dtype (an int tensor against 0.5 compares as float).
            common = ember.result_type(_example(x), _example(y))
            xs = _cast_to(b, x, b.value(x, common), common)
            ys = _cast_to(b, y, b.value(y, common), common)
            return b.emit(onnx_op, [xs, ys])
        xs, ys = operand(b, x, like), operand(b, y, like)
        xs, ys = _cast_to(b, x, xs, out_dtype), _cast_to(b, y, ys, out_dtype)
        if onnx_op == "Mod":
            if name == "remainder" and out_dtype.is_floating_point:
                # Python's remainder takes the divisor's sign; ONNX's float Mod is C's fmod.
                quotient = b.emit("Floor", [b.emit("Div", [xs, ys])])
                return b.emit("Sub", [xs, b.emit("Mul", [quotient, ys])])
            return b.emit("Mod", [xs, ys], fmod=1 if name == "fmod" or out_dtype.is_floating_point else 0)
        if name == "div" and not out_dtype.is_floating_point and in_dtype is not None:
            raise UnsupportedOp("div of integer tensors")
        return b.emit(onnx_op, [xs, ys])

    return translate


def _example(x):
    """A stand-in for ``result_type``: a 0-d tensor of a node's dtype, or the Python number."""
    if hasattr(x, "op"):
        dt = dtype_of(x)
        return ember.zeros((), dtype=dt) if len(shape_of(x) or ()) == 0 else ember.zeros((1,), dtype=dt)
    return x


def _cast_to(b, x, name, dtype):
    if hasattr(x, "op") and dtype_of(x) is not None and dtype_of(x) != dtype:
        return b.emit("Cast", [name], to=onnx_dtype(dtype))
    if hasattr(x, "op") and "sym_expr" in x.meta and dtype is not ember.int64:
        # A symbolic size (batchmean's sum / x.size(0)) is an int64 value: cast to the op's dtype.
        return b.emit("Cast", [name], to=onnx_dtype(dtype))
    return name


for _n, _o in _UNARY.items():
    register(_n)(_unary(_o))
for _n, _o in _BINARY.items():
    register(_n)(_binary(_n, _o))


@register("ne")
def _ne(b, node):
    return b.emit("Not", [_binary("eq", "Equal")(b, node)])


@register("rsqrt")
def _rsqrt(b, node):
    return b.emit("Reciprocal", [b.emit("Sqrt", [b.value(node.args[0])])])


@register("square")
def _square(b, node):
    x = b.value(node.args[0])
    return b.emit("Mul", [x, x])


@register("add_scaled")
def _add_scaled(b, node):
    x, y, alpha = node.args[:3]
    scaled = b.emit("Mul", [operand(b, y, node), b.value(alpha, dtype_of(node))])
    return b.emit("Add", [operand(b, x, node), scaled])


@register("gelu")
def _gelu(b, node):
    x = b.value(node.args[0])
    dt = dtype_of(node)
    if b.opset >= 20:
        return b.emit("Gelu", [x])
    inner = b.emit("Erf", [b.emit("Mul", [x, b.const(1 / math.sqrt(2), dt)])])
    return b.emit("Mul", [b.emit("Mul", [x, b.const(0.5, dt)]), b.emit("Add", [inner, b.const(1.0, dt)])])


@register("gelu_tanh")
def _gelu_tanh(b, node):
    x = b.value(node.args[0])
    dt = dtype_of(node)
    if b.opset >= 20:
        return b.emit("Gelu", [x], approximate="tanh")
    cube = b.emit("Mul", [b.emit("Mul", [x, x]), x])
    inner = b.emit("Add", [x, b.emit("Mul", [cube, b.const(0.044715, dt)])])
    t = b.emit("Tanh", [b.emit("Mul", [inner, b.const(math.sqrt(2 / math.pi), dt)])])
    return b.emit("Mul", [b.emit("Mul", [x, b.const(0.5, dt)]), b.emit("Add", [t, b.const(1.0, dt)])])


@register("silu")
def _silu(b, node):
    x = b.value(node.args[0])
    return b.emit("Mul", [x, b.emit("Sigmoid", [x])])


@register("leaky_relu")
def _leaky_relu(b, node):
    return b.emit("LeakyRelu", [b.value(node.args[0])], alpha=float(arg(node, 1, "negative_slope", 0.01)))


@register("elu")
def _elu(b, node):
    alpha, scale, input_scale = arg(node, 1, "alpha", 1.0), arg(node, 2, "scale", 1.0), arg(node, 3, "input_scale", 1.0)
    if scale != 1.0 or input_scale != 1.0:
        raise UnsupportedOp("elu with scale/input_scale")
    return b.emit("Elu", [b.value(node.args[0])], alpha=float(alpha))


@register("hardtanh", "clamp")
def _clip(b, node):
    dt = dtype_of(node)
    if node.target.name == "hardtanh":
        lo, hi = arg(node, 1, "min_val", -1.0), arg(node, 2, "max_val", 1.0)
    else:
        lo, hi = arg(node, 1, "min"), arg(node, 2, "max")
    x = b.value(node.args[0])
    if hasattr(lo, "op") or hasattr(hi, "op"):
        out = x
        if lo is not None:
            out = b.emit("Max", [out, operand(b, lo, node)])
        if hi is not None:
            out = b.emit("Min", [out, operand(b, hi, node)])
        return out
    return b.emit("Clip", [x, b.const(lo, dt) if lo is not None else None, b.const(hi, dt) if hi is not None else None])


@register("softplus")
def _softplus(b, node):
    beta, threshold = arg(node, 1, "beta", 1.0), arg(node, 2, "threshold", 20.0)
    x = b.value(node.args[0])
    dt = dtype_of(node)
    bx = b.emit("Mul", [x, b.const(beta, dt)])
    soft = b.emit("Div", [b.emit("Softplus", [bx]), b.const(beta, dt)])
    return b.emit("Where", [b.emit("Greater", [bx, b.const(threshold, dt)]), x, soft])


@register("where")
def _where(b, node):
    cond, x, y = node.args[:3]
    return b.where(b.value(cond), operand(b, x, node), operand(b, y, node), dtype_of(node))


@register("_to_copy")
def _to_copy(b, node):
    src = node.args[0]
    if dtype_of(src) == dtype_of(node):
        return b.value(src)  # a copy (``contiguous``): values are values in ONNX
    return b.emit("Cast", [b.value(src)], to=onnx_dtype(dtype_of(node)))


@register("clone", "alias", "contiguous", "detach")
def _identity(b, node):
    return b.value(node.args[0])


@register("masked_fill")
def _masked_fill(b, node):
    x, mask, value = node.args[:3]
    return b.emit("Where", [b.value(mask), operand(b, value, node), b.value(x)])


# ------------------------------------------------------------------ linear algebra


@register("addmm")
def _addmm(b, node):
    bias, m1, m2 = node.args[:3]
    beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
    trans_b = 0
    if _is_weight_transpose(m2):  # x @ w.t(): Gemm reads w transposed, no Transpose node
        m2, trans_b = m2.args[0], 1
    return b.emit("Gemm", [b.value(m1), b.value(m2), b.value(bias)], alpha=float(alpha), beta=float(beta),
                  transB=trans_b)


def _is_weight_transpose(node) -> bool:
    return (hasattr(node, "op") and getattr(node.target, "name", None) == "transpose"
            and len(shape_of(node)) == 2 and sorted(node.args[1:3]) in ([0, 1], [-2, -1], [-1, 0]))


@register("mm", "bmm", "matmul", "mv", "dot")
def _matmul(b, node):
    return b.emit("MatMul", [b.value(node.args[0]), b.value(node.args[1])])


@register("baddbmm")
def _baddbmm(b, node):
    bias, b1, b2 = node.args[:3]
    beta, alpha = node.kwargs.get("beta", 1), node.kwargs.get("alpha", 1)
    dt = dtype_of(node)
    prod = b.emit("MatMul", [b.value(b1), b.value(b2)])
    if alpha != 1:
        prod = b.emit("Mul", [prod, b.const(alpha, dt)])
    if beta == 0:
        return prod
    base = b.value(bias) if beta == 1 else b.emit("Mul", [b.value(bias), b.const(beta, dt)])
    return b.emit("Add", [base, prod])

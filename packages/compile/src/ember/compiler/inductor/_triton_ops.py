"""The Triton spelling of each scalar op of the loop IR, Triton types, and literals.

Semantics follow the C++ backend's table (``_cpp_ops``), which follows ember's eager kernels:
NaN wins in maximum/minimum/clamp, integer division truncates (``div``) or floors
(``floor_divide``) with Python's sign rules, and half types are computed in float32. Math
functions Triton's core lacks come from ``libdevice`` (on the GPU, NVIDIA's libdevice; under
``TRITON_INTERPRET=1``, NumPy: see ``_triton_libdevice``). An op missing here raises
``KeyError``: the graph then runs eagerly.
"""

from __future__ import annotations

import math

from ember._src import dtypes as dt

TL_TYPES = {
    dt.bool: "tl.int1", dt.uint8: "tl.uint8", dt.int8: "tl.int8", dt.int16: "tl.int16", dt.int32: "tl.int32",
    dt.int64: "tl.int64", dt.float16: "tl.float16", dt.bfloat16: "tl.bfloat16", dt.float32: "tl.float32",
    dt.float64: "tl.float64",
}
# Pointer element types in the kernel signature (Triton's short names).
SIG_TYPES = {
    dt.bool: "i1", dt.uint8: "u8", dt.int8: "i8", dt.int16: "i16", dt.int32: "i32", dt.int64: "i64",
    dt.float16: "fp16", dt.bfloat16: "bf16", dt.float32: "fp32", dt.float64: "fp64",
}

# Helpers each kernel source carries (only those it uses are emitted).
HELPERS = {
    # integer division that truncates (C's `/`) and floors (Python's `//`), whatever sign rule
    # the backend's own `//` and `%` follow: both agree on non-negative operands
    "_div_trunc": '''@triton.jit
def _div_trunc(a, b):
    q = tl.abs(a) // tl.abs(b)
    return tl.where((a < 0) != (b < 0), -q, q)
''',
    "_floordiv_int": '''@triton.jit
def _floordiv_int(a, b):
    q = _div_trunc(a, b)
    return tl.where((q * b != a) & ((a < 0) != (b < 0)), q - 1, q)
''',
    "_remainder_int": '''@triton.jit
def _remainder_int(a, b):
    r = a - _div_trunc(a, b) * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
''',
    "_floordiv_float": '''@triton.jit
def _floordiv_float(a, b):
    mod = libdevice.fmod(a, b)
    div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1, fl)
    return tl.where(b == 0, a / b, tl.where(div == 0, libdevice.copysign(div * 0, a / b), fl))
''',
    "_remainder_float": '''@triton.jit
def _remainder_float(a, b):
    mod = libdevice.fmod(a, b)
    return tl.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)
''',
    "_maximum": '''@triton.jit
def _maximum(a, b):
    return tl.where(a != a, a, tl.where(b != b, b, tl.where(a > b, a, b)))
''',
    "_minimum": '''@triton.jit
def _minimum(a, b):
    return tl.where(a != a, a, tl.where(b != b, b, tl.where(a < b, a, b)))
''',
    "_logaddexp": '''@triton.jit
def _logaddexp(a, b):
    m = tl.where(a > b, a, b)
    r = m + libdevice.log1p(tl.exp(-tl.abs(a - b)))
    return tl.where((a == b) & (tl.abs(a) == float("inf")), a, r)
''',
    # max/min combines where a NaN wins (one max.NaN instruction on the GPU; eager propagates NaN)
    "_max_nan_combine": '''@triton.jit
def _max_nan_combine(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
    "_min_nan_combine": '''@triton.jit
def _min_nan_combine(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
    "_prod_combine": '''@triton.jit
def _prod_combine(a, b):
    return a * b
''',
}
HELPER_DEPS = {"_floordiv_int": ("_div_trunc",), "_remainder_int": ("_div_trunc",)}

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_SIMPLE_BINARY = {"add": "+", "sub": "-", "mul": "*", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_CORE_MATH = {"sqrt": "tl.sqrt", "exp": "tl.exp", "exp2": "tl.exp2", "log": "tl.log", "log2": "tl.log2",
              "sin": "tl.sin", "cos": "tl.cos", "erf": "tl.erf"}
_LIB_MATH = set("expm1 log10 log1p tan asin acos atan sinh cosh tanh asinh acosh atanh erfc".split())
_LIB_MATH2 = {"fmod": "fmod", "pow": "pow", "atan2": "atan2", "hypot": "hypot", "copysign": "copysign",
              "nextafter": "nextafter"}


# Ops written as infix arithmetic (or tl.where): Python literals among their arguments take the
# tensor operand's type. Every other op gets its literal arguments as typed tensors.
WEAKLY_TYPED = frozenset([*_SIMPLE_BINARY, "div", *_COMPARE, "where", "neg", "square", "relu", "leaky_relu",
                          "hardtanh", "threshold", "logical_not", "logical_and", "logical_or", "logical_xor",
                          "isnan", "isinf", "isfinite", "isposinf", "isneginf"])


def literal(value, dtype) -> str:
    """A Python literal Triton folds into the expression's type (weakly typed)."""
    if dtype is dt.bool:
        return "True" if value else "False"
    if dtype.is_floating_point:
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return ('' if value > 0 else '-') + 'float("inf")'
        return repr(float(value))
    return str(int(value))


def op_text(op: str, args: list, dtype, arg_dtypes, need) -> str:
    """Triton text of ``op`` on the argument texts ``args``, computed in ``dtype``.

    ``need(helper)`` records a helper function the text calls.
    """
    a = args[0] if args else None
    b = args[1] if len(args) > 1 else None
    fl = dtype.is_floating_point
    arg_fl = bool(arg_dtypes) and arg_dtypes[0].is_floating_point

    def h(name):
        need(name)
        return name

    if op in _SIMPLE_BINARY:
        if dtype is dt.bool and op in ("add", "mul"):
            return f"({a} {'|' if op == 'add' else '&'} {b})"
        return f"({a} {_SIMPLE_BINARY[op]} {b})"
    if op == "div":
        return f"({a} / {b})" if fl else f"{h('_div_trunc')}({a}, {b})"
    if op in _COMPARE:
        return f"({a} {_COMPARE[op]} {b})"
    if op in _CORE_MATH:
        return f"{_CORE_MATH[op]}({a})"
    if op in _LIB_MATH:
        return f"libdevice.{op}({a})"
    if op in _LIB_MATH2:
        return f"libdevice.{_LIB_MATH2[op]}({a}, {b})"
    if op in ("fmax", "fmin"):
        return f"libdevice.{op}({a}, {b})" if fl else f"tl.{'maximum' if op == 'fmax' else 'minimum'}({a}, {b})"
    if op in ("maximum", "clamp_min", "minimum", "clamp_max"):
        big = op in ("maximum", "clamp_min")
        if fl:
            return f"{h('_maximum' if big else '_minimum')}({a}, {b})"
        return f"tl.{'maximum' if big else 'minimum'}({a}, {b})"

    def hs(x):
        return f"(tl.minimum(tl.maximum({x} + 3.0, 0.0), 6.0) / 6.0)"

    table = {
        "neg": lambda: f"(-{a})",
        "abs": lambda: f"tl.abs({a})",
        "rsqrt": lambda: f"(1.0 / tl.sqrt({a}))",
        "reciprocal": lambda: f"(1.0 / {a})",
        "sigmoid": lambda: f"(1.0 / (1.0 + tl.exp(-{a})))",
        "silu": lambda: f"({a} / (1.0 + tl.exp(-{a})))",
        "gelu": lambda: f"(0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476)))",
        "gelu_tanh": lambda: (f"(0.5 * {a} * (1.0 + libdevice.tanh(0.7978845608028654 * "
                              f"({a} + 0.044715 * {a} * {a} * {a}))))"),
        "mish": lambda: f"({a} * libdevice.tanh(libdevice.log1p(tl.exp({a}))))",
        "hardsigmoid": lambda: hs(a),
        "hardswish": lambda: f"({a} * {hs(a)})",
        "selu": lambda: f"({_SELU_SCALE!r} * tl.where({a} > 0, {a}, {_SELU_ALPHA!r} * libdevice.expm1({a})))",
        "softsign": lambda: f"({a} / (1.0 + tl.abs({a})))",
        "tanhshrink": lambda: f"({a} - libdevice.tanh({a}))",
        "softplus": lambda: (f"tl.where(({a} * {args[1]}) > {args[2]}, {a}, "
                             f"libdevice.log1p(tl.exp({a} * {args[1]})) / {args[1]})"),
        "elu": lambda: (f"tl.where({a} <= 0, libdevice.expm1({a} * {args[3]}) * {args[1]} * {args[2]}, "
                        f"{a} * {args[2]})"),
        "celu": lambda: f"tl.where({a} <= 0, libdevice.expm1({a} / {args[1]}) * {args[1]}, {a})",
        "square": lambda: f"({a} * {a})",
        "round_to_float16": lambda: f"{a}.to(tl.float16).to(tl.float32)",
        "round_to_bfloat16": lambda: f"{a}.to(tl.bfloat16).to(tl.float32)",
        "frac": lambda: f"({a} - libdevice.trunc({a}))",
        "relu": lambda: f"tl.where({a} < 0, 0, {a})",
        "relu6": lambda: (f"{h('_minimum')}({h('_maximum')}({a}, 0.0), 6.0)" if fl else
                          f"tl.minimum(tl.maximum({a}, 0), 6)"),
        "leaky_relu": lambda: f"tl.where({a} > 0, {a}, {a} * {args[1]})",
        "hardtanh": lambda: f"tl.where({a} < {args[1]}, {args[1]}, tl.where({a} > {args[2]}, {args[2]}, {a}))",
        "threshold": lambda: f"tl.where({a} <= {args[1]}, {args[2]}, {a})",
        "sign": lambda: f"((0 < {a}).to({TL_TYPES[dtype]}) - ({a} < 0).to({TL_TYPES[dtype]}))",
        "floor": lambda: f"tl.floor({a})" if fl else a,
        "ceil": lambda: f"tl.ceil({a})" if fl else a,
        "trunc": lambda: f"libdevice.trunc({a})" if fl else a,
        "round": lambda: f"libdevice.rint({a})" if fl else a,
        "isnan": lambda: f"({a} != {a})",
        "isinf": lambda: f"(tl.abs({a}) == float(\"inf\"))" if arg_fl else f"({a} != {a})",
        "isfinite": lambda: f"(tl.abs({a}) < float(\"inf\"))" if arg_fl else f"({a} == {a})",
        "isposinf": lambda: f"({a} == float(\"inf\"))" if arg_fl else f"({a} != {a})",
        "isneginf": lambda: f"({a} == -float(\"inf\"))" if arg_fl else f"({a} != {a})",
        "signbit": lambda: f"(libdevice.signbit({a}) != 0)" if arg_fl else f"({a} < 0)",
        "logical_not": lambda: f"({a} == 0)",
        "logical_and": lambda: f"(({a} != 0) & ({b} != 0))",
        "logical_or": lambda: f"(({a} != 0) | ({b} != 0))",
        "logical_xor": lambda: f"(({a} != 0) != ({b} != 0))",
        "floor_divide": lambda: f"{h('_floordiv_float' if fl else '_floordiv_int')}({a}, {b})",
        "remainder": lambda: f"{h('_remainder_float' if fl else '_remainder_int')}({a}, {b})",
        "logaddexp": lambda: f"{h('_logaddexp')}({a}, {b})",
        "logaddexp2": lambda: (f"({h('_logaddexp')}({a} * {math.log(2)!r}, {b} * {math.log(2)!r}) / "
                               f"{math.log(2)!r})"),
        "where": lambda: f"tl.where({a}, {b}, {args[2]})",
        "lerp": lambda: (f"tl.where(tl.abs({args[2]}) < 0.5, {a} + {args[2]} * ({b} - {a}), "
                         f"{b} - ({b} - {a}) * (1.0 - {args[2]}))"),
    }
    if op not in table:
        raise KeyError(op)
    if op == "floor_divide" and fl:
        need("_floordiv_float")
    return table[op]()


def helper_source(names) -> str:
    """The helper functions ``names`` need, dependencies first."""
    order: list[str] = []

    def add(n):
        for d in HELPER_DEPS.get(n, ()):
            add(d)
        if n not in order:
            order.append(n)

    for n in sorted(names):
        add(n)
    return "\n\n".join(HELPERS[n] for n in order)

"""Triton expressions of the elementwise ops, by op name and class of compute dtype.

Each entry is a format string over the operands' computed values (``{0}``, ``{1}`` ...;
parameters of parameterized activations follow the tensor operand). "f" entries serve
floating compute dtypes (float32, float64; float16/bfloat16 compute in float32), "i" entries
integer ones, "b" bool and "c" complex ones (complex64/complex128 as (real, imag) pairs of
float32/float64: ``{0.r}``/``{0.i}`` name an operand's parts, and an entry with a complex result
is a pair of expressions, "re, im", or a PRELUDE helper returning one). A missing class means
the op has no CUDA kernel for that dtype (NotImplementedError naming op, dtype and device, never a
silently wrong result).
"""

from __future__ import annotations

from ember._src import dtypes as dt

L = "libdevice."
_NANMAX = "tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)"
_NANMIN = "tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)"

BINARY = {
    "add": {"f": "{0} + {1}", "i": "{0} + {1}", "b": "{0} | {1}"},
    "sub": {"f": "{0} - {1}", "i": "{0} - {1}"},
    "mul": {"f": "{0} * {1}", "i": "{0} * {1}", "b": "{0} & {1}"},
    "div": {"f": "_div({0}, {1})"},
    "maximum": {"f": _NANMAX, "i": "tl.maximum({0}, {1})", "b": "{0} | {1}"},
    "minimum": {"f": _NANMIN, "i": "tl.minimum({0}, {1})", "b": "{0} & {1}"},
    "fmax": {"f": "tl.where({0} != {0}, {1}, tl.where({1} != {1}, {0}, tl.maximum({0}, {1})))",
             "i": "tl.maximum({0}, {1})", "b": "{0} | {1}"},
    "fmin": {"f": "tl.where({0} != {0}, {1}, tl.where({1} != {1}, {0}, tl.minimum({0}, {1})))",
             "i": "tl.minimum({0}, {1})", "b": "{0} & {1}"},
    "pow": {"f": L + "pow({0}, {1})", "i": "_ipow({0}, {1})"},
    "atan2": {"f": L + "atan2({0}, {1})"},
    "hypot": {"f": L + "hypot({0}, {1})"},
    "copysign": {"f": L + "copysign({0}, {1})"},
    "nextafter": {"f": L + "nextafter({0}, {1})"},
    "logaddexp": {"f": "tl.where(({0} == {1}) & (tl.abs({0}) == float('inf')), {0}, tl.maximum({0}, {1}) + "
                       + L + "log1p(" + L + "exp(-tl.abs({0} - {1}))))"},
    "logaddexp2": {"f": "tl.where(({0} == {1}) & (tl.abs({0}) == float('inf')), {0}, tl.maximum({0}, {1}) + "
                        + L + "log1p(" + L + "exp2(-tl.abs({0} - {1}))) * 1.4426950408889634)"},
    "xlogy": {"f": "tl.where({1} != {1}, {1}, tl.where({0} == 0, 0.0, {0} * " + L + "log({1})))"},
    "fmod": {"f": L + "fmod({0}, {1})", "i": "{0} % {1}"},
    "remainder": {
        "f": "_rem_f(" + L + "fmod({0}, {1}), {1})",
        "i": "tl.where((({0} % {1}) != 0) & ((({0} % {1}) < 0) != ({1} < 0)), ({0} % {1}) + {1}, {0} % {1})"},
    "floor_divide": {
        "f": L + "floor(" + "_div({0}, {1}))",
        "i": "({0} // {1}) - ((({0} % {1}) != 0) & (({0} < 0) != ({1} < 0))).to({0}.dtype)"},
    "eq": {"f": "{0} == {1}", "i": "{0} == {1}", "b": "{0} == {1}"},
    "ne": {"f": "{0} != {1}", "i": "{0} != {1}", "b": "{0} != {1}"},
    "lt": {"f": "{0} < {1}", "i": "{0} < {1}", "b": "{0}.to(tl.int8) < {1}.to(tl.int8)"},
    "le": {"f": "{0} <= {1}", "i": "{0} <= {1}", "b": "{0}.to(tl.int8) <= {1}.to(tl.int8)"},
    "gt": {"f": "{0} > {1}", "i": "{0} > {1}", "b": "{0}.to(tl.int8) > {1}.to(tl.int8)"},
    "ge": {"f": "{0} >= {1}", "i": "{0} >= {1}", "b": "{0}.to(tl.int8) >= {1}.to(tl.int8)"},
    "logical_and": {"f": "({0} != 0) & ({1} != 0)", "i": "({0} != 0) & ({1} != 0)", "b": "{0} & {1}"},
    "logical_or": {"f": "({0} != 0) | ({1} != 0)", "i": "({0} != 0) | ({1} != 0)", "b": "{0} | {1}"},
    "logical_xor": {"f": "({0} != 0) != ({1} != 0)", "i": "({0} != 0) != ({1} != 0)", "b": "{0} != {1}"},
    "bitwise_and": {"i": "{0} & {1}", "b": "{0} & {1}"},
    "bitwise_or": {"i": "{0} | {1}", "b": "{0} | {1}"},
    "bitwise_xor": {"i": "{0} ^ {1}", "b": "{0} ^ {1}"},
    "bitwise_left_shift": {"i": "{0} << {1}"},
    "bitwise_right_shift": {"i": "{0} >> {1}"},
}

_SIGMOID = "_div(1.0, 1.0 + " + L + "exp(-{0}))"
_SOFTPLUS = "tl.where({0} > 20.0, {0}, " + L + "log1p(" + L + "exp({0})))"

UNARY = {
    "abs": {"f": "tl.abs({0})", "i": "tl.abs({0})"},
    "neg": {"f": "{0} * -1.0", "i": "-{0}"},  # (-0 for +0 as PyTorch's; Triton 3.6's -x is 0 - x, +0)
    "sign": {"f": "({0} > 0).to({0}.dtype) - ({0} < 0).to({0}.dtype)",
             "i": "({0} > 0).to({0}.dtype) - ({0} < 0).to({0}.dtype)", "b": "{0}"},
    "floor": {"f": L + "floor({0})", "i": "{0}"},
    "ceil": {"f": L + "ceil({0})", "i": "{0}"},
    "trunc": {"f": L + "trunc({0})", "i": "{0}"},
    "round": {"f": L + "rint({0})", "i": "{0}"},
    "frac": {"f": "{0} - " + L + "trunc({0})"},
    "square": {"f": "{0} * {0}", "i": "{0} * {0}"},
    "bitwise_not": {"i": "~{0}", "b": "{0} == 0"},
    "reciprocal": {"f": "_div(1.0, {0})"},
    "sigmoid": {"f": _SIGMOID},
    "relu": {"f": "tl.where({0} < 0, 0, {0})", "i": "tl.where({0} < 0, 0, {0})"},
    "relu6": {"f": "tl.where({0} != {0}, {0}, tl.minimum(tl.maximum({0}, 0.0), 6.0))",
              "i": "tl.minimum(tl.maximum({0}, 0), 6)"},
    "gelu": {"f": "0.5 * {0} * (1.0 + " + L + "erf({0} * 0.7071067811865476))"},
    "gelu_tanh": {"f": "0.5 * {0} * (1.0 + " + L + "tanh(0.7978845608028654 * ({0} + 0.044715 * {0} * {0} * {0})))"},
    "silu": {"f": "_div({0}, 1.0 + " + L + "exp(-{0}))"},
    "mish": {"f": "{0} * " + L + "tanh(" + _SOFTPLUS + ")"},
    "hardsigmoid": {"f": "tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0"},
    "hardswish": {"f": "{0} * tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0"},
    "selu": {"f": "1.0507009873554805 * tl.where({0} > 0, {0}, 1.6732632423543772 * (" + L + "expm1({0})))"},
    "softsign": {"f": "_div({0}, 1.0 + tl.abs({0}))"},
    "tanhshrink": {"f": "{0} - " + L + "tanh({0})"},
    "softplus": {"f": "tl.where({0} * {1} > {2}, {0}, " + L + "log1p(" + L + "exp({0} * {1})) / {1})"},
    "elu": {"f": "tl.where({0} > 0, {0} * {2}, {1} * {2} * " + L + "expm1({0} * {3}))"},
    "celu": {"f": "tl.where({0} > 0, {0}, {1} * " + L + "expm1({0} / {1}))"},
    "leaky_relu": {"f": "tl.where({0} > 0, {0}, {0} * {1})"},
    "hardtanh": {"f": "tl.where({0} != {0}, {0}, tl.minimum(tl.maximum({0}, {1}), {2}))",
                 "i": "tl.minimum(tl.maximum({0}, {1}.to({0}.dtype)), {2}.to({0}.dtype))"},
    "threshold": {"f": "tl.where({0} <= {1}, {2}, {0})", "i": "tl.where({0} <= {1}, {2}, {0})"},
    "nan_to_num": {"f": "tl.where({0} != {0}, {1}, tl.where({0} == float('inf'), {2}, "
                        "tl.where({0} == -float('inf'), {3}, {0})))", "i": "{0}"},
    "isnan": {"f": "{0} != {0}", "i": "{0} != {0}", "b": "{0} != {0}"},
    "isinf": {"f": "tl.abs({0}) == float('inf')", "i": "{0} != {0}", "b": "{0} != {0}"},
    "isfinite": {"f": "tl.abs({0}) < float('inf')", "i": "{0} == {0}", "b": "{0} == {0}"},
    "isposinf": {"f": "{0} == float('inf')", "i": "{0} != {0}", "b": "{0} != {0}"},
    "isneginf": {"f": "{0} == -float('inf')", "i": "{0} != {0}", "b": "{0} != {0}"},
    "signbit": {"f": L + "signbit({0}) != 0", "i": "{0} < 0", "b": "{0} != {0}"},
    "logical_not": {"f": "{0} == 0", "i": "{0} == 0", "b": "{0} == 0"},
}
for _name in ("sqrt rsqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh "
              "acosh atanh erf erfc erfinv lgamma").split():
    UNARY[_name] = {"f": L + _name + "({0})"}

# Bessel-type special functions through CUDA's libdevice (the CPU kernels' Cephes-style series agree to a
# few ulps); logit's parameter {1} is its eps, negative for none.
for _name, _fn in (("i0", "cyl_bessel_i0"), ("special_i1", "cyl_bessel_i1"), ("special_modified_bessel_i0",
                   "cyl_bessel_i0"), ("special_modified_bessel_i1", "cyl_bessel_i1"), ("special_erfcx", "erfcx"),
                   ("special_bessel_j0", "j0"), ("special_bessel_j1", "j1"), ("special_bessel_y0", "y0"),
                   ("special_bessel_y1", "y1")):
    UNARY[_name] = {"f": L + _fn + "({0})"}
# digamma in float64 as the CPU kernel (PRELUDE's _digamma); round(x, decimals) with {1} = 10^decimals in
# the compute dtype, as the CPU kernel (round half to even)
UNARY["digamma"] = {"f": "_digamma({0})"}
# log(Phi(x)) in float64 as the CPU kernel: through erfcx left of -1 (erfc would underflow), else log1p
_T64 = "({0}.to(tl.float64) * 0.7071067811865476)"
UNARY["special_log_ndtr"] = {"f": "tl.where(" + _T64 + " < -0.7071067811865476, " + L + "log(" + L + "erfcx(-" + _T64
                             + ") * 0.5) - " + _T64 + " * " + _T64 + ", " + L + "log1p(-" + L + "erfc(" + _T64
                             + ") * 0.5))"}
UNARY["round_decimals"] = {"f": "tl.where({1} == 1.0, " + L + "rint({0}), tl.where({1} > 1.0, _div(" + L
                           + "rint({0} * {1}), {1}), " + L + "rint(_div({0}, _div(1.0, {1}))) * _div(1.0, {1})))"}
_LOGIT_X = "tl.where({1} < 0, {0}, tl.minimum(tl.maximum({0}, {1}), 1.0 - {1}))"
UNARY["logit"] = {"f": L + "log(_div(" + _LOGIT_X + ", 1.0 - " + _LOGIT_X + "))"}

# Complex entries (PyTorch's complex kernels are std::complex's formulas; these agree to a few ulps away from
# overflow, with C99's special values for division by zero, 0 ** b and exp/sqrt of zero and of real values).
# Negation is x * -1.0 wherever the sign of a zero part matters (Triton's -x is 0 - x): it picks the side of
# a branch cut (asin(3 + 0j) vs asin(3 - 0j)).
_C1 = "{0.r}, {0.i}"
_COMPLEX_BINARY = {
    "add": "{0.r} + {1.r}, {0.i} + {1.i}",
    "sub": "{0.r} - {1.r}, {0.i} - {1.i}",
    "mul": "_cmul({0.r}, {0.i}, {1.r}, {1.i})",
    "div": "_cdiv({0.r}, {0.i}, {1.r}, {1.i})",
    "pow": "_cpow({0.r}, {0.i}, {1.r}, {1.i})",
    "eq": "({0.r} == {1.r}) & ({0.i} == {1.i})",
    "ne": "({0.r} != {1.r}) | ({0.i} != {1.i})",
}
_LN2 = "0.6931471805599453"
_COMPLEX_UNARY = {
    # 0 - z, as PyTorch's complex neg (+0 parts for zeros), spelled out: Triton's unary minus is 0 - x in 3.6
    # and a true negation (-0 for +0) in 3.9
    "neg": "0.0 - {0.r}, 0.0 - {0.i}",
    "conj_physical": "{0.r}, {0.i} * -1.0",
    "abs": L + "hypot({0.r}, {0.i})",
    "angle": L + "atan2({0.i}, {0.r})",
    "sgn": "_csgn({0.r}, {0.i})",
    "square": "_cmul({0.r}, {0.i}, {0.r}, {0.i})",
    "reciprocal": "_crecip({0.r}, {0.i})",
    "exp": "_cexp({0.r}, {0.i})",
    "exp2": "_cexp({0.r} * " + _LN2 + ", {0.i} * " + _LN2 + ")",
    "expm1": "_cexpm1({0.r}, {0.i})",
    "log": "_clog({0.r}, {0.i})",
    "log2": "_clog_base({0.r}, {0.i}, 1.4426950408889634)",
    "log10": "_clog_base({0.r}, {0.i}, 0.4342944819032518)",
    "log1p": "_clog({0.r} + 1.0, {0.i})",
    "sqrt": "_csqrt({0.r}, {0.i})",
    "rsqrt": "_crsqrt({0.r}, {0.i})",
    "sin": "_csin({0.r}, {0.i})",
    "cos": "_ccos({0.r}, {0.i})",
    "tan": "_ctan({0.r}, {0.i})",
    "sinh": "_csinh({0.r}, {0.i})",
    "cosh": "_ccosh({0.r}, {0.i})",
    "tanh": "_ctanh({0.r}, {0.i})",
    "sigmoid": "_csigmoid({0.r}, {0.i})",
    "asinh": "_casinh({0.r}, {0.i})",
    "asin": "_casin({0.r}, {0.i})",
    "acosh": "_cacosh({0.r}, {0.i})",
    "acos": "_cacos({0.r}, {0.i})",
    "atanh": "_catanh({0.r}, {0.i})",
    "atan": "_catan({0.r}, {0.i})",
    "isnan": "({0.r} != {0.r}) | ({0.i} != {0.i})",
    "isinf": "(tl.abs({0.r}) == float('inf')) | (tl.abs({0.i}) == float('inf'))",
    "isfinite": "(tl.abs({0.r}) < float('inf')) & (tl.abs({0.i}) < float('inf'))",
}
for _name, _expr in _COMPLEX_BINARY.items():
    BINARY[_name]["c"] = _expr
for _name, _expr in _COMPLEX_UNARY.items():
    UNARY.setdefault(_name, {})["c"] = _expr
# The copies between a complex and another dtype (_ops_copy.device_copy), where/masked_fill's selection,
# the fills and add_scaled's a + alpha * b, by (name, class).
COMPLEX_COPY = _C1  # into a complex result, from any operand computed in the complex dtype
COMPLEX_TO_BOOL = "({0.r} != 0) | ({0.i} != 0)"
COMPLEX_WHERE = "tl.where({0}, {1.r}, {2.r}), tl.where({0}, {1.i}, {2.i})"
COMPLEX_MASKED_FILL = "tl.where({1}, {2.r}, {0.r}), tl.where({1}, {2.i}, {0.i})"
COMPLEX_FILL = "tl.where(mask, {0.r}, {0.r}), tl.where(mask, {0.i}, {0.i})"
COMPLEX_ADD_SCALED = "_cadd_scaled({0.r}, {0.i}, {1.r}, {1.i}, {2.r}, {2.i})"
COMPLEX_ADDCMUL = "_caddcmul({0.r}, {0.i}, {1.r}, {1.i}, {2.r}, {2.i}, {3.r}, {3.i})"  # a + v * b * c
COMPLEX_ADDCDIV = "_caddcdiv({0.r}, {0.i}, {1.r}, {1.i}, {2.r}, {2.i}, {3.r}, {3.i})"  # a + v * (b / c)
COMPLEX_FROM_PARTS = "{0}, {1}"  # complex(real, imag)
COMPLEX_POLAR = "{0} * " + L + "cos({1}), {0} * " + L + "sin({1})"  # polar(abs, angle)

# Helpers some expressions call, prepended to every generated module.
PRELUDE = '''
@triton.jit
def _div(a, b):
    # IEEE division: div_rn for float32 (Triton's / is approximate there); float64's / is exact
    if b.dtype == tl.float64:
        return a / b
    else:
        return libdevice.div_rn(a, b)


@triton.jit
def _ipow(a, b):
    # The CPU kernel's integer power: square and multiply, wrapping in the compute dtype; a negative
    # exponent gives 1 for a base of 1, -1 or 1 for -1 (odd or even exponent), else 0
    e = b + a * 0
    base = a + e * 0
    r = base * 0 + 1
    odd = (e & 1) != 0
    neg = e < 0
    e = tl.where(neg, 0, e)
    for _ in range(64):
        r = tl.where((e & 1) != 0, r * base, r)
        base = base * base
        e = e >> 1
    return tl.where(neg, tl.where(a == 1, 1, tl.where(a == -1, tl.where(odd, -1, 1), 0)), r)


@triton.jit
def _rem_f(r, b):
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def _digamma(xin):
    # The CPU kernel's method, in float64: reflection below 0 (psi(x) = psi(1 - x) - pi / tan(pi x)),
    # recurrence up to 6, then the asymptotic series; +-inf at +-0, NaN at negative integers.
    x = xin.to(tl.float64)
    neg = x < 0
    refl = tl.where(neg, 3.141592653589793 / libdevice.tan(3.141592653589793 * x), 0.0)
    y = tl.where(neg, 1.0 - x, x)
    acc = tl.zeros_like(y)
    for _ in tl.static_range(6):
        small = y < 6.0
        acc = tl.where(small, acc - 1.0 / y, acc)
        y = tl.where(small, y + 1.0, y)
    f = 1.0 / (y * y)
    series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))))
    r = acc + libdevice.log(y) - 0.5 / y - series - refl
    r = tl.where(x == 0, tl.where(libdevice.signbit(x) != 0, float('inf'), -float('inf')), r)
    return tl.where(neg & (x == libdevice.floor(x)), float('nan'), r)


# -- complex numbers as (real, imag) pairs ------------------------------------------------------------------
@triton.jit
def _cmul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


@triton.jit
def _cadd_scaled(ar, ai, br, bi, cr, ci):
    pr, pi = _cmul(br, bi, cr, ci)
    return ar + pr, ai + pi


@triton.jit
def _caddcmul(ar, ai, br, bi, cr, ci, vr, vi):
    pr, pi = _cmul(br, bi, cr, ci)
    return _cadd_scaled(ar, ai, pr, pi, vr, vi)


@triton.jit
def _caddcdiv(ar, ai, br, bi, cr, ci, vr, vi):
    qr, qi = _cdiv(br, bi, cr, ci)
    return _cadd_scaled(ar, ai, qr, qi, vr, vi)


@triton.jit
def _clog_base(r, i, inv_ln_base):
    lr, li = _clog(r, i)
    return lr * inv_ln_base, li * inv_ln_base


@triton.jit
def _cdiv(ar, ai, br, bi):
    # Smith's division (scaled by the divisor's larger part: no overflow of |b|^2); a zero divisor gives
    # C99's infinities (copysign(inf, br) times the numerator's parts)
    big = tl.abs(br) >= tl.abs(bi)
    rat = tl.where(big, _div(bi, br), _div(br, bi))
    den = tl.where(big, br + bi * rat, br * rat + bi)
    re = tl.where(big, _div(ar + ai * rat, den), _div(ar * rat + ai, den))
    im = tl.where(big, _div(ai - ar * rat, den), _div(ai * rat - ar, den))
    zero = (br == 0) & (bi == 0)
    inf = libdevice.copysign(tl.full(br.shape, float('inf'), br.dtype), br)
    return tl.where(zero, inf * ar, re), tl.where(zero, inf * ai, im)


@triton.jit
def _crecip(r, i):
    return _cdiv(tl.full(r.shape, 1.0, r.dtype), tl.zeros_like(r), r, i)


@triton.jit
def _cexp(r, i):
    # exp(r) (cos i, sin i), a real argument's imaginary part kept (exp(inf + 0j) = inf + 0j)
    e = libdevice.exp(r)
    return tl.where(i == 0, e, e * libdevice.cos(i)), tl.where(i == 0, i, e * libdevice.sin(i))


@triton.jit
def _cexpm1(r, i):
    er, ei = _cexp(r, i)
    return er - 1.0, ei


@triton.jit
def _clog(r, i):
    return libdevice.log(libdevice.hypot(r, i)), libdevice.atan2(i, r)


@triton.jit
def _cpow(ar, ai, br, bi):
    # exp(b log a) as the CPU kernel, with a ** 0 = 1 and 0 ** b = 0 for Re(b) > 0 (b broadcast first: a
    # scalar exponent's tests are then blocks, as a's)
    br = br + tl.zeros_like(ar)
    bi = bi + tl.zeros_like(ar)
    lr, li = _clog(ar, ai)
    pr, pi = _cmul(br, bi, lr, li)
    er, ei = _cexp(pr, pi)
    one = (br == 0) & (bi == 0)
    zero = (ar == 0) & (ai == 0) & (br > 0)
    return tl.where(one, 1.0, tl.where(zero, 0.0, er)), tl.where(one | zero, 0.0, ei)


@triton.jit
def _csqrt(r, i):
    # t = sqrt((|z| + |r|) / 2): sqrt(z) = (t, i / 2t) for r >= 0, (|i| / 2t, copysign(t, i)) for r < 0
    t = libdevice.sqrt((libdevice.hypot(r, i) + tl.abs(r)) * 0.5)
    q = tl.where(t == 0, 0.0, _div(i, t + t))
    return tl.where(r >= 0, t, tl.abs(q)), tl.where(r >= 0, tl.where(t == 0, i, q), libdevice.copysign(t, i))


@triton.jit
def _crsqrt(r, i):
    sr, si = _csqrt(r, i)
    return _crecip(sr, si)


@triton.jit
def _csgn(r, i):
    m = libdevice.hypot(r, i)
    return tl.where(m == 0, 0.0, _div(r, m)), tl.where(m == 0, 0.0, _div(i, m))


@triton.jit
def _csin(r, i):
    return libdevice.sin(r) * libdevice.cosh(i), libdevice.cos(r) * libdevice.sinh(i)


@triton.jit
def _ccos(r, i):
    return libdevice.cos(r) * libdevice.cosh(i), libdevice.sin(r) * libdevice.sinh(i) * -1.0


@triton.jit
def _csinh(r, i):
    return libdevice.sinh(r) * libdevice.cos(i), libdevice.cosh(r) * libdevice.sin(i)


@triton.jit
def _ccosh(r, i):
    return libdevice.cosh(r) * libdevice.cos(i), libdevice.sinh(r) * libdevice.sin(i)


@triton.jit
def _ctanh(r, i):
    # (sinh 2r, sin 2i) / (cosh 2r + cos 2i); past |r| = 20 the quotient is (sign r, 0) to working precision
    d = libdevice.cosh(r + r) + libdevice.cos(i + i)
    big = tl.abs(r) > 20.0
    return (tl.where(big, libdevice.copysign(tl.full(r.shape, 1.0, r.dtype), r), _div(libdevice.sinh(r + r), d)),
            tl.where(big, 0.0 * i, _div(libdevice.sin(i + i), d)))


@triton.jit
def _ctan(r, i):
    # tan z = -i tanh(i z)
    tr, ti = _ctanh(i * -1.0, r)
    return ti, tr * -1.0


@triton.jit
def _casinh(r, i):
    # log(z + sqrt(z^2 + 1)) in the right half plane (no cancellation there), odd symmetry for the left
    # (by the sign bit: -0 + iy of the cut |y| > 1 is the left side's, as C99's casinh)
    neg = libdevice.signbit(r) != 0
    wr = tl.where(neg, r * -1.0, r)
    wi = tl.where(neg, i * -1.0, i)
    sr, si = _cmul(wr, wi, wr, wi)
    qr, qi = _csqrt(sr + 1.0, si)
    lr, li = _clog(wr + qr, wi + qi)
    return tl.where(neg, lr * -1.0, lr), tl.where(neg, li * -1.0, li)


@triton.jit
def _casin(r, i):
    # asin z = -i asinh(i z)
    ar, ai = _casinh(i * -1.0, r)
    return ai, ar * -1.0


@triton.jit
def _cacosh(r, i):
    # log(z + sqrt(z + 1) sqrt(z - 1)): the principal branch with its cut below 1
    pr, pi = _csqrt(r + 1.0, i)
    mr, mi = _csqrt(r - 1.0, i)
    qr, qi = _cmul(pr, pi, mr, mi)
    return _clog(r + qr, i + qi)


@triton.jit
def _cacos(r, i):
    # acos z = pi / 2 - asin z
    ar, ai = _casin(r, i)
    return 1.5707963267948966 - ar, ai * -1.0


@triton.jit
def _catanh(r, i):
    # (log(1 + z) - log(1 - z)) / 2
    ar, ai = _clog(1.0 + r, i)
    br, bi = _clog(1.0 - r, i * -1.0)
    return tl.where(r == 0, r, 0.5 * (ar - br)), 0.5 * (ai - bi)  # (an imaginary z keeps its zero's sign)


@triton.jit
def _catan(r, i):
    # atan z = -i atanh(i z)
    ar, ai = _catanh(i * -1.0, r)
    return ai, ar * -1.0


@triton.jit
def _csigmoid(r, i):
    er, ei = _cexp(-r, -i)
    return _cdiv(tl.full(r.shape, 1.0, r.dtype), tl.zeros_like(r), er + 1.0, ei)


'''


def klass(compute) -> str:
    if compute is dt.bool:
        return "b"
    if compute.is_complex:
        return "c"
    return "f" if compute.is_floating_point else "i"


def lookup(table: dict, name: str, compute) -> str:
    entry = table.get(name)
    expr = entry.get(klass(compute)) if entry else None
    if expr is None:
        from ember._src.ops._common import type_name

        raise NotImplementedError(f"\"{name}_cuda\" not implemented for '{type_name(compute)}' (ember.ops.{name} "
                                  f"has no CUDA kernel for this dtype)")
    return expr

"""The C++ spelling of each scalar op, C types, constants, and the prelude every source starts with.

Semantics follow ember's eager kernels (which follow PyTorch's): NaN propagates through
maximum/minimum/clamp/relu, ``threshold`` keeps NaN, floor division and remainder take the
sign rules of Python, and integers wrap (the sources compile with ``-fwrapv``).
"""

from __future__ import annotations

import math

from ember._src import dtypes as dt

C_TYPES = {
    dt.bool: "bool", dt.uint8: "uint8_t", dt.int8: "int8_t", dt.int16: "int16_t", dt.int32: "int32_t",
    dt.int64: "int64_t", dt.float16: "uint16_t", dt.bfloat16: "uint16_t", dt.float32: "float",
    dt.float64: "double",
}

PRELUDE = r"""
#include <cmath>
#include <cstdint>
#include <limits>
#include <algorithm>
#include <omp.h>

// float16 / bfloat16 storage <-> float32 compute (round to nearest even on store)
static inline float ember_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);
    else if (exp != 0) bits = sign | ((exp + 112) << 23) | (man << 13);
    else if (man == 0) bits = sign;
    else { float f = (float)man * 5.9604644775390625e-08f; return sign ? -f : f; }
    float out; __builtin_memcpy(&out, &bits, 4); return out;
}
static inline uint16_t ember_f2h(float f) {
    uint32_t x; __builtin_memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000; x &= 0x7fffffffu;
    if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00);
    if (x >= 0x47800000u) return (uint16_t)(sign | 0x7c00);
    if (x < 0x38800000u) {  // subnormal half: add 0.5 to shift the mantissa into place
        float a; __builtin_memcpy(&a, &x, 4); a += 0.5f;
        uint32_t b; __builtin_memcpy(&b, &a, 4); return (uint16_t)(sign | (b - 0x3f000000u));
    }
    uint32_t odd = (x >> 13) & 1; x += 0xc8000fffu + odd;
    return (uint16_t)(sign | (x >> 13));
}
static inline float ember_bf2f(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16; float out; __builtin_memcpy(&out, &bits, 4); return out;
}
static inline uint16_t ember_f2bf(float f) {
    uint32_t x; __builtin_memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    x += 0x7fffu + ((x >> 16) & 1); return (uint16_t)(x >> 16);
}
template <typename T> static inline T ember_max(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a > b ? a : b)); }
template <typename T> static inline T ember_min(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a < b ? a : b)); }
template <typename T> static inline T ember_floordiv(T a, T b) {
    if (b == 0) return a / b;
    T mod = std::fmod(a, b), div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    if (div == 0) return std::copysign(T(0), a / b);
    T floordiv = std::floor(div);
    if (div - floordiv > T(0.5)) floordiv += 1;
    return floordiv;
}
template <typename T> static inline T ember_remainder(T a, T b) {
    T mod = std::fmod(a, b);
    if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;
    return mod;
}
template <typename T> static inline T ember_logaddexp(T a, T b) {
    if (std::isinf(a) && a == b) return a;
    T m = a > b ? a : b;
    return m + std::log1p(std::exp(-std::abs(a - b)));
}
template <typename T> static inline T ember_lerp(T a, T b, T w) {
    return std::abs(w) < T(0.5) ? a + w * (b - a) : b - (b - a) * (T(1) - w);
}
"""

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _f(t):
    return lambda a, b=None: t.format(a=a, b=b)


def _is_float(d):
    return d.is_floating_point


# Each entry: (args..., compute dtype) -> C++ expression text.
def op_text(op: str, args: list, dtype, arg_dtypes) -> str:
    a = args[0] if args else None
    b = args[1] if len(args) > 1 else None
    T = C_TYPES[dtype]
    fl = _is_float(dtype)
    if op in _SIMPLE_BINARY:
        if dtype is dt.bool and op in ("add", "mul"):
            return f"({a} {'||' if op == 'add' else '&&'} {b})"
        return f"({a} {_SIMPLE_BINARY[op]} {b})"
    if op in _COMPARE:
        return f"({a} {_COMPARE[op]} {b})"
    if op in _MATH:
        return f"std::{_MATH[op]}({a})"
    if op in _MATH2:
        return f"std::{_MATH2[op]}({a}, {b})"
    table = {
        "neg": lambda: f"(-{a})",
        "abs": lambda: f"std::abs({a})" if arg_dtypes[0].is_signed or fl else f"({a})",
        "rsqrt": lambda: f"({T}(1) / std::sqrt({a}))",
        "reciprocal": lambda: f"({T}(1) / {a})",
        "sigmoid": lambda: f"({T}(1) / ({T}(1) + std::exp(-{a})))",
        "silu": lambda: f"({a} / ({T}(1) + std::exp(-{a})))",
        "gelu": lambda: f"({T}(0.5) * {a} * ({T}(1) + std::erf({a} * {T}(M_SQRT1_2))))",
        "gelu_tanh": lambda: (f"({T}(0.5) * {a} * ({T}(1) + std::tanh({T}(0.7978845608028654) * "
                              f"({a} + {T}(0.044715) * {a} * {a} * {a}))))"),
        "mish": lambda: f"({a} * std::tanh(std::log1p(std::exp({a}))))",
        "hardsigmoid": lambda: f"(ember_min(ember_max({a} + {T}(3), {T}(0)), {T}(6)) / {T}(6))",
        "hardswish": lambda: f"({a} * ember_min(ember_max({a} + {T}(3), {T}(0)), {T}(6)) / {T}(6))",
        "selu": lambda: (f"({T}({_SELU_SCALE!r}) * ({a} > 0 ? {a} : {T}({_SELU_ALPHA!r}) * "
                         f"std::expm1({a})))"),
        "softsign": lambda: f"({a} / ({T}(1) + std::abs({a})))",
        "tanhshrink": lambda: f"({a} - std::tanh({a}))",
        "softplus": lambda: (f"(({a} * {T}({args[1]})) > {T}({args[2]}) ? {a} : "
                             f"std::log1p(std::exp({a} * {T}({args[1]}))) / {T}({args[1]}))"),
        "elu": lambda: (f"({a} <= 0 ? std::expm1({a} * {T}({args[3]})) * {T}({args[1]}) * {T}({args[2]}) : "
                        f"{a} * {T}({args[2]}))"),
        "celu": lambda: f"({a} <= 0 ? std::expm1({a} / {T}({args[1]})) * {T}({args[1]}) : {a})",
        "square": lambda: f"({a} * {a})",
        "frac": lambda: f"({a} - std::trunc({a}))",
        "relu": lambda: f"({a} < 0 ? {T}(0) : {a})",
        "relu6": lambda: f"ember_min(ember_max({a}, {T}(0)), {T}(6))",
        "leaky_relu": lambda: f"({a} > 0 ? {a} : {a} * {T}({args[1]}))",
        "hardtanh": lambda: f"({a} < {T}({args[1]}) ? {T}({args[1]}) : ({a} > {T}({args[2]}) ? {T}({args[2]}) : {a}))",
        "threshold": lambda: f"({a} <= {T}({args[1]}) ? {T}({args[2]}) : {a})",
        "sign": lambda: f"{T}(({T}(0) < {a}) - ({a} < {T}(0)))",
        "floor": lambda: f"std::floor({a})" if fl else a,
        "ceil": lambda: f"std::ceil({a})" if fl else a,
        "trunc": lambda: f"std::trunc({a})" if fl else a,
        "round": lambda: f"std::nearbyint({a})" if fl else a,
        "isnan": lambda: f"({a} != {a})",
        "isinf": lambda: f"std::isinf({a})" if _is_float(arg_dtypes[0]) else "false",
        "isfinite": lambda: f"std::isfinite({a})" if _is_float(arg_dtypes[0]) else "true",
        "isposinf": lambda: f"({a} == INFINITY)" if _is_float(arg_dtypes[0]) else "false",
        "isneginf": lambda: f"({a} == -INFINITY)" if _is_float(arg_dtypes[0]) else "false",
        "signbit": lambda: f"std::signbit({a})" if _is_float(arg_dtypes[0]) else f"({a} < 0)",
        "logical_not": lambda: f"(!{a})",
        "logical_and": lambda: f"((bool){a} && (bool){b})",
        "logical_or": lambda: f"((bool){a} || (bool){b})",
        "logical_xor": lambda: f"((bool){a} != (bool){b})",
        "maximum": lambda: f"ember_max<{T}>({a}, {b})",
        "minimum": lambda: f"ember_min<{T}>({a}, {b})",
        "clamp_min": lambda: f"ember_max<{T}>({a}, {b})",
        "clamp_max": lambda: f"ember_min<{T}>({a}, {b})",
        "floor_divide": lambda: f"ember_floordiv<{T}>({a}, {b})",
        "remainder": lambda: f"ember_remainder<{T}>({a}, {b})",
        "logaddexp": lambda: f"ember_logaddexp<{T}>({a}, {b})",
        "logaddexp2": lambda: f"(ember_logaddexp<{T}>({a} * {T}(M_LN2), {b} * {T}(M_LN2)) / {T}(M_LN2))",
        "where": lambda: f"({a} ? {b} : {args[2]})",
        "lerp": lambda: f"ember_lerp<{T}>({a}, {b}, {args[2]})",
    }
    if op not in table:
        raise KeyError(op)
    return table[op]()


_SIMPLE_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "bitwise_and": "&", "bitwise_or": "|",
                  "bitwise_xor": "^"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_MATH = {n: n for n in ("sqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh "
                        "acosh atanh erf erfc").split()}
_MATH2 = {"fmax": "fmax", "fmin": "fmin", "fmod": "fmod", "pow": "pow", "atan2": "atan2", "hypot": "hypot",
          "copysign": "copysign", "nextafter": "nextafter"}

SUPPORTED = set(_SIMPLE_BINARY) | set(_COMPARE) | set(_MATH) | set(_MATH2)


def const_text(value, dtype) -> str:
    if dtype is dt.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        if math.isnan(value):
            return "std::numeric_limits<double>::quiet_NaN()" if dtype is dt.float64 else "NAN"
        if math.isinf(value):
            return ("" if value > 0 else "-") + ("HUGE_VAL" if dtype is dt.float64 else "INFINITY")
        text = repr(float(value))
        return text if dtype is dt.float64 else text + "f"
    return f"(({C_TYPES[dtype]}){int(value)}LL)" if dtype is dt.int64 else f"(({C_TYPES[dtype]}){int(value)})"


def load_text(ptr: str, index: str, storage_dtype) -> str:
    if storage_dtype is dt.float16:
        return f"ember_h2f({ptr}[{index}])"
    if storage_dtype is dt.bfloat16:
        return f"ember_bf2f({ptr}[{index}])"
    return f"{ptr}[{index}]"


def store_value(value: str, storage_dtype) -> str:
    if storage_dtype is dt.float16:
        return f"ember_f2h({value})"
    if storage_dtype is dt.bfloat16:
        return f"ember_f2bf({value})"
    return f"static_cast<{C_TYPES[storage_dtype]}>({value})"


def cast_text(value: str, dtype) -> str:
    return f"static_cast<{C_TYPES[dtype]}>({value})"

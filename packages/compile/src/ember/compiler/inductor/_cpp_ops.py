"""The native spelling of each scalar op, C types, constants, and the prelude every source starts with.

The kernels are written in the common subset of C and C++ (``config.cpp.language`` picks
which compiler front end builds them; C starts ~5x faster, which is most of a cold compile).
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
_LIMITS = {dt.uint8: ("0", "UINT8_MAX"), dt.int8: ("INT8_MIN", "INT8_MAX"), dt.int16: ("INT16_MIN", "INT16_MAX"),
           dt.int32: ("INT32_MIN", "INT32_MAX"), dt.int64: ("INT64_MIN", "INT64_MAX"), dt.bool: ("false", "true")}

# libm functions with SIMD variants in glibc's libmvec (>= 2.35): declared so loops using them vectorize.
VECTOR_MATH = ("exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh "
               "erf erfc pow atan2 hypot").split()

_HELPERS = r"""
static inline float ember_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (e == 0x1f) bits = sign | 0x7f800000u | (man << 13);
    else if (e != 0) bits = sign | ((e + 112) << 23) | (man << 13);
    else if (man == 0) bits = sign;
    else { float f = (float)man * 5.9604644775390625e-08f; return sign ? -f : f; }
    float out; __builtin_memcpy(&out, &bits, 4); return out;
}
static inline uint16_t ember_f2h(float f) {  /* round to nearest even */
    uint32_t x; __builtin_memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000; x &= 0x7fffffffu;
    if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00);
    if (x >= 0x47800000u) return (uint16_t)(sign | 0x7c00);
    if (x < 0x38800000u) {
        float a; __builtin_memcpy(&a, &x, 4); a += 0.5f;
        uint32_t b; __builtin_memcpy(&b, &a, 4); return (uint16_t)(sign | (b - 0x3f000000u));
    }
    x += 0xc8000fffu + ((x >> 13) & 1);
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
/* maximum/minimum/clamp: a NaN operand wins (PyTorch's rule) */
#define EMBER_MAX(a, b) (((a) != (a)) ? (a) : (((b) != (b)) ? (b) : ((a) > (b) ? (a) : (b))))
#define EMBER_MIN(a, b) (((a) != (a)) ? (a) : (((b) != (b)) ? (b) : ((a) < (b) ? (a) : (b))))
#define EMBER_FLOAT_HELPERS(T, S) \
static inline T ember_floordiv##S(T a, T b) { \
    if (b == 0) return a / b; \
    T mod = fmod##S(a, b), div = (a - mod) / b; \
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1; \
    if (div == 0) return copysign##S((T)0, a / b); \
    T fl = floor##S(div); \
    if (div - fl > (T)0.5) fl += 1; \
    return fl; \
} \
static inline T ember_remainder##S(T a, T b) { \
    T mod = fmod##S(a, b); \
    if (mod != 0 && ((b < 0) != (mod < 0))) mod += b; \
    return mod; \
} \
static inline T ember_logaddexp##S(T a, T b) { \
    if (isinf(a) && a == b) return a; \
    T m = a > b ? a : b; \
    return m + log1p##S(exp##S(-fabs##S(a - b))); \
} \
static inline T ember_lerp##S(T a, T b, T w) { \
    return fabs##S(w) < (T)0.5 ? a + w * (b - a) : b - (b - a) * ((T)1 - w); \
}
EMBER_FLOAT_HELPERS(float, f)
EMBER_FLOAT_HELPERS(double, )
/* float32 exp inline, so loops using it vectorize whole (no call per vector of libmvec's, none per
 * element without it): eager's exp_f32 (tensor-core common/vecmath.h), the same reduction to
 * |r| <= ln2/2, the same fitted degree-4 polynomial (~1 ulp) and two-step scaling by 2^n (exact
 * for subnormal results). The clamp to [-104, 89] keeps NaN (both compares false) and makes
 * the scaling itself give +inf past 88.72 and 0 below -103.97, so no selects follow: bit for
 * bit eager's result on all 2^32 inputs (NaN payloads aside), in ~2/3 of its instructions. */
static inline __attribute__((always_inline)) float ember_expf(float x) {
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 89.0f ? 89.0f : xc;
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    float p = 1.3814612757e-3f;
    p = p * r + 8.3687100559e-3f;
    p = p * r + 4.1668388993e-2f;
    p = p * r + 1.6666521132e-1f;
    p = p * r + 4.9999994040e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t ni = (int32_t)n, n1 = ni >> 1;
    uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(ni - n1 + 127) << 23;
    float s1, s2;
    __builtin_memcpy(&s1, &b1, 4);
    __builtin_memcpy(&s2, &b2, 4);
    return p * s1 * s2;
}
"""


def prelude(vector_math: bool) -> str:
    lines = ["#include <math.h>", "#include <stdint.h>", "#include <stdbool.h>", "#include <stdlib.h>",
             "#include <omp.h>",
             "#ifdef __cplusplus", '#define EMBER_KERNEL extern "C"', "#else", "#define EMBER_KERNEL", "#endif"]
    if vector_math:
        for name in VECTOR_MATH:
            args = "float, float" if name in ("pow", "atan2", "hypot") else "float"
            dargs = args.replace("float", "double")
            lines.append(f'__attribute__((simd("notinbranch"))) float {name}f({args});')
            lines.append(f'__attribute__((simd("notinbranch"))) double {name}({dargs});')
    return "\n".join(lines) + "\n" + _STREAMING + _HELPERS + _ROW_HELPERS


# Streaming (non-temporal) stores for outputs too large to stay in cache: the line goes to memory
# without first being read into the cache (a plain store reads it: a third of the traffic of a
# read-one-write-one kernel). Only where AVX has them; elsewhere the kernels use plain stores.
_STREAMING = """#if defined(__AVX__)
#include <immintrin.h>
#define EMBER_STREAMING 1
/* one whole 64-byte line (p aligned to it): one store where AVX-512 has it, else two halves */
#if defined(__AVX512F__)
static inline void ember_stream_float(float* p, const float* v) { _mm512_stream_ps(p, _mm512_loadu_ps(v)); }
static inline void ember_stream_double(double* p, const double* v) { _mm512_stream_pd(p, _mm512_loadu_pd(v)); }
#else
static inline void ember_stream_float(float* p, const float* v) {
    _mm256_stream_ps(p, _mm256_loadu_ps(v));
    _mm256_stream_ps(p + 8, _mm256_loadu_ps(v + 8));
}
static inline void ember_stream_double(double* p, const double* v) {
    _mm256_stream_pd(p, _mm256_loadu_pd(v));
    _mm256_stream_pd(p + 4, _mm256_loadu_pd(v + 4));
}
#endif
#endif
"""
# Row helpers of float32 row kernels (softmax, log_softmax, cross-entropy's log-sum-exp), the
# structure of eager's row kernels (tensor-core cpu/reduce_simd.h): a max/min over a contiguous
# row with NaN lanes kept in mask registers (one compare a vector, no per-element flag work) and
# two accumulators, and exp(x - m) summed (and stored) with the next row prefetched a line per
# line consumed, so that row's max pass finds it in cache. The exp there is AVX-512's form of
# ember_expf (vmaxps/vminps clamps, vscalefps scaling: bit for bit the same values) in about half
# the instructions gcc makes of the scalar one. Without AVX-512 the same functions are plain loops.
_ROW_HELPERS = r"""#if defined(__AVX512F__)
static inline __attribute__((always_inline)) __m512 ember_exp16(__m512 x) {
    const __mmask16 all = 0xFFFF;  /* vmaxps/vminps return the second operand on NaN: x stays NaN */
    __m512 xc = _mm512_maskz_max_ps(all, _mm512_set1_ps(-104.0f), x);
    xc = _mm512_maskz_min_ps(all, _mm512_set1_ps(89.0f), xc);
    const __m512 shifter = _mm512_set1_ps(12582912.0f);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), shifter), shifter);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.3814612757e-3f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3687100559e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1668388993e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666521132e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.9999994040e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(all, p, n);
}
#define EMBER_ROW_EXTREME(NAME, OP, INIT, CMP) \
static inline float NAME(const float* p, int64_t n) { \
    const __mmask16 all = 0xFFFF; \
    __m512 a0 = _mm512_set1_ps(INIT), a1 = a0; \
    __mmask16 nan0 = 0, nan1 = 0; \
    int64_t i = 0; \
    for (; i + 32 <= n; i += 32) { \
        const __m512 x0 = _mm512_loadu_ps(p + i), x1 = _mm512_loadu_ps(p + i + 16); \
        a0 = OP(all, x0, a0); \
        a1 = OP(all, x1, a1); \
        nan0 |= _mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q); \
        nan1 |= _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q); \
    } \
    float lanes[16], r = INIT; \
    _mm512_storeu_ps(lanes, OP(all, a0, a1)); \
    int nan = (nan0 | nan1) != 0; \
    for (int j = 0; j < 16; ++j) r = lanes[j] CMP r ? lanes[j] : r; \
    for (; i < n; ++i) { const float x = p[i]; nan |= x != x; r = x CMP r ? x : r; } \
    return nan ? (float)NAN : r; \
}
EMBER_ROW_EXTREME(ember_row_max_f32, _mm512_maskz_max_ps, -INFINITY, >)
EMBER_ROW_EXTREME(ember_row_min_f32, _mm512_maskz_min_ps, INFINITY, <)
#undef EMBER_ROW_EXTREME
static inline float ember_exp_shift_sum_f32(float* o, const float* x, int64_t n, float m, const float* next) {
    const __m512 mv = _mm512_set1_ps(m);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        if (next) {
            __builtin_prefetch(next + i, 0, 3);
            __builtin_prefetch(next + i + 16, 0, 3);
        }
        const __m512 e0 = ember_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
        const __m512 e1 = ember_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), mv));
        if (o) {
            _mm512_storeu_ps(o + i, e0);
            _mm512_storeu_ps(o + i + 16, e1);
        }
        acc0 = _mm512_add_ps(acc0, e0);
        acc1 = _mm512_add_ps(acc1, e1);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    for (; i < n; ++i) {
        const float e = ember_expf(x[i] - m);
        if (o) o[i] = e;
        s += e;
    }
    return s;
}
/* a row's max and sum(exp(x - max)) in one pass (cross-entropy's log-sum-exp, eager's one read of
 * the row: tensor-core cpu/loss.cpp row_lse_shifted): the max (NaN lanes in mask registers) beside
 * sum(exp(x - c)) for the shift c = the row's target logit, then sum = s * exp(c - max) in double.
 * The target's own term is 1, so s >= 1; exp(x - c) <= exp(max - c): taken while max - c <= 64 (no
 * term or sum overflows, exp(c - max) stays normal; s >= 1 checked, as c may be no element).
 * Rounding x - c costs what rounding the loss
 * (max - c and more) costs, as in eager. A NaN, an infinite max or c, or a wider spread go through
 * the two passes (the row is in cache by then). The max is the row's max exactly. `next`:
 * prefetched a line per line consumed, as in ember_exp_shift_sum_f32. */
static inline float ember_row_max_exp_sum_f32(const float* x, int64_t n, float c, float* sum, const float* next) {
    if (isfinite(c)) {
        const __mmask16 all = 0xFFFF;
        const __m512 cv = _mm512_set1_ps(c);
        __m512 a0 = _mm512_set1_ps(-INFINITY), a1 = a0;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
        __mmask16 nan0 = 0, nan1 = 0;
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) {
            if (next) {
                __builtin_prefetch(next + i, 0, 3);
                __builtin_prefetch(next + i + 16, 0, 3);
            }
            const __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
            a0 = _mm512_maskz_max_ps(all, x0, a0);
            a1 = _mm512_maskz_max_ps(all, x1, a1);
            nan0 |= _mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q);
            nan1 |= _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q);
            acc0 = _mm512_add_ps(acc0, ember_exp16(_mm512_sub_ps(x0, cv)));
            acc1 = _mm512_add_ps(acc1, ember_exp16(_mm512_sub_ps(x1, cv)));
        }
        float lanes[16], m = -INFINITY;
        _mm512_storeu_ps(lanes, _mm512_maskz_max_ps(all, a0, a1));
        int nan = (nan0 | nan1) != 0;
        for (int j = 0; j < 16; ++j) m = lanes[j] > m ? lanes[j] : m;
        float s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
        for (; i < n; ++i) {
            const float v = x[i];
            nan |= v != v;
            m = v > m ? v : m;
            s += ember_expf(v - c);
        }
        /* s >= 1 unless c is no element of the row: an ignored row's or out-of-range target picks
         * 0, and with every score below -88 its s underflowed to 0 (0 * exp(0 - max) = NaN) */
        if (!nan && isfinite(m) && m - c <= 64.0f && s >= 1.0f) {
            *sum = (float)((double)s * exp((double)c - (double)m));
            return m;
        }
    }
    const float m = ember_row_max_f32(x, n);
    *sum = ember_exp_shift_sum_f32(NULL, x, n, m, next);
    return m;
}
/* exp of a row in place: the exps of loops whose argument is computed (a fused producer) go
 * through a row of the output, so that they too take the AVX-512 exp */
static inline void ember_exp_row_f32(float* p, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 e0 = ember_exp16(_mm512_loadu_ps(p + i));
        const __m512 e1 = ember_exp16(_mm512_loadu_ps(p + i + 16));
        _mm512_storeu_ps(p + i, e0);
        _mm512_storeu_ps(p + i + 16, e1);
    }
    if (i + 16 <= n) {
        _mm512_storeu_ps(p + i, ember_exp16(_mm512_loadu_ps(p + i)));
        i += 16;
    }
    if (i < n) {
        const __mmask16 tail = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(p + i, tail, ember_exp16(_mm512_maskz_loadu_ps(tail, p + i)));
    }
}
static inline float ember_row_sum_f32(const float* p, int64_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; i < n; ++i) s += p[i];
    return s;
}
static inline float ember_row_sq_dev_f32(const float* p, int64_t n, float c, const float* next) {
    const __m512 cv = _mm512_set1_ps(c);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        if (next) {
            __builtin_prefetch(next + i, 0, 3);
            __builtin_prefetch(next + i + 16, 0, 3);
        }
        const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(p + i), cv);
        const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(p + i + 16), cv);
        a0 = _mm512_add_ps(a0, _mm512_mul_ps(d0, d0));
        a1 = _mm512_add_ps(a1, _mm512_mul_ps(d1, d1));
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; i < n; ++i) { const float d = p[i] - c; s += d * d; }
    return s;
}
#else
static inline float ember_row_max_f32(const float* p, int64_t n) {
    float r = -INFINITY;
    int nan = 0;
    #pragma omp simd reduction(max:r) reduction(|:nan)
    for (int64_t i = 0; i < n; ++i) { const float x = p[i]; r = x > r ? x : r; nan |= x != x; }
    return nan ? (float)NAN : r;
}
static inline float ember_row_min_f32(const float* p, int64_t n) {
    float r = INFINITY;
    int nan = 0;
    #pragma omp simd reduction(min:r) reduction(|:nan)
    for (int64_t i = 0; i < n; ++i) { const float x = p[i]; r = x < r ? x : r; nan |= x != x; }
    return nan ? (float)NAN : r;
}
static inline float ember_exp_shift_sum_f32(float* o, const float* x, int64_t n, float m, const float* next) {
    float s = 0;
    (void)next;
    if (o) {
        #pragma omp simd reduction(+:s)
        for (int64_t i = 0; i < n; ++i) { const float e = ember_expf(x[i] - m); o[i] = e; s += e; }
    } else {
        #pragma omp simd reduction(+:s)
        for (int64_t i = 0; i < n; ++i) s += ember_expf(x[i] - m);
    }
    return s;
}
static inline float ember_row_max_exp_sum_f32(const float* x, int64_t n, float c, float* sum, const float* next) {
    const float m = ember_row_max_f32(x, n);
    (void)c;
    *sum = ember_exp_shift_sum_f32(NULL, x, n, m, next);
    return m;
}
static inline void ember_exp_row_f32(float* p, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) p[i] = ember_expf(p[i]);
}
static inline float ember_row_sum_f32(const float* p, int64_t n) {
    float s = 0;
    #pragma omp simd reduction(+:s)
    for (int64_t i = 0; i < n; ++i) s += p[i];
    return s;
}
static inline float ember_row_sq_dev_f32(const float* p, int64_t n, float c, const float* next) {
    float s = 0;
    (void)next;
    #pragma omp simd reduction(+:s)
    for (int64_t i = 0; i < n; ++i) { const float d = p[i] - c; s += d * d; }
    return s;
}
#endif
"""
# Elements per streaming store (one 32-byte AVX register) of the types that have one.
STREAM_WIDTH = {dt.float32: 8, dt.float64: 4}


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_SIMPLE_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "bitwise_and": "&", "bitwise_or": "|",
                  "bitwise_xor": "^"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_MATH = set(("sqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh "
             "erf erfc").split())
_MATH2 = {"fmax", "fmin", "fmod", "pow", "atan2", "hypot", "copysign", "nextafter"}


def op_text(op: str, args: list, dtype, arg_dtypes) -> str:
    """C text of ``op`` on the argument texts ``args``, computed in ``dtype``."""
    a = args[0] if args else None
    b = args[1] if len(args) > 1 else None
    T = C_TYPES[dtype]
    fl = dtype.is_floating_point
    s = "f" if dtype is dt.float32 else ""  # libm suffix

    def k(v):  # a constant in T
        return f"(({T}){v})"

    if op in _SIMPLE_BINARY:
        if dtype is dt.bool and op in ("add", "mul"):
            return f"({a} {'||' if op == 'add' else '&&'} {b})"
        return f"({a} {_SIMPLE_BINARY[op]} {b})"
    if op in _COMPARE:
        return f"({a} {_COMPARE[op]} {b})"
    ex = "ember_expf" if dtype is dt.float32 else "exp"  # float32: the inline exp of the prelude
    if op == "exp":
        return f"{ex}({a})"
    if op in _MATH:
        return f"{op}{s}({a})"
    if op in _MATH2:
        return f"{op}{s}({a}, {b})"
    hs = f"(EMBER_MIN(EMBER_MAX({a} + {k(3)}, {k(0)}), {k(6)}) / {k(6)})"
    table = {
        "neg": lambda: f"(-{a})",
        "abs": lambda: f"fabs{s}({a})" if fl else (f"({a} < 0 ? -{a} : {a})" if arg_dtypes[0].is_signed else a),
        "rsqrt": lambda: f"({k(1)} / sqrt{s}({a}))",
        "reciprocal": lambda: f"({k(1)} / {a})",
        "sigmoid": lambda: f"({k(1)} / ({k(1)} + {ex}(-{a})))",
        "silu": lambda: f"({a} / ({k(1)} + {ex}(-{a})))",
        "gelu": lambda: f"({k(0.5)} * {a} * ({k(1)} + erf{s}({a} * {k(0.70710678118654752440)})))",
        "gelu_tanh": lambda: (f"({k(0.5)} * {a} * ({k(1)} + tanh{s}({k(0.7978845608028654)} * "
                              f"({a} + {k(0.044715)} * {a} * {a} * {a}))))"),
        "mish": lambda: f"({a} * tanh{s}(log1p{s}({ex}({a}))))",
        "hardsigmoid": lambda: hs,
        "hardswish": lambda: f"({a} * {hs})",
        "selu": lambda: f"({k(_SELU_SCALE)} * ({a} > 0 ? {a} : {k(_SELU_ALPHA)} * expm1{s}({a})))",
        "softsign": lambda: f"({a} / ({k(1)} + fabs{s}({a})))",
        "tanhshrink": lambda: f"({a} - tanh{s}({a}))",
        "softplus": lambda: (f"(({a} * {k(args[1])}) > {k(args[2])} ? {a} : "
                             f"log1p{s}({ex}({a} * {k(args[1])})) / {k(args[1])})"),
        "elu": lambda: (f"({a} <= 0 ? expm1{s}({a} * {k(args[3])}) * {k(args[1])} * {k(args[2])} : "
                        f"{a} * {k(args[2])})"),
        "celu": lambda: f"({a} <= 0 ? expm1{s}({a} / {k(args[1])}) * {k(args[1])} : {a})",
        "square": lambda: f"({a} * {a})",
        "round_to_float16": lambda: f"ember_h2f(ember_f2h({a}))",
        "round_to_bfloat16": lambda: f"ember_bf2f(ember_f2bf({a}))",
        "frac": lambda: f"({a} - trunc{s}({a}))",
        "relu": lambda: f"({a} < 0 ? {k(0)} : {a})",
        "relu6": lambda: f"EMBER_MIN(EMBER_MAX({a}, {k(0)}), {k(6)})",
        "leaky_relu": lambda: f"({a} > 0 ? {a} : {a} * {k(args[1])})",
        "hardtanh": lambda: f"({a} < {k(args[1])} ? {k(args[1])} : ({a} > {k(args[2])} ? {k(args[2])} : {a}))",
        "threshold": lambda: f"({a} <= {k(args[1])} ? {k(args[2])} : {a})",
        "sign": lambda: f"(({T})(({k(0)} < {a}) - ({a} < {k(0)})))",
        "floor": lambda: f"floor{s}({a})" if fl else a,
        "ceil": lambda: f"ceil{s}({a})" if fl else a,
        "trunc": lambda: f"trunc{s}({a})" if fl else a,
        "round": lambda: f"rint{s}({a})" if fl else a,
        "isnan": lambda: f"({a} != {a})",
        "isinf": lambda: f"(isinf({a}) != 0)" if arg_dtypes[0].is_floating_point else "false",
        "isfinite": lambda: f"(isfinite({a}) != 0)" if arg_dtypes[0].is_floating_point else "true",
        "isposinf": lambda: f"({a} == INFINITY)" if arg_dtypes[0].is_floating_point else "false",
        "isneginf": lambda: f"({a} == -INFINITY)" if arg_dtypes[0].is_floating_point else "false",
        "signbit": lambda: f"(signbit({a}) != 0)" if arg_dtypes[0].is_floating_point else f"({a} < 0)",
        "logical_not": lambda: f"(!{a})",
        "logical_and": lambda: f"(({a} != 0) && ({b} != 0))",
        "logical_or": lambda: f"(({a} != 0) || ({b} != 0))",
        "logical_xor": lambda: f"(({a} != 0) != ({b} != 0))",
        "maximum": lambda: f"EMBER_MAX({a}, {b})",
        "minimum": lambda: f"EMBER_MIN({a}, {b})",
        "clamp_min": lambda: f"EMBER_MAX({a}, {b})",
        "clamp_max": lambda: f"EMBER_MIN({a}, {b})",
        "floor_divide": lambda: f"ember_floordiv{s}({a}, {b})",
        "remainder": lambda: f"ember_remainder{s}({a}, {b})",
        "logaddexp": lambda: f"ember_logaddexp{s}({a}, {b})",
        "logaddexp2": lambda: (f"(ember_logaddexp{s}({a} * {k(math.log(2))}, {b} * {k(math.log(2))}) / "
                               f"{k(math.log(2))})"),
        "where": lambda: f"({a} ? {b} : {args[2]})",
        "lerp": lambda: f"ember_lerp{s}({a}, {b}, {args[2]})",
    }
    if op not in table:
        raise KeyError(op)
    return table[op]()


def const_text(value, dtype) -> str:
    if dtype is dt.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        if math.isnan(value):
            return "((double)NAN)" if dtype is dt.float64 else "NAN"
        if math.isinf(value):
            return ("" if value > 0 else "-") + ("((double)INFINITY)" if dtype is dt.float64 else "INFINITY")
        text = repr(float(value))
        return text if dtype is dt.float64 else text + "f"
    if dtype is dt.int64:
        return "INT64_MIN" if value == -(2 ** 63) else f"((int64_t){int(value)}LL)"
    return f"(({C_TYPES[dtype]}){int(value)})"


def limit_text(dtype, which: str) -> str:
    """The lowest or highest value of an integer ``dtype`` (the identity of max/min)."""
    lo, hi = _LIMITS[dtype]
    return lo if which == "lowest" else hi


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
    return f"(({C_TYPES[storage_dtype]})({value}))"


def cast_text(value: str, dtype, source=None) -> str:
    if dtype is dt.bool:
        return f"({value} != 0)"
    if source is not None and source.is_floating_point and dtype in NARROW_INTS:
        # float -> a narrower integer truncates to int64 and wraps, as eager (and PyTorch) do:
        # -3.7 -> uint8 is 253. C leaves a direct conversion of an out-of-range value undefined,
        # and the vectorized loops did give another answer than the scalar ones.
        return f"(({C_TYPES[dtype]})(int64_t)({value}))"
    return f"(({C_TYPES[dtype]})({value}))"


NARROW_INTS = (dt.uint8, dt.int8, dt.int16, dt.int32)

"""Pointwise lowerings of the inductor: compiled vs eager ember vs PyTorch.

One graph per op family and dtype (each graph is one compile), on inputs holding NaN, the
infinities and signed zeros; broadcasting, scalars, non-contiguous and empty inputs.
"""

from __future__ import annotations

import pytest
from inductor_test_helpers import check, make_input, tolerances

import ember

FLOAT_UNARY = ("sqrt rsqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh "
               "acosh atanh sigmoid erf erfc reciprocal abs neg floor ceil trunc round square frac sign").split()
ACTIVATIONS = [
    lambda m, x: m.relu(x),
    # gelu at +-inf: PyTorch's CPU kernel gives NaN on AVX-512 machines and +inf/-0 on others, so the inputs are clamped
    # (NaN kept) before the oracle comparison
    lambda m, x: m.nn.functional.gelu(x.clamp(-30.0, 30.0)),
    lambda m, x: m.nn.functional.gelu(x.clamp(-30.0, 30.0), approximate="tanh"),
    lambda m, x: m.nn.functional.silu(x),
    lambda m, x: m.nn.functional.mish(x),
    lambda m, x: m.nn.functional.hardsigmoid(x),
    lambda m, x: m.nn.functional.hardswish(x),
    lambda m, x: m.nn.functional.selu(x),
    lambda m, x: m.nn.functional.softplus(x, beta=2.0, threshold=5.0),
    lambda m, x: m.nn.functional.elu(x, alpha=0.7),
    lambda m, x: m.nn.functional.celu(x, alpha=1.5),
    lambda m, x: m.nn.functional.leaky_relu(x, 0.2),
    lambda m, x: m.nn.functional.hardtanh(x, -0.5, 2.0),
    lambda m, x: m.nn.functional.relu6(x),
    lambda m, x: m.nn.functional.threshold(x, 0.5, -7.0),
    lambda m, x: m.nn.functional.softsign(x),
    lambda m, x: m.nn.functional.tanhshrink(x),
    lambda m, x: m.clamp(x, -1.0, 0.5),
    lambda m, x: m.clamp(x, min=0.25),
]
PREDICATES = "isnan isinf isfinite isposinf isneginf logical_not".split()


def _unary_program(m, x):
    outs = [getattr(m, name)(x) for name in FLOAT_UNARY]
    outs += [f(m, x) for f in ACTIVATIONS]
    outs += [getattr(m, name)(x) for name in PREDICATES]
    return outs


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
def test_unary_family_floats(dtype):
    x = make_input((7, 13), dtype)
    rtol, atol = tolerances(dtype)
    # float16/bfloat16: each op computes in float32 and rounds once, like eager: same values
    check(_unary_program, x, rtol=rtol, atol=atol, torch_rtol=max(rtol, 1e-5), torch_atol=max(atol, 1e-5),
          kernels=1)


@pytest.mark.parametrize("half", [ember.float16, ember.bfloat16])
def test_an_explicit_cast_to_half_rounds_inside_a_chain(half):
    # float32 -> half -> float32 is not the identity: the later ops see the rounded value, as
    # in eager (a half value is computed in float32 in a kernel and rounded where stored, so a
    # cast to half, and a cast of a half value to another dtype, round where they stand)
    def program(m, x, d):
        h = getattr(m, str(half).split(".")[-1])
        a = x.to(h) * 3  # a half value (one op: one rounding, in eager as compiled)
        return [(x * 1000).to(h).float() * 3, (d * 1000).to(h) + 1, (x.to(h).float() - x) * 1e4,
                a, a.float() + 1, a.double(), m.where(a.isfinite(), a, 0).to(m.int32),
                a.to(m.float16 if h is m.bfloat16 else m.bfloat16)]

    check(program, make_input((6, 7), ember.float32, specials=True), make_input((5,), ember.float64),
          rtol=0, atol=0, kernels=2)  # one per shape


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.float64])
def test_float_to_narrow_integer_casts_wrap_like_eager(dtype):
    # -3.7 -> uint8 is 253 (through int64, then wrapping), read in the same kernel or stored; a
    # vectorized conversion once gave -3 when the cast value fed a later op
    def program(m, x):
        outs = []
        for d in (m.uint8, m.int8, m.int16, m.int32):
            c = x.to(d)
            outs += [c, c.float() + 0.5, x.reciprocal() >= c]
        return outs

    check(program, make_input((7, 19), dtype, specials=False, low=-300.0, high=300.0), kernels=1)


def test_unary_family_integers():
    def program(m, i, u, b):
        outs = [m.abs(i), m.neg(i), m.square(i), m.relu(i), m.sign(i), m.floor(i), m.round(i)]
        outs += [m.exp(i), m.sqrt(u), m.sigmoid(i), m.isnan(i), m.isinf(u), m.logical_not(i)]
        outs += [m.logical_not(b), m.isfinite(b), i.float(), b.to(m.int32), u.to(m.bool)]
        return outs

    check(program, make_input((5, 6), ember.int64), make_input((5, 6), ember.uint8),
          make_input((5, 6), ember.bool), rtol=1e-6, atol=1e-6)


BINARY = "add sub mul div maximum minimum eq ne lt le gt ge".split()
FLOAT_BINARY = "pow fmod remainder floor_divide atan2 hypot copysign fmax fmin logaddexp".split()


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.float64])
def test_binary_family_with_broadcasting(dtype):
    def program(m, a, b):
        outs = [getattr(m, name)(a, b) for name in BINARY + FLOAT_BINARY]
        outs += [m.logical_and(a, b), m.logical_or(a, b), m.logical_xor(a, b)]
        outs += [m.where(a > b, a, b), m.lerp(a, b, 0.3), m.add(a, b, alpha=2.5), m.sub(a, b, alpha=-1.5)]
        outs += [a * 2.5, 3.0 - b, a / 0.0, m.pow(a, 2), a > 0.5]
        return outs

    a = make_input((4, 1, 6), dtype, seed=1)
    b = make_input((3, 1), dtype, seed=2)
    rtol, atol = tolerances(dtype)
    # one kernel for the (4, 3, 6) results, one for a's and one for b's own shapes
    check(program, a, b, rtol=rtol, atol=atol, torch_rtol=max(rtol, 1e-5), torch_atol=max(atol, 1e-5),
          kernels=3)


def test_binary_integer_and_mixed_dtypes():
    def program(m, i32, i64, u8, b, h):
        outs = [i32 + i64, i32 * u8, i64 - 7, u8 + b, b & b, i32 | i64, i64 ^ 5, i32 > i64]
        outs += [m.maximum(i32, i64), m.minimum(u8, i32), i32 / i64, i64 + 0.5, h + i32, h * 2]
        outs += [m.where(b, i32, 3), m.where(b, h, i64), b * b, b + b]
        return outs

    check(program, make_input((3, 4), ember.int32, seed=3), make_input((4,), ember.int64, seed=4),
          make_input((3, 4), ember.uint8, seed=5), make_input((3, 4), ember.bool, seed=6),
          make_input((3, 4), ember.float16, seed=7), rtol=1e-3, atol=1e-3)


def test_integer_division_runs_eagerly():
    # integer floor division and remainder keep eager's semantics (and its error on zero)
    def program(m, a, b):
        return m.floor_divide(a, b), m.remainder(a, b), a + b

    a = make_input((6,), ember.int64, seed=8)
    b = ember.tensor([3, -2, 5, 7, -1, 4])
    compiled = check(program, a, b, lowered=False)
    assert compiled.artifact.extern_count == 2 and compiled.artifact.kernel_count == 1


def test_non_contiguous_inputs():
    def program(m, t, s, e, o):
        return t * 2 + s.sin(), (e + 1).relu(), o.exp() - t

    base = make_input((8, 6), ember.float32, specials=False)
    t = base.t()                                   # transposed (6, 8)
    s = make_input((6, 16), ember.float32, seed=9)[:, ::2]   # step slice
    e = make_input((1, 8), ember.float32, seed=10).expand(6, 8)  # stride 0
    o = make_input((7, 9), ember.float32, seed=11)[1:, 1:]    # storage offset
    assert not t.is_contiguous() and not s.is_contiguous() and not e.is_contiguous()
    check(program, t, s, e, o)


def test_empty_tensors():
    def program(m, x, y):
        return x * 2 + 1, (x + y).exp(), x.sum(0), x.sum(1), x.mean(0)

    check(program, ember.randn(0, 5), ember.randn(5), lowered=True)


def test_zero_dim_and_scalars():
    def program(m, x, y):
        return x * y + 1, (x - 3.5).abs(), m.where(x > 0, y, x) * 2, m.signbit(y - 0.5)

    check(program, ember.tensor(1.5), ember.randn(4))


def test_views_are_index_arithmetic():
    def program(m, x):
        a = x.permute(2, 0, 1).unsqueeze(0) * 2          # (1, 5, 3, 4)
        b = x.transpose(0, 1).reshape(4, 15)             # a copy in eager: index math here
        c = x[1].t()[1:4:2] + x.select(2, 0).sum()       # select, t, slice
        d = x.view(12, 5).expand(2, 12, 5).squeeze(0)
        return a.exp(), b + 1, c, d.sin()

    # one kernel per output, plus the sum
    check(program, make_input((3, 4, 5), ember.float32, specials=False), kernels=5)


def test_chain_fuses_into_one_kernel_and_names_ops():
    def program(m, x, y):
        return ((x + y) * 2).relu() - 1

    compiled = check(program, ember.randn(64, 32), ember.randn(32), kernels=1)
    source = compiled.artifact.cpp_source
    assert "add" in source and "relu" in source and "#pragma omp" in source

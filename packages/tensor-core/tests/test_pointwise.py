"""Elementwise ops vs PyTorch over the OpInfo database (tests/opinfo): every dtype, shapes
(0-d, empty, broadcast), layouts, special values, in-place and out= forms, error types."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from opinfo import ALL_OPS, BINARY_OPS, UNARY_OPS
from opinfo.binary import ZERO_DIV_INT, int_zero_division_errors
from opinfo.core import ALL_NAMES, E_DTYPES, assert_close, make, pair_of, run_sample

import ember


def _cases(ops):
    return [pytest.param(op, name, id=f"{op.name}-{name}") for op in ops for name in op.dtypes]


@pytest.mark.parametrize("op,dtype_name", _cases(ALL_OPS))
def test_op_matches_torch(op, dtype_name):
    for sample in op.samples(dtype_name):
        run_sample(op, sample, dtype_name)


def _inplace_cases():
    return [pytest.param(op, name, id=f"{op.name}-{name}") for op in UNARY_OPS + BINARY_OPS if op.inplace
            for name in ALL_NAMES]


@pytest.mark.parametrize("op,dtype_name", _inplace_cases())
def test_inplace_matches_torch(op, dtype_name):
    """``x.op_(...)`` writes into x (also through a strided view), bumps its version, or raises like torch."""
    for sample in op.samples(dtype_name)[:3]:
        (e_self, t_self), *rest = sample.args
        e_self, t_self = e_self.clone(), t_self.clone()
        e_rest = [a[0] if isinstance(a, tuple) else a for a in rest]
        t_rest = [a[1] if isinstance(a, tuple) else a for a in rest]
        try:
            t_result = getattr(t_self, op.inplace)(*t_rest, **sample.kwargs)
        except Exception as exc:  # noqa: BLE001
            with pytest.raises(type(exc)):
                getattr(e_self, op.inplace)(*e_rest, **sample.kwargs)
            continue
        version = e_self._version
        e_result = getattr(e_self, op.inplace)(*e_rest, **sample.kwargs)
        assert e_result is e_self
        assert e_self._version > version
        assert_close(e_self, t_result, op.tols.get(dtype_name), f"{op.inplace} {sample.desc}")


@pytest.mark.parametrize("op", [op for op in UNARY_OPS + BINARY_OPS if op.check_out], ids=repr)
@pytest.mark.parametrize("dtype_name", ["int32", "float32"])
def test_out_matches_torch(op, dtype_name):
    sample = op.samples(dtype_name)[0]
    e_args, t_args = sample.ember_args(), sample.torch_args()
    try:
        expected = op.torch_fn(*t_args, **sample.kwargs)
    except (RuntimeError, NotImplementedError):
        pytest.skip("torch rejects this dtype")
    t_out = torch.empty(expected.shape, dtype=expected.dtype)
    e_out = ember.empty(tuple(expected.shape), dtype=E_DTYPES[str(expected.dtype).split(".")[-1]])
    op.torch_fn(*t_args, out=t_out, **sample.kwargs)
    got = op.ember_fn(*e_args, out=e_out, **sample.kwargs)
    assert got is e_out
    assert_close(e_out, t_out, op.tols.get(dtype_name), op.name)


@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod", "div_trunc", "div_floor"])
@pytest.mark.parametrize("dtype_name", ZERO_DIV_INT)
def test_int_division_by_zero_raises(name, dtype_name):
    op = next(op for op in ALL_OPS if op.name == name)
    for sample in int_zero_division_errors(dtype_name):
        with pytest.raises(RuntimeError):
            op.torch_fn(*sample.torch_args())
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            op.ember_fn(*sample.ember_args())


@pytest.mark.parametrize("dtype_name", ["int8", "int16", "int32", "int64"])
def test_int_min_by_minus_one(dtype_name):
    info = np.iinfo(dtype_name)
    a = pair_of(np.array([info.min, info.min + 1, 7]), dtype_name)
    b = pair_of(np.array([-1, -1, -1]), dtype_name)
    for e_fn, t_fn in ((ember.floor_divide, torch.floor_divide), (ember.remainder, torch.remainder),
                       (ember.fmod, torch.fmod), (ember.mul, torch.mul), (ember.neg, None)):
        if t_fn is None:
            assert_close(ember.neg(a[0]), torch.neg(a[1]))
        else:
            assert_close(e_fn(a[0], b[0]), t_fn(a[1], b[1]), desc=e_fn.__name__)
    # torch's own trunc division traps (SIGFPE) on int min / -1; ember wraps like floor_divide.
    assert_close(ember.div(a[0], b[0], rounding_mode="trunc"), torch.floor_divide(a[1], b[1]))
    assert_close(ember.abs(a[0]), torch.abs(a[1]))


# -- clamp, where, lerp -------------------------------------------------------------------

_BOUNDS = [(-1, 2), (None, 1.5), (-0.5, None), (2, -1), (0.5, 0.5)]


@pytest.mark.parametrize("dtype_name", ALL_NAMES)
@pytest.mark.parametrize("bounds", _BOUNDS, ids=str)
def test_clamp_scalar_bounds(dtype_name, bounds):
    e, t = make((3, 4), dtype_name, "transposed")
    lo, hi = bounds
    try:
        expected = torch.clamp(t, lo, hi)
    except Exception as exc:  # noqa: BLE001
        with pytest.raises(type(exc)):
            ember.clamp(e, lo, hi)
        return
    assert_close(ember.clamp(e, lo, hi), expected)
    assert_close(e.clamp(min=lo, max=hi), t.clamp(min=lo, max=hi))


@pytest.mark.parametrize("dtype_name", ["int32", "float32", "float16", "float64", "uint8"])
def test_clamp_tensor_bounds_and_nan(dtype_name):
    e, t = make((3, 4), dtype_name, "sliced")
    elo, tlo = make((4,), dtype_name, low=-3, high=0, seed=2)
    ehi, thi = make((3, 1), dtype_name, low=0, high=3, seed=3)
    assert_close(ember.clamp(e, elo, ehi), torch.clamp(t, tlo, thi))
    assert_close(ember.clamp(e, min=elo), torch.clamp(t, min=tlo))
    assert_close(ember.clamp(e, max=ehi), torch.clamp(t, max=thi))
    assert_close(ember.clamp_min(e, elo), torch.clamp_min(t, tlo))
    if dtype_name.startswith("float"):
        v = pair_of(np.array([float("nan"), 1.0, -9.0]), dtype_name)
        assert_close(ember.clamp(v[0], -1, 1), torch.clamp(v[1], -1, 1))
        assert_close(ember.clamp(v[0], min=float("nan")), torch.clamp(v[1], min=float("nan")))
    with pytest.raises(RuntimeError):
        ember.clamp(e)
    out = e.clone()
    assert ember.clamp(e, -1, 1, out=out) is out
    assert_close(out, torch.clamp(t, -1, 1))


@pytest.mark.parametrize("dtype_name", ALL_NAMES)
def test_clamp_inplace(dtype_name):
    e, t = make((3, 4), dtype_name)
    e, t = e.clone(), t.clone()
    try:
        t.clamp_(-1, 2)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            e.clamp_(-1, 2)
        return
    v = e._version
    assert e.clamp_(-1, 2) is e
    assert e._version > v
    assert_close(e, t)


@pytest.mark.parametrize("dtype_name", ALL_NAMES)
def test_where(dtype_name):
    ec, tc = make((3, 4), "bool", seed=5)
    ea, ta = make((3, 4), dtype_name, "transposed", seed=1)
    eb, tb = make((4,), dtype_name, seed=2)
    assert_close(ember.where(ec, ea, eb), torch.where(tc, ta, tb))
    assert_close(ember.where(ec, ea, 2.5), torch.where(tc, ta, 2.5))
    assert_close(ember.where(ec, 1, eb), torch.where(tc, 1, tb))
    assert_close(ember.where(ec.select(0, 0).select(0, 0), ea, eb), torch.where(tc[0, 0], ta, tb))
    assert_close(ember.where(ec.narrow(0, 0, 0), ea.narrow(0, 0, 0), eb), torch.where(tc[:0], ta[:0], tb))
    assert_close(ea.where(ec, eb), ta.where(tc, tb))  # the method: self holds the values, not the condition
    et, tt = make((3, 4), "float64", seed=6)
    assert_close(ember.where(ec, ea, et), torch.where(tc, ta, tt))
    with pytest.raises(RuntimeError):
        ember.where(ea.to(ember.float32), ea, eb)
    with pytest.raises(RuntimeError):
        ember.where(ec, ea, make((5,), dtype_name)[0])


@pytest.mark.parametrize("dtype_name", ALL_NAMES)
def test_lerp(dtype_name):
    ea, ta = make((3, 4), dtype_name, "transposed", seed=1)
    eb, tb = make((4,), dtype_name, seed=2)
    ew, tw = make((3, 1), dtype_name, low=0, high=1, seed=3)
    for e_w, t_w in ((ew, tw), (0.25, 0.25), (2.0, 2.0)):
        try:
            expected = torch.lerp(ta, tb, t_w)
        except Exception as exc:  # noqa: BLE001
            with pytest.raises(type(exc)):
                ember.lerp(ea, eb, e_w)
            continue
        assert_close(ember.lerp(ea, eb, e_w), expected)
    if dtype_name == "float32":
        with pytest.raises(RuntimeError):
            ember.lerp(ea, eb.double(), 0.5)


# -- Python-level behaviour ------------------------------------------------------------------

def test_bad_operand_types_raise_type_error():
    e = ember.ones(3)
    with pytest.raises(TypeError):
        ember.add(e, "a")
    with pytest.raises(TypeError):
        ember.exp([1.0])
    with pytest.raises(TypeError):
        torch.exp([1.0])


def test_broadcast_mismatch_raises():
    with pytest.raises(RuntimeError):
        ember.add(ember.ones(3), ember.ones(4))
    with pytest.raises(RuntimeError):
        ember.ones(3).add_(ember.ones(2, 3))
    with pytest.raises(RuntimeError):  # int result into a float... the other way round
        ember.ones(3, dtype=ember.int32).add_(1.5)


def test_sub_bool_and_neg_bool_raise():
    b = ember.tensor([True, False])
    with pytest.raises(RuntimeError):
        _ = b - b
    with pytest.raises(RuntimeError):
        ember.neg(b)
    with pytest.raises(RuntimeError):
        _ = -b


def test_integer_negative_power_scalar_raises():
    with pytest.raises(RuntimeError):
        torch.tensor([2, 3]) ** -1
    with pytest.raises(RuntimeError):
        ember.tensor([2, 3]) ** -1


def test_meta_results_match_cpu_dtypes():
    for op in UNARY_OPS[:10] + BINARY_OPS[:10]:
        for name in ("int32", "float16"):
            sample = op.samples(name)[2]
            args = [a[0].to("meta") if isinstance(a, tuple) else a for a in sample.args]
            try:
                cpu = op.ember_fn(*sample.ember_args(), **sample.kwargs)
            except RuntimeError:
                continue
            meta = op.ember_fn(*args, **sample.kwargs)
            assert meta.device.type == "meta"
            assert meta.shape == cpu.shape and meta.dtype is cpu.dtype, op.name


def test_float_results_keep_large_ints_exact():
    e = ember.tensor([2**40 + 1, -(2**40) - 3])
    t = torch.tensor([2**40 + 1, -(2**40) - 3])
    assert_close(e * 3 + 1, t * 3 + 1)
    assert_close(e // 7, t // 7)


def test_exp_float32_accuracy_over_the_whole_range():
    """The vectorized exp_f32 (common/vecmath.h): within 2 ulp of torch (float64 reference) from
    underflow to overflow, with exact 0/inf saturation and nan passthrough."""
    x = np.concatenate([np.linspace(-110, 95, 40001), [88.72, 88.73, -103.97, -103.98, -87.5, np.nan]])
    x = x.astype(np.float32)
    got = ember.exp(ember.from_numpy(x.copy())).numpy().astype(np.float64)
    ref = torch.exp(torch.from_numpy(x.astype(np.float64))).numpy()
    normal = (ref > 1.2e-38) & (ref < 3.4e38)
    assert np.all(np.abs(got[normal] - ref[normal]) <= 2.4e-7 * ref[normal])
    t32 = torch.exp(torch.from_numpy(x)).numpy().astype(np.float64)
    assert np.array_equal(np.isinf(got), np.isinf(t32))
    assert np.array_equal(got == 0, t32 == 0)
    assert np.isnan(got[-1])
    sub = (ref <= 1.2e-38) & (ref > 0)  # subnormal results: absolute error within one subnormal step
    assert np.all(np.abs(got[sub] - ref[sub]) <= 1.5e-45)


@pytest.mark.parametrize("fn", ["add", "sub"])
@pytest.mark.parametrize("a_dtype,b_dtype,alpha", [
    ("float16", "bool", 0.5),  # a float alpha must not promote f16 + alpha * bool to float32
    ("int64", "uint8", 2),  # alpha * uint8 must not wrap around in uint8 before the add
    ("bfloat16", "int32", 1.5),
])
def test_alpha_does_not_take_part_in_type_promotion(fn, a_dtype, b_dtype, alpha):
    # Found by test_fuzz_ops: _scaled multiplied `other` by alpha in other's own dtype.
    a, b = make((), a_dtype, seed=1), make((3,), b_dtype, low=0, high=200, seed=2)
    if fn == "sub" and b_dtype == "bool":
        for lib, (x, y) in ((ember, (a[0], b[0])), (torch, (a[1], b[1]))):
            with pytest.raises(RuntimeError, match="bool tensor"):
                lib.sub(x, y, alpha=alpha)
        return
    assert_close(getattr(ember, fn)(a[0], b[0], alpha=alpha), getattr(torch, fn)(a[1], b[1], alpha=alpha))
    x = make((3,), a_dtype, seed=3)
    getattr(x[0], fn + "_")(b[0], alpha=alpha)
    getattr(x[1], fn + "_")(b[1], alpha=alpha)
    assert_close(x[0], x[1])


@pytest.mark.parametrize("kwargs", [{}, {"eps": 0.2}, {"eps": None}])
def test_logit_inplace_method_takes_eps_like_torch(kwargs):
    # Found by test_fuzz_ops: Tensor.logit_ rejected the eps keyword.
    e, t = make((5,), "float32", low=0.0, high=1.0)
    assert_close(e.clone().logit_(**kwargs), t.clone().logit_(**kwargs))


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.relu(x),
    lambda lib, x: x.clone().relu_(),
    lambda lib, x: lib.clamp(x, min=0.0),
    lambda lib, x: lib.clamp(x, min=0),
    lambda lib, x: lib.clamp(x, max=0.0),
    lambda lib, x: lib.clamp(x, -0.0, 0.0),
    lambda lib, x: x.clamp_min(0.0),
    lambda lib, x: x.clamp_max(-0.0),
    lambda lib, x: x.clone().clamp_(min=0.0),
    lambda lib, x: lib.nn.functional.relu(x),
    lambda lib, x: lib.nn.functional.hardtanh(x, -0.0, 0.0),
    lambda lib, x: lib.nn.functional.relu6(x),
])
@pytest.mark.parametrize("size", [1, 37])
def test_relu_and_clamp_keep_the_sign_of_zero_like_torch(call, size):
    # relu(-0.) is -0. in PyTorch: a bound equal to x leaves x as it is (ember returned +0.).
    for values in ([-0.0] * size, [0.0] * size):
        got, want = call(ember, ember.tensor(values)), call(torch, torch.tensor(values))
        assert ember.signbit(got).tolist() == torch.signbit(want).tolist()


@pytest.mark.parametrize("call", [
    lambda lib, x, t, s: lib.clamp(x, t, 2.0),
    lambda lib, x, t, s: lib.clamp(x, min=t, max=2),
    lambda lib, x, t, s: lib.clamp(x, 0, t),
    lambda lib, x, t, s: x.clamp(t, 2.0),
    lambda lib, x, t, s: x.clip(0, t),
    lambda lib, x, t, s: x.clone().clamp_(t, 2.0),
    lambda lib, x, t, s: lib.clamp(x, s, 2.0),  # a 0-d tensor passes for a number: computed
    lambda lib, x, t, s: lib.clamp(x, t, s),
    lambda lib, x, t, s: lib.clamp(x, None, t),
    lambda lib, x, t, s: lib.clamp(x, min=t),
])
def test_clamp_with_a_tensor_bound_beside_a_number_bound_is_a_type_error(call):
    def run(lib):
        try:
            return call(lib, lib.arange(3.0), lib.ones(3), lib.tensor(1.0))
        except TypeError:
            return TypeError
    want, got = run(torch), run(ember)
    if want is TypeError:
        assert got is TypeError
    else:
        assert_close(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("size", [1, 37])
@pytest.mark.parametrize("fn", ["tanh", "tanhshrink", "gelu_tanh"])
def test_tanh_family_keeps_the_sign_of_zero_like_torch(fn, size, dtype):
    # The float32 tanh polynomial added its terms up to +0. for x = -0. (PyTorch: -0.).
    def run(lib):
        x = -lib.zeros(size, dtype=getattr(lib, dtype))
        if fn == "tanh":
            return lib.tanh(x)
        if fn == "tanhshrink":
            return lib.nn.functional.tanhshrink(x)
        return lib.nn.functional.gelu(x, approximate="tanh")

    assert ember.signbit(run(ember)).tolist() == torch.signbit(run(torch)).tolist()

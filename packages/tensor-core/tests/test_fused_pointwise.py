"""addcmul, addcdiv, lerp and add/sub with alpha (the fused native updates) against torch:
dtypes and promotion, broadcasting, layouts, 0-d and empty inputs, in-place forms and errors."""

from __future__ import annotations

import pytest
import torch

import ember

from conftest import FLOAT_NAMES, INT_NAMES, assert_same, make_pair

ALL_NAMES = ["bool"] + INT_NAMES + FLOAT_NAMES
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


def _outcome(fn):
    """fn()'s result, or the exception type it raises."""
    try:
        return fn(), None
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return None, type(exc)


def check(e_fn, t_fn, **tol):
    """ember and torch give the same result, or raise the same exception type."""
    expected, exc = _outcome(t_fn)
    if exc is not None:
        with pytest.raises(exc):
            e_fn()
        return None
    result = e_fn()
    assert_same(result, expected, **tol)
    return result


def operands(shapes, names, layouts=None, low=-3, high=3):
    pairs = [make_pair(s, n, low=low, high=high, seed=i, layout=(layouts or ["contiguous"] * 3)[i])
             for i, (s, n) in enumerate(zip(shapes, names))]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _tol(names):
    # The reference rounds half types once from float32 as ember does; a 1-ulp difference of
    # a fused multiply-add can still flip the last half bit.
    return {"rtol": 1e-2, "atol": 1e-2} if any(n in ("float16", "bfloat16") for n in names) else {}


# -- addcmul / addcdiv ------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("name", ALL_NAMES)
def test_same_dtype(op, name):
    (es, ts) = operands([(3, 4)] * 3, [name] * 3, low=1, high=4)
    for value in (1, 2, -0.5):
        check(lambda v=value: getattr(ember, op)(*es, value=v), lambda v=value: getattr(torch, op)(*ts, value=v),
              **_tol([name]))


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("names", [
    ("float32", "float64", "float32"), ("float16", "float32", "float32"), ("bfloat16", "bfloat16", "float16"),
    ("int64", "float32", "int32"), ("int32", "int64", "int64"), ("uint8", "int8", "int8"),
    ("float32", "int64", "int64"), ("bool", "bool", "int64"), ("float32", "bool", "bool"),
    ("int64", "int64", "float16"),
])
def test_mixed_dtypes_promote_as_torch(op, names):
    es, ts = operands([(2, 3)] * 3, list(names), low=1, high=4)
    for value in (1, 3, 0.75):
        check(lambda v=value: getattr(ember, op)(*es, value=v), lambda v=value: getattr(torch, op)(*ts, value=v),
              **_tol(names))


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_zero_dim_operands_do_not_promote_the_category(op):
    # 0-d float32 tensors next to a float16 tensor: the result stays float16.
    es, ts = operands([(3,), (), ()], ["float16", "float32", "float32"], low=1, high=3)
    check(lambda: getattr(ember, op)(*es), lambda: getattr(torch, op)(*ts), **_tol(["float16"]))
    es, ts = operands([(), (), ()], ["float32"] * 3, low=1, high=3)
    check(lambda: getattr(ember, op)(*es, value=2), lambda: getattr(torch, op)(*ts, value=2))


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_layouts_and_broadcasting(op, layout):
    es, ts = operands([(4, 3), (4, 3), (3,)], ["float32"] * 3, [layout, "transposed", "contiguous"], low=1, high=3)
    check(lambda: getattr(ember, op)(*es, value=0.3), lambda: getattr(torch, op)(*ts, value=0.3))
    es, ts = operands([(3,), (2, 1, 3), (4, 1)], ["float64"] * 3, low=1, high=3)
    check(lambda: getattr(ember, op)(*es, value=-2), lambda: getattr(torch, op)(*ts, value=-2))


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_empty(op):
    es, ts = operands([(0, 3), (1, 3), (3,)], ["float32"] * 3)
    check(lambda: getattr(ember, op)(*es), lambda: getattr(torch, op)(*ts))


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("names", [("float32",) * 3, ("float16",) * 3, ("float16", "float32", "float32"),
                                   ("float32", "float64", "float32"), ("int64",) * 3, ("int64", "float32", "float32"),
                                   ("float64", "int32", "float32")])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_inplace(op, names, layout):
    es, ts = operands([(4, 3), (3,), (4, 1)], list(names), [layout, "contiguous", "contiguous"], low=1, high=4)
    version = es[0]._version
    result = check(lambda: getattr(es[0], op + "_")(es[1], es[2], value=0.5),
                   lambda: getattr(ts[0], op + "_")(ts[1], ts[2], value=0.5), **_tol(names))
    if result is not None:
        assert result is es[0]
        assert es[0]._version > version
        assert_same(es[0], ts[0], **_tol(names))


@pytest.mark.parametrize("op", ["addcmul_", "addcdiv_", "lerp_"])
def test_inplace_needs_self_shape(op):
    es, ts = operands([(3,), (2, 3), (2, 3)], ["float32"] * 3, low=1, high=3)
    args = (0.5,) if op == "lerp_" else (es[2],)
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        getattr(es[0], op)(es[1], *args)
    expanded = ember.ones(1, 3).expand(2, 3)  # writing it would store two results in one element
    with pytest.raises(RuntimeError, match="single memory location"):
        getattr(expanded, op)(es[1], *args)


def test_addcmul_value_converts_like_torch():
    es, ts = operands([(5,)] * 3, ["int64"] * 3)
    for value in (0.5, 2.7, -2.7, True):  # truncated to the integer type, never promoting
        check(lambda v=value: ember.addcmul(*es, value=v), lambda v=value: torch.addcmul(*ts, value=v))
    es, ts = operands([(5,)] * 3, ["uint8"] * 3)
    check(lambda: ember.addcmul(*es, value=-1), lambda: torch.addcmul(*ts, value=-1))  # wraps
    ef, tf = operands([(5,)] * 3, ["float32"] * 3)
    check(lambda: ember.addcmul(*ef, value=ember.tensor(2.5)), lambda: torch.addcmul(*tf, value=torch.tensor(2.5)))
    with pytest.raises(RuntimeError, match="without overflow"):
        ember.addcmul(*ef, value=1e300)
    assert ember.addcmul(*[t.double() for t in ef], value=1e300).dtype is ember.float64


def test_addcdiv_integer_division_is_rejected():
    es, _ = operands([(3,)] * 3, ["int64", "int64", "int32"])
    for args in ((es[0], es[1], es[2]), (es[0].float(), es[1], es[2]), (es[0], es[1] > 0, es[2] > 0)):
        with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
            ember.addcdiv(*args)
    with pytest.raises(NotImplementedError, match="addcmul_cpu_out"):
        ember.addcmul(es[0] > 0, es[1] > 0, es[2] > 0)


def test_argument_errors():
    e = ember.ones(3)
    with pytest.raises(TypeError, match="argument 'tensor2'"):
        ember.addcmul(e, e, 2.0)
    with pytest.raises(TypeError, match="argument 'input'"):
        ember.addcdiv(1.0, e, e)
    with pytest.raises(TypeError, match="argument 'value' must be Number"):
        ember.addcmul(e, e, e, value="a")
    with pytest.raises(RuntimeError, match="size of tensor"):
        ember.addcmul(e, ember.ones(2, 3), ember.ones(4, 1, 2))
    with pytest.raises(RuntimeError, match="can't be cast"):
        ember.ones(3, dtype=ember.int64).addcdiv_(e, e)


def test_out_argument():
    es, ts = operands([(2, 3)] * 3, ["float32"] * 3, low=1, high=3)
    out_e, out_t = ember.empty(2, 3), torch.empty(2, 3)
    ember.addcdiv(*es, value=2, out=out_e)
    torch.addcdiv(*ts, value=2, out=out_t)
    assert_same(out_e, out_t)


# -- lerp ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FLOAT_NAMES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_lerp_weights(name, layout):
    es, ts = operands([(4, 3), (3,)], [name] * 2, [layout, "contiguous"])
    ew, tw = make_pair((4, 1), name, low=-1, high=2, seed=9)
    for e_w, t_w in ((0.3, 0.3), (0.5, 0.5), (0.75, 0.75), (-0.6, -0.6), (1, 1), (ew, tw)):
        check(lambda w=e_w: ember.lerp(*es, w), lambda w=t_w: torch.lerp(*ts, w), **_tol([name]))
        check(lambda w=e_w: es[0].clone().lerp_(es[1], w), lambda w=t_w: ts[0].clone().lerp_(ts[1], w), **_tol([name]))


def test_lerp_ends_are_exact():
    es, ts = operands([(6,), (6,)], ["float32"] * 2, low=-1e3, high=1e3)
    assert_same(ember.lerp(*es, 1.0), ts[1], rtol=0, atol=0)
    assert_same(ember.lerp(*es, 0.0), ts[0], rtol=0, atol=0)


def test_lerp_dtypes():
    es, ts = operands([(3,), (3,)], ["float32", "float32"])
    w64 = ember.tensor(0.25, dtype=ember.float64)
    check(lambda: ember.lerp(*es, w64), lambda: torch.lerp(*ts, torch.tensor(0.25, dtype=torch.float64)))
    with pytest.raises(RuntimeError, match="expected dtype float for `weight` but got dtype double"):
        ember.lerp(*es, ember.tensor([0.25], dtype=ember.float64))
    with pytest.raises(RuntimeError, match="expected dtype float for `end` but got dtype double"):
        ember.lerp(es[0], es[1].double(), 0.5)
    ei = ember.tensor([1, 2, 3])
    with pytest.raises(NotImplementedError, match="lerp_kernel_scalar"):
        ember.lerp(ei, ei, 0.5)
    assert ember.lerp(*es[:1], es[0][:0].reshape(0, 1), 0.5).shape == (0, 3)


def test_lerp_zero_dim():
    es, ts = operands([(), ()], ["float64"] * 2)
    check(lambda: ember.lerp(*es, 0.7), lambda: torch.lerp(*ts, 0.7))
    check(lambda: ember.lerp(*es, es[1]), lambda: torch.lerp(*ts, ts[1]))


# -- add / sub with alpha ---------------------------------------------------------------------------


@pytest.mark.parametrize("names", [(n, n) for n in ALL_NAMES] + [
    ("float32", "bfloat16"), ("float64", "int64"), ("bfloat16", "float32"), ("float16", "bfloat16"),
    ("int32", "int64"), ("uint8", "bool"), ("int64", "float16"),
])
@pytest.mark.parametrize("alpha", [2, -3, 0.1234567, True, 1])
def test_add_sub_alpha(names, alpha):
    es, ts = operands([(3, 4), (4,)], list(names), ["transposed", "contiguous"])
    for op in ("add", "sub"):
        check(lambda o=op: getattr(ember, o)(*es, alpha=alpha), lambda o=op: getattr(torch, o)(*ts, alpha=alpha),
              **_tol(names))
        check(lambda o=op: getattr(es[0].clone(), o + "_")(es[1], alpha=alpha),
              lambda o=op: getattr(ts[0].clone(), o + "_")(ts[1], alpha=alpha), **_tol(names))


def test_alpha_scales_in_the_result_dtype():
    # The scaling happens in the promoted dtype, not in other's (bfloat16 / int64 here).
    x = ember.tensor([1.0])
    r = ember.add(x, ember.tensor([1.0], dtype=ember.bfloat16), alpha=0.1234567)
    assert r.item() == torch.add(torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.bfloat16),
                                 alpha=0.1234567).item()
    r = ember.add(ember.tensor([0.0], dtype=ember.float64), ember.tensor([3]), alpha=0.1)
    assert r.item() == 0.30000000000000004
    r = ember.tensor([0.0], dtype=ember.float64).sub_(ember.tensor([3]), alpha=0.1)
    assert r.item() == -0.30000000000000004
    # A Python number as input takes the unfused path, with the same rule.
    r = ember.add(0.0, ember.tensor([1.0], dtype=ember.bfloat16).float(), alpha=0.1234567)
    assert r.item() == pytest.approx(0.1234567, rel=1e-7)


def test_alpha_errors():
    ei, ef = ember.tensor([1, 2]), ember.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
        ember.add(ei, ei, alpha=0.5)
    with pytest.raises(RuntimeError, match="Boolean alpha only supported"):
        ember.add(ei, ei, alpha=True)
    with pytest.raises(RuntimeError, match="can't be cast"):
        ei.clone().add_(ef, alpha=2)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        ef.clone().add_(ember.ones(2, 2), alpha=2)
    with pytest.raises(RuntimeError, match="with two bool tensors is not supported"):
        ember.sub(ei > 0, ei > 0, alpha=2)
    b = ei > 1
    assert_same(ember.add(b, b, alpha=False), torch.add(torch.tensor([False, True]), torch.tensor([False, True]),
                                                          alpha=False))


def test_alpha_empty_and_zero_dim():
    es, ts = operands([(0, 2), (2,)], ["float32"] * 2)
    check(lambda: ember.add(*es, alpha=3), lambda: torch.add(*ts, alpha=3))
    es, ts = operands([(), (3,)], ["float64", "float32"])
    check(lambda: ember.sub(*es, alpha=0.5), lambda: torch.sub(*ts, alpha=0.5))


def test_meta_device_gives_shape_and_dtype_without_data():
    x = ember.empty(2, 3, device="meta")
    t1 = ember.empty(3, dtype=ember.float64, device="meta")
    t2 = ember.empty(4, 1, 1, device="meta")
    for fn in (ember.addcmul, ember.addcdiv):
        r = fn(x, t1, t2, value=2)
        assert r.device.type == "meta" and r.shape == (4, 2, 3) and r.dtype is ember.float64
    assert ember.lerp(x, x, 0.5).shape == (2, 3)
    r = ember.add(x, t1.float(), alpha=3)
    assert r.device.type == "meta" and r.shape == (2, 3)
    assert x.addcmul_(x, x).shape == (2, 3)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.addcdiv_(t2, x)


@pytest.mark.parametrize("op", ["addcmul_", "addcdiv_", "lerp_", "add_", "sub_"])
def test_inplace_rejects_partially_overlapping_inputs(op):
    def run(x, lo, hi):
        if op in ("add_", "sub_"):
            return getattr(lo, op)(hi, alpha=2)
        return getattr(lo, op)(hi, 0.3) if op == "lerp_" else getattr(lo, op)(hi, hi + 1)

    x = ember.arange(6.0)
    with pytest.raises(RuntimeError, match="single memory location"):
        run(x, x[1:], x[:-1])
    # Disjoint halves of one storage and the very same view are fine, as in PyTorch.
    tx = torch.arange(6.0)
    assert_same(run(x, x[:3], x[3:]), run(tx, tx[:3], tx[3:]))
    y, ty = ember.arange(1.0, 4.0), torch.arange(1.0, 4.0)
    assert_same(run(y, y, y), run(ty, ty, ty))


def test_complex_operands_take_the_composite():
    # The native kernels are real-only; complex results come from mul/div + add, as in PyTorch.
    ea, ta = ember.tensor([1 + 2j, 3 - 1j, -0.5j]), torch.tensor([1 + 2j, 3 - 1j, -0.5j])
    eb, tb = ember.tensor([0.5, 2.0, -1.0]), torch.tensor([0.5, 2.0, -1.0])
    assert_same(ember.addcmul(ea, ea, eb, value=2), torch.addcmul(ta, ta, tb, value=2))
    assert_same(ember.addcdiv(eb, ea, ea + 1, value=1j), torch.addcdiv(tb, ta, ta + 1, value=1j))
    assert_same(ember.add(ea, eb, alpha=3), torch.add(ta, tb, alpha=3))
    assert_same(ember.sub(eb, ea, alpha=0.5), torch.sub(tb, ta, alpha=0.5))
    assert_same(ea.clone().addcmul_(eb, eb, value=-1), ta.clone().addcmul_(tb, tb, value=-1))
    with pytest.raises(RuntimeError, match="can't be cast"):
        eb.clone().addcmul_(ea, eb)
    with pytest.raises(NotImplementedError):
        ember.lerp(ea, ea, 0.5)


@pytest.mark.parametrize("method,args", [
    ("add_", (-0.5, "b")), ("sub_", (2, "b")), ("addcmul_", (0.25, "b", "c")), ("addcdiv_", (-3, "b", "c")),
])
def test_deprecated_scalar_first_overloads_as_torch(method, args):
    # char_rnn_classification (and old optimizers): p.data.add_(-learning_rate, p.grad.data),
    # exp_avg_sq.addcmul_(1 - beta2, grad, grad). PyTorch still takes the scalar first, with a
    # UserWarning naming the deprecated overload; ember raised TypeError.
    import warnings

    results = []
    ember._src.methods._DEPRECATED_WARNED.discard(method)
    for lib in (torch, ember):
        a = lib.tensor([1.0, 2.0, 3.0])
        named = {"b": lib.tensor([0.5, -1.0, 4.0]), "c": lib.tensor([2.0, 8.0, -1.0])}
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = getattr(a, method)(*(named.get(x, x) if isinstance(x, str) else x for x in args))
        messages = [str(w.message) for w in seen if issubclass(w.category, UserWarning)]
        results.append((out is a, a.tolist(), [m.split(" (Triggered")[0] for m in messages]))
    assert results[1][:2] == results[0][:2]
    # PyTorch warns once per process (an earlier call may have had it): ember's message is PyTorch's
    assert len(results[1][2]) == 1 and results[1][2][0].startswith(f"This overload of {method} is deprecated:")
    if results[0][2]:
        assert results[1][2] == results[0][2]
    with pytest.raises(TypeError):
        getattr(ember.ones(3), method)(ember.ones(3), ember.ones(3), ember.ones(3))

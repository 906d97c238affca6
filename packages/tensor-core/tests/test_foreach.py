"""``ember._foreach_*`` against ``torch._foreach_*`` (PyTorch 2.13): values, result dtypes, the
in-place forms returning their list, every overload (Scalar, Tensor[], Scalar[], 0-d Tensor), the
errors, and gradients through the list forms."""

from __future__ import annotations

import numpy as np
import pytest

import ember

from conftest import raises_like

torch = pytest.importorskip("torch")


def _pair(shapes=((3,), (2, 4), ()), dtype="float32", seed=0, positive=False):
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(0.2 if positive else -1.5, 1.5, size=s).astype(dtype) for s in shapes]
    return [ember.tensor(a) for a in arrays], [torch.tensor(a) for a in arrays]


def _same(e, t, tol=1e-6):
    assert type(e) is type(t), (type(e), type(t))
    assert len(e) == len(t)
    for a, b in zip(e, t):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


UNARY = ("abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 log1p log2 neg "
         "reciprocal round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc").split()


@pytest.mark.parametrize("op", UNARY)
def test_unary_matches_torch(op):
    positive = op in ("log", "log10", "log2", "rsqrt", "sqrt", "acos", "asin") or op == "lgamma"
    shapes = ((3,), (2, 4), ()) if not op.startswith("a") else ((3,),)
    e, t = _pair(shapes, positive=positive)
    if op in ("acos", "asin"):
        e, t = [x * 0.5 for x in e], [x * 0.5 for x in t]
    _same(getattr(ember, f"_foreach_{op}")(e), getattr(torch, f"_foreach_{op}")(t), 2e-6)
    got, want = getattr(ember, f"_foreach_{op}_")(e), getattr(torch, f"_foreach_{op}_")(t)
    assert got is e and want is t
    _same(tuple(e), tuple(t), 2e-6)


BINARY = ("add", "sub", "mul", "div", "clamp_min", "clamp_max", "maximum", "minimum", "pow")


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("kind", ["scalar", "list", "scalars", "tensor0d"])
def test_binary_overloads_match_torch(op, kind):
    e, t = _pair(positive=op == "pow")
    e2, t2 = _pair(seed=1, positive=op in ("pow", "div"))
    second = {"scalar": (0.75, 0.75), "list": (e2, t2), "scalars": ([2, 0.5, -1.25], [2, 0.5, -1.25]),
              "tensor0d": (ember.tensor(1.5), torch.tensor(1.5))}[kind]
    if kind == "tensor0d" and op not in ("add", "sub", "mul", "div"):
        pytest.skip("no 0-d tensor overload")
    ef, tf = getattr(ember, f"_foreach_{op}"), getattr(torch, f"_foreach_{op}")
    _same(ef(e, second[0]), tf(t, second[1]), 1e-5)
    got, want = getattr(ember, f"_foreach_{op}_")(e, second[0]), getattr(torch, f"_foreach_{op}_")(t, second[1])
    assert got is e and want is t
    _same(tuple(e), tuple(t), 1e-5)


@pytest.mark.parametrize("op", ["add", "sub"])
def test_alpha(op):
    e, t = _pair()
    e2, t2 = _pair(seed=2)
    _same(getattr(ember, f"_foreach_{op}")(e, e2, alpha=-2.5), getattr(torch, f"_foreach_{op}")(t, t2, alpha=-2.5))
    if op == "add":
        _same(ember._foreach_add(e, ember.tensor(2.0), alpha=3), torch._foreach_add(t, torch.tensor(2.0), alpha=3))


def test_integer_lists_promote_and_inplace_refuses_float():
    e = [ember.tensor([1, 2]), ember.tensor([3], dtype=ember.float64)]
    t = [torch.tensor([1, 2]), torch.tensor([3], dtype=torch.float64)]
    _same(ember._foreach_add(e, [1, 2.5]), torch._foreach_add(t, [1, 2.5]))
    _same(ember._foreach_div(e, 2), torch._foreach_div(t, 2))
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch._foreach_add_([torch.ones(1, dtype=torch.long)], 1.5)
    with pytest.raises(RuntimeError, match="can't be cast"):
        ember._foreach_add_([ember.ones(1, dtype=ember.long)], 1.5)


def test_pow_scalar_base():
    e, t = _pair()
    _same(ember._foreach_pow(2.0, e), torch._foreach_pow(2.0, t))


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_pointwise3_overloads(op):
    e, t = _pair()
    a, ta = _pair(seed=3)
    b, tb = _pair(seed=4, positive=True)
    ef, tf = getattr(ember, f"_foreach_{op}"), getattr(torch, f"_foreach_{op}")
    _same(ef(e, a, b), tf(t, ta, tb))
    _same(ef(e, a, b, 0.5), tf(t, ta, tb, 0.5))
    _same(ef(e, a, b, value=-2), tf(t, ta, tb, value=-2))
    _same(ef(e, a, b, [1.0, 2.0, 3.0]), tf(t, ta, tb, [1.0, 2.0, 3.0]))
    _same(ef(e, a, b, ember.tensor([1.0, -2.0, 0.5])), tf(t, ta, tb, torch.tensor([1.0, -2.0, 0.5])))
    assert getattr(ember, f"_foreach_{op}_")(e, a, b, 0.25) is e
    getattr(torch, f"_foreach_{op}_")(t, ta, tb, 0.25)
    _same(tuple(e), tuple(t))
    with pytest.raises(RuntimeError, match="Expected packed scalar Tensor to be of dimension 1. Got 0 instead."):
        ef(e, a, b, ember.tensor(2.0))


def test_lerp_overloads():
    e, t = _pair()
    a, ta = _pair(seed=5)
    w, tw = _pair(seed=6, positive=True)
    _same(ember._foreach_lerp(e, a, 0.3), torch._foreach_lerp(t, ta, 0.3))
    _same(ember._foreach_lerp(e, a, w), torch._foreach_lerp(t, ta, tw))
    _same(ember._foreach_lerp(e, a, [0.1, 0.5, 0.9]), torch._foreach_lerp(t, ta, [0.1, 0.5, 0.9]))
    assert ember._foreach_lerp_(e, a, 0.9) is e
    torch._foreach_lerp_(t, ta, 0.9)
    _same(tuple(e), tuple(t))


@pytest.mark.parametrize("ord", [1, 2, 3, float("inf"), float("-inf"), 0])
def test_norm_and_powsum(ord):
    e, t = _pair()
    e.append(ember.tensor([0.0, 0.5, -3.0]))
    t.append(torch.tensor([0.0, 0.5, -3.0]))
    _same(ember._foreach_norm(e, ord), torch._foreach_norm(t, ord), 1e-5)
    _same(ember._foreach_powsum(e, ord), torch._foreach_powsum(t, ord), 1e-5)
    _same(ember._foreach_norm(e, ord, dtype=ember.float64), torch._foreach_norm(t, ord, dtype=torch.float64), 1e-5)


def test_max_mm_clone_copy_zero():
    e, t = _pair()
    _same(ember._foreach_max(e), torch._foreach_max(t))
    with pytest.raises(RuntimeError, match="cannot compute the maximum of an empty tensor"):
        ember._foreach_max([ember.ones(0)])
    m, tm = _pair(((2, 3), (4, 2)), seed=7)
    n, tn = _pair(((3, 2), (2, 5)), seed=8)
    _same(ember._foreach_mm(m, n), torch._foreach_mm(tm, tn), 1e-5)
    c = ember._foreach_clone(e)
    assert all(x is not y for x, y in zip(c, e))
    _same(c, torch._foreach_clone(t))
    src, tsrc = _pair(seed=9)
    assert ember._foreach_copy_(e, src) is e
    torch._foreach_copy_(t, tsrc)
    _same(tuple(e), tuple(t))
    assert ember._foreach_zero_(e) is e and all(float(x.abs().sum()) == 0 for x in e)


def test_errors_match_torch():
    one = [ember.ones(2)]
    cases = [
        (lambda: ember._foreach_add([], 1), lambda: torch._foreach_add([], 1)),
        (lambda: ember._foreach_add(one, [ember.ones(2)] * 2), lambda: torch._foreach_add([torch.ones(2)],
                                                                                          [torch.ones(2)] * 2)),
        (lambda: ember._foreach_add(one, [1, 2]), lambda: torch._foreach_add([torch.ones(2)], [1, 2])),
        (lambda: ember._foreach_add(one, ember.ones(2)), lambda: torch._foreach_add([torch.ones(2)], torch.ones(2))),
        (lambda: ember._foreach_mul(one, [ember.ones(3)]), lambda: torch._foreach_mul([torch.ones(2)],
                                                                                      [torch.ones(3)])),
    ]
    for got, want in cases:
        e_msg, t_msg = raises_like(got, want)
        assert e_msg.split(".")[0] == t_msg.split(".")[0]
    with pytest.raises(TypeError):
        ember._foreach_add(one, "a")
    with pytest.raises(TypeError):
        ember._foreach_norm(one, "fro")


def test_gradients_flow_through_list_forms():
    e, t = _pair()
    for x in e + t:
        x.requires_grad_(True)
    e2, t2 = _pair(seed=10)
    out_e = ember._foreach_mul(ember._foreach_add(e, e2, alpha=2), 3.0)
    out_t = torch._foreach_mul(torch._foreach_add(t, t2, alpha=2), 3.0)
    sum(ember._foreach_norm(out_e)).backward()
    sum(torch._foreach_norm(out_t)).backward()
    _same(tuple(x.grad for x in e), tuple(x.grad for x in t), 1e-5)


def test_exported_at_top_level():
    names = {n for n in dir(torch) if n.startswith("_foreach_")}
    assert names <= set(dir(ember))
    from ember._src import api

    assert names <= set(api.__all__)  # `from torch import *` has none, but `from ember._src.api import *` feeds ember


@pytest.mark.parametrize("call", [
    lambda m, a: m._foreach_add_([], a), lambda m, a: m._foreach_add_(a, []), lambda m, a: m._foreach_add_([], []),
    lambda m, a: m._foreach_addcmul_(a, [], a), lambda m, a: m._foreach_addcmul_([], a, a),
    lambda m, a: m._foreach_lerp_(a, [], 0.5), lambda m, a: m._foreach_lerp_([], a, 0.5),
    lambda m, a: m._foreach_maximum([], a), lambda m, a: m._foreach_pow_([], [2.0]),
    lambda m, a: m._foreach_mm([], [m.ones(2, 2)]), lambda m, a: m._foreach_mm([m.ones(2, 2)], []),
    lambda m, a: m._foreach_copy_(a, []), lambda m, a: m._foreach_copy_([], a),
])
def test_empty_and_unequal_lists_report_what_torch_reports(call):
    # PyTorch compares the lengths of the lists before it refuses an empty one (its messages differ)
    with pytest.raises(RuntimeError) as want:
        call(torch, [torch.ones(2)])
    with pytest.raises(RuntimeError) as got:
        call(ember, [ember.ones(2)])
    assert str(got.value) == str(want.value)

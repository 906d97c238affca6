"""In-place variants vs PyTorch: values, dtypes, identity (``y is x``), version counters, errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import ember

from conftest import assert_same, make_pair, raises_like

LAYOUTS = ["contiguous", "transposed", "sliced"]


def _run(fn, e, t):
    """Runs ``fn(module, x)`` on both; the result must be x itself, with one version bump as in torch."""
    ev, tv = e._version, t._version
    er, tr = fn(ember, e), fn(torch, t)
    assert er is e and tr is t
    assert e._version - ev == t._version - tv
    assert_same(er, tr)
    return er, tr


def _raises_like(fn, e, t):
    return raises_like(lambda: fn(ember, e), lambda: fn(torch, t))


# -- aliases of existing in-place methods -------------------------------------------------------------

UNARY_ALIASES = ["absolute_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "fix_",
                 "negative_", "deg2rad_", "rad2deg_", "sgn_"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", UNARY_ALIASES)
def test_unary_inplace_methods(name, layout):
    low = 1.0 if name == "arccosh_" else -0.9
    high = 3.0 if name == "arccosh_" else 0.9
    e, t = make_pair((3, 4), "float32", low=low, high=high, layout=layout)
    _run(lambda m, x: getattr(x, name)(), e, t)


@pytest.mark.parametrize("shape", [(), (0,), (2, 0)])
@pytest.mark.parametrize("name", ["arcsin_", "negative_", "deg2rad_", "fix_", "sgn_"])
def test_unary_inplace_0d_and_empty(name, shape):
    e, t = make_pair(shape, "float64", low=-0.9, high=0.9)
    _run(lambda m, x: getattr(x, name)(), e, t)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("name", ["arccos_", "arcsinh_", "deg2rad_", "rad2deg_"])
def test_float_result_cannot_be_cast_to_integer_self(name, dtype):
    e, t = make_pair((4,), dtype)
    msg, _ = _raises_like(lambda m, x: getattr(x, name)(), e, t)
    if dtype != "bool":
        assert "can't be cast to the desired output type" in msg


@pytest.mark.parametrize("dtype", ["int64", "float32", "bfloat16"])
@pytest.mark.parametrize("name", ["greater_", "greater_equal_", "less_", "less_equal_", "not_equal_"])
def test_comparison_aliases(name, dtype):
    e, t = make_pair((3, 4), dtype, layout="transposed")
    _run(lambda m, x: getattr(x, name)(1), e, t)
    o_e, o_t = make_pair((4,), dtype, seed=1)
    _run(lambda m, x: getattr(x, name)(o_e if m is ember else o_t), e, t)


def test_arctan2_and_nextafter():
    e, t = make_pair((3, 4), "float32", layout="sliced")
    o_e, o_t = make_pair((3, 4), "float32", seed=2)
    _run(lambda m, x: x.arctan2_(o_e if m is ember else o_t), e, t)
    _run(lambda m, x: x.nextafter_(o_e if m is ember else o_t), e, t)
    i_e, i_t = make_pair((3,), "int64")
    _raises_like(lambda m, x: x.arctan2_(x), i_e, i_t)
    _raises_like(lambda m, x: x.nextafter_(x), i_e, i_t)


# -- clamp ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8"])
@pytest.mark.parametrize("call", [lambda m, x: x.clamp_min_(1), lambda m, x: x.clamp_max_(2),
                                  lambda m, x: x.clamp_(0, 2), lambda m, x: x.clip_(max=1),
                                  lambda m, x: m.clamp_min_(x, 1), lambda m, x: m.clip_(x, 0, 3)])
def test_clamp_variants(call, dtype):
    e, t = make_pair((3, 4), dtype, layout="transposed")
    _run(call, e, t)


def test_clamp_variant_errors():
    e, t = make_pair((3,), "int64")
    msg, _ = _raises_like(lambda m, x: x.clamp_min_(0.5), e, t)
    assert "can't be cast" in msg
    _raises_like(lambda m, x: x.clamp_(), e, t)
    f_e, f_t = make_pair((3,), "float32")
    _run(lambda m, x: x.clamp_min_(m.tensor(0.5, dtype=m.float64)), f_e, f_t)


# -- scans, sgn, conj_physical, float_power -------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "bfloat16"])
@pytest.mark.parametrize("name, dim", [("cumsum_", 0), ("cumsum_", -1), ("cumprod_", 1)])
def test_scans_inplace(name, dim, dtype, layout):
    e, t = make_pair((3, 4), dtype, low=-2, high=2, layout=layout)
    _run(lambda m, x: getattr(x, name)(dim), e, t)


def test_scans_inplace_edge_cases():
    for shape in [(), (0,), (2, 0)]:
        e, t = make_pair(shape, "float64")
        _run(lambda m, x: x.cumsum_(0), e, t)
    e, t = make_pair((3,), "float32")
    _run(lambda m, x: x.cumsum_(0, dtype=m.float32), e, t)
    msg, tmsg = _raises_like(lambda m, x: x.cumsum_(0, dtype=m.float64), e, t)
    assert msg == tmsg
    _raises_like(lambda m, x: x.cumprod_(1), e, t)
    b_e, b_t = make_pair((3,), "bool")
    _raises_like(lambda m, x: x.cumsum_(0), b_e, b_t)


@pytest.mark.parametrize("dtype", ["float32", "int64", "int8", "complex"])
def test_sgn_and_conj_physical(dtype):
    if dtype == "complex":
        arr = np.array([1 + 2j, -3j, 0, 2 - 1j])
        e, t = ember.tensor(arr), torch.tensor(arr)
    else:
        e, t = make_pair((4,), dtype)
    _run(lambda m, x: x.sgn_(), e, t)
    _run(lambda m, x: x.conj_physical_(), e, t)
    _run(lambda m, x: m.conj_physical_(x), e, t)


def test_float_power_():
    e, t = make_pair((2, 3), "float64", low=0.5, high=2, layout="transposed")
    _run(lambda m, x: x.float_power_(2), e, t)
    _run(lambda m, x: x.float_power_(m.tensor([1, 2, 0])), e, t)
    for dtype in ("float32", "int64"):
        f_e, f_t = make_pair((3,), dtype)
        msg, tmsg = _raises_like(lambda m, x: x.float_power_(2), f_e, f_t)
        assert msg == tmsg


# -- tril/triu, addr, renorm -----------------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "int16", "bool"])
@pytest.mark.parametrize("name, diagonal", [("tril_", 0), ("tril_", -1), ("triu_", 1), ("triu_", -5)])
def test_tril_triu_inplace(name, diagonal, dtype, layout):
    e, t = make_pair((2, 3, 4), dtype, layout=layout)
    _run(lambda m, x: getattr(x, name)(diagonal), e, t)


def test_tril_triu_inplace_errors_and_empty():
    e, t = make_pair((3,), "float32")
    _raises_like(lambda m, x: x.tril_(), e, t)
    z_e, z_t = make_pair((0, 3), "float32")
    _run(lambda m, x: x.triu_(), z_e, z_t)


@pytest.mark.parametrize("dtype, beta, alpha", [("float32", 1, 1), ("float64", 2, 0.5), ("int64", 0, 3)])
def test_addr_(dtype, beta, alpha):
    e, t = make_pair((3, 4), dtype, layout="transposed")
    v1e, v1t = make_pair((3,), dtype, seed=1)
    v2e, v2t = make_pair((4,), dtype, seed=2)
    _run(lambda m, x: x.addr_(v1e if m is ember else v1t, v2e if m is ember else v2t, beta=beta, alpha=alpha),
         e, t)


def test_addr_errors():
    e, t = make_pair((3,), "float32")
    _raises_like(lambda m, x: x.addr_(m.ones(3), m.ones(1)), e, t)
    e, t = make_pair((3, 4), "int64")
    _raises_like(lambda m, x: x.addr_(m.ones(3), m.ones(4)), e, t)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("p, dim, maxnorm",
                         [(2, 0, 3.0), (1, 1, 2.0), (3.5, -1, 0.5), (math.inf, 0, 1.0), (2, 1, 100.0)])
def test_renorm(p, dim, maxnorm, layout):
    e, t = make_pair((3, 4), "float32", layout=layout)
    assert_same(e.renorm(p, dim, maxnorm), t.renorm(p, dim, maxnorm))
    assert_same(ember.renorm(e, p, dim, maxnorm), torch.renorm(t, p, dim, maxnorm))
    _run(lambda m, x: x.renorm_(p, dim, maxnorm), e, t)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_renorm_dtypes(dtype):
    e, t = make_pair((2, 3, 2), dtype)
    assert_same(e.renorm(2, 1, 1.0), t.renorm(2, 1, 1.0))


@pytest.mark.parametrize("args", [(2, 0, 1.0), (-1, 0, 1.0), (0, 0, 1.0), (2, 2, 1.0), (2, 0, -1.0)])
@pytest.mark.parametrize("shape, dtype", [((2, 3), "float32"), ((3,), "float32"), ((2, 3), "int64")])
def test_renorm_errors(args, shape, dtype):
    e, t = make_pair(shape, dtype)
    if shape == (2, 3) and dtype == "float32" and args == (2, 0, 1.0):
        return  # the valid call
    _raises_like(lambda m, x: x.renorm(*args), e, t)
    _raises_like(lambda m, x: x.renorm_(*args), e, t)


# -- put, index_reduce, fill_diagonal ----------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("index, accumulate", [([0, -1, 5], False), ([1, 1, 7], True), ([], False), ([3], True)])
def test_put_(index, accumulate, dtype, layout):
    e, t = make_pair((3, 4), dtype, layout=layout)
    s_e, s_t = make_pair((len(index),), dtype, seed=3)
    ie, it = ember.tensor(index, dtype=ember.int64), torch.tensor(index, dtype=torch.int64)
    if not accumulate and len(set(index)) == len(index):  # duplicates without accumulate: any one write wins
        assert_same(e.put(ie, s_e), t.put(it, s_t))
        assert_same(ember.put(e, ie, s_e), torch.put(t, it, s_t))
    _run(lambda m, x: x.put_(ie if m is ember else it, s_e if m is ember else s_t, accumulate), e, t)


def test_put_0d_and_errors():
    e, t = ember.tensor(2.0), torch.tensor(2.0)
    _run(lambda m, x: x.put_(m.tensor([-1]), m.tensor([5.0])), e, t)
    _run(lambda m, x: x.put_(m.tensor(0), m.tensor(7.0)), e, t)
    e, t = make_pair((2, 3), "float32")
    for call in (lambda m, x: x.put_(m.tensor([6]), m.tensor([1.0])),
                 lambda m, x: x.put_(m.tensor([-7]), m.tensor([1.0])),
                 lambda m, x: x.put_(m.tensor([0.0]), m.tensor([1.0])),
                 lambda m, x: x.put_(m.tensor([0], dtype=m.int32), m.tensor([1.0])),
                 lambda m, x: x.put_(m.tensor([0]), m.tensor([1.0], dtype=m.float64)),
                 lambda m, x: x.put_(m.tensor([0, 1]), m.tensor([1.0]))):
        _raises_like(call, e, t)


@pytest.fixture
def _no_beta_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: index_reduce() is in beta
        yield


@pytest.mark.usefixtures("_no_beta_warning")
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype, dim", [("float32", 0), ("float64", 1), ("int64", -1), ("float16", 0)])
def test_index_reduce(reduce, include_self, dtype, dim):
    e, t = make_pair((3, 4), dtype, low=-3, high=3, layout="transposed")
    n = 5
    index = np.array([0, 2, 0, 1, 2])[:n] % e.shape[dim]
    src_shape = (n, 4) if dim == 0 else (3, n)
    s_e, s_t = make_pair(src_shape, dtype, low=-3, high=3, seed=4)
    ie, it = ember.tensor(index), torch.tensor(index)
    kw = {"include_self": include_self}
    assert_same(e.index_reduce(dim, ie, s_e, reduce, **kw), t.index_reduce(dim, it, s_t, reduce, **kw))
    assert_same(ember.index_reduce(e, dim, ie, s_e, reduce, **kw), torch.index_reduce(t, dim, it, s_t, reduce, **kw))
    _run(lambda m, x: x.index_reduce_(dim, ie if m is ember else it, s_e if m is ember else s_t, reduce, **kw), e, t)


@pytest.mark.usefixtures("_no_beta_warning")
def test_index_reduce_0d_and_errors():
    e, t = ember.tensor(2.0), torch.tensor(2.0)
    _run(lambda m, x: x.index_reduce_(0, m.tensor([0]), m.tensor(3.0), "prod"), e, t)
    e, t = make_pair((2, 2), "float32")
    for call in (lambda m, x: x.index_reduce_(0, m.tensor([0]), m.ones(1, 2), "sum"),
                 lambda m, x: x.index_reduce_(0, m.tensor([[0]]), m.ones(1, 2), "prod"),
                 lambda m, x: x.index_reduce_(0, m.tensor([0]), m.ones(1, 2, dtype=m.float64), "prod"),
                 lambda m, x: x.index_reduce_(0, m.tensor([5]), m.ones(1, 2), "prod"),
                 lambda m, x: x.index_reduce_(0, m.tensor([0, 1]), m.ones(1, 2), "prod"),
                 lambda m, x: x.index_reduce_(2, m.tensor([0]), m.ones(1, 2), "prod")):
        _raises_like(call, e, t)


@pytest.mark.parametrize("wrap", [False, True])
@pytest.mark.parametrize("shape, layout", [((3, 3), "contiguous"), ((2, 5), "contiguous"), ((7, 3), "contiguous"),
                                           ((7, 3), "transposed"), ((6, 4), "sliced"), ((3, 3, 3), "contiguous"),
                                           ((0, 3), "contiguous")])
def test_fill_diagonal_(shape, layout, wrap):
    e, t = make_pair(shape, "float32", layout=layout)
    _run(lambda m, x: x.fill_diagonal_(9.0, wrap=wrap), e, t)
    i_e, i_t = make_pair(shape, "int64", layout=layout)
    _run(lambda m, x: x.fill_diagonal_(1.5, wrap), i_e, i_t)


def test_fill_diagonal_errors():
    for shape in [(3,), (2, 3, 3)]:
        e, t = make_pair(shape, "float32")
        msg, tmsg = _raises_like(lambda m, x: x.fill_diagonal_(1), e, t)
        assert msg == tmsg


# -- view ops in place ------------------------------------------------------------------------------------

VIEW_CALLS = [
    ("t_", lambda m, x: x.t_()),
    ("transpose_", lambda m, x: x.transpose_(0, -1)),
    ("swapdims_", lambda m, x: x.swapdims_(1, 0)),
    ("swapaxes_", lambda m, x: x.swapaxes_(0, 1)),
    ("squeeze_", lambda m, x: x.unsqueeze_(0).squeeze_()),
    ("squeeze_dims", lambda m, x: x.unsqueeze_(2).squeeze_((0, 2))),
    ("unsqueeze_", lambda m, x: x.unsqueeze_(-1)),
    ("as_strided_", lambda m, x: x.as_strided_((2, 2), (1, 2), 1)),
    ("as_strided_top", lambda m, x: m.as_strided_(x, (3,), (2,))),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name, call", VIEW_CALLS, ids=[c[0] for c in VIEW_CALLS])
def test_view_ops_inplace(name, call, layout):
    e, t = make_pair((2, 4), "float32", layout=layout)
    storage = e._storage
    ev, tv = e._version, t._version
    assert call(ember, e) is e and call(torch, t) is t
    assert e._version - ev == t._version - tv
    assert (e.shape, e.stride(), e.storage_offset()) == (tuple(t.shape), t.stride(), t.storage_offset())
    assert e._storage is storage
    assert_same(e, t)


def test_view_ops_inplace_0d_and_errors():
    e, t = ember.tensor(1.5), torch.tensor(1.5)
    _run(lambda m, x: x.t_(), e, t)
    _run(lambda m, x: x.unsqueeze_(0), e, t)
    assert e.shape == (1,)
    e, t = make_pair((2, 3, 4), "float32")
    for call in (lambda m, x: x.t_(), lambda m, x: x.transpose_(0, 3), lambda m, x: x.unsqueeze_(5),
                 lambda m, x: x.squeeze_(4), lambda m, x: x.as_strided_((30,), (1,))):
        v = e._version
        _raises_like(call, e, t)
        assert e.shape == (2, 3, 4) and e._version == v  # nothing changed


# -- resize --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("new_shape", [(2, 3), (5,), (0,), (3, 4), (4, 1)])
def test_resize_keeps_or_shrinks(new_shape, layout):
    e, t = make_pair((3, 4), "float32", layout=layout)
    ev, tv = e._version, t._version
    assert e.resize_(*new_shape) is e and t.resize_(*new_shape) is t
    assert e._version - ev == t._version - tv
    assert (e.shape, e.stride(), e.storage_offset()) == (tuple(t.shape), t.stride(), t.storage_offset())
    assert_same(e, t)


@pytest.mark.parametrize("layout", ["contiguous", "sliced", "expanded"])
def test_resize_grows_storage(layout):
    arr = np.arange(12.0).reshape(3, 4)
    e, t = ember.tensor(arr), torch.tensor(arr)  # torch.tensor: a resizable storage (from_numpy's is not)
    if layout == "sliced":
        e, t = e[1:, ::2], t[1:, ::2]
    elif layout == "expanded":
        e, t = e[0].expand(3, 4), t[0].expand(3, 4)
    old = e.clone()
    e.resize_((5, 6))
    t.resize_((5, 6))
    assert (e.shape, e.stride(), e.storage_offset()) == (tuple(t.shape), t.stride(), t.storage_offset())
    # The bytes that were there stay (new elements are uninitialized in torch: zero here).
    n = old.numel() if layout == "contiguous" else 4
    assert_same(e.reshape(-1)[:n], t.reshape(-1)[:n])
    assert e.untyped_storage().nbytes() >= 30 * 8


def test_resize_as_and_errors():
    e, t = make_pair((3, 4), "int32")
    _run(lambda m, x: x.resize_as_(m.ones(2, 5)), e, t)
    _run(lambda m, x: m.resize_as_(x, m.ones(2)), e, t)
    for m in (ember, torch):
        x = m.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
            x.resize_(3)
        with pytest.raises(RuntimeError):
            m.ones(3).resize_(-1)


def test_meta_inplace_variants():
    x = ember.empty((3, 4), device="meta")
    assert x.t_().shape == (4, 3)
    assert x.cumsum_(0).shape == (4, 3)
    assert x.resize_(5, 6).shape == (5, 6)
    assert x.clamp_min_(0).device.type == "meta"
    with pytest.raises(RuntimeError):
        ember.empty((3,), dtype=ember.int64, device="meta").deg2rad_()


# -- top-level functions ----------------------------------------------------------------------------------

TOP_LEVEL_UNARY = ["abs_", "acos_", "asin_", "atan_", "atanh_", "ceil_", "cos_", "cosh_", "erf_", "erfc_", "exp_",
                   "exp2_", "expm1_", "fix_", "floor_", "frac_", "log_", "log10_", "log1p_", "log2_", "logit_",
                   "neg_", "negative_", "reciprocal_", "round_", "rsqrt_", "sin_", "sinh_", "sqrt_", "square_",
                   "tan_", "tanh_", "trunc_", "zero_", "deg2rad_", "rad2deg_", "arccos_", "arcsinh_",
                   "conj_physical_", "selu_", "celu_", "rrelu_", "detach_"]


@pytest.mark.parametrize("name", TOP_LEVEL_UNARY)
def test_top_level_inplace_functions(name):
    # detach_ refuses views in PyTorch (ember's accepts them: gradients can be views here).
    e, t = make_pair((3, 4), "float32", low=0.1, high=0.9, layout="contiguous" if name == "detach_" else "transposed")
    _run(lambda m, x: getattr(m, name)(x), e, t)


@pytest.mark.parametrize("call", [
    lambda m, x: m.acosh_(x.add_(1)), lambda m, x: m.asinh_(x), lambda m, x: m.clamp_(x, 0.2, 0.5),
    lambda m, x: m.clamp_max_(x, 0.5), lambda m, x: m.xlogy_(x, 3.0), lambda m, x: m.fill_(x, 2),
    lambda m, x: m.threshold_(x, 0.5, -1.0), lambda m, x: m.celu_(x, 2.0), lambda m, x: m.rrelu_(x, 0.1, 0.3),
    lambda m, x: m.dropout_(x, 0.5, False), lambda m, x: m.alpha_dropout_(x, 0.3, False),
    lambda m, x: m.feature_dropout_(x, 0.5, False), lambda m, x: m.feature_alpha_dropout_(x, 0.5, False),
    lambda m, x: m.dropout_(x, 0.0, True), lambda m, x: m.alpha_dropout_(x, 1.0, True),
    lambda m, x: m.feature_alpha_dropout_(x, 1.0, True), lambda m, x: m.dropout_(x, 1.0, True),
])
def test_top_level_inplace_with_arguments(call):
    e, t = make_pair((3, 4), "float32", low=0.1, high=0.9)
    _run(call, e, t)


def test_top_level_out_of_place_forms():
    e, t = make_pair((3, 4), "float32")
    assert_same(ember.fill(e, 1.5), torch.fill(t, 1.5))
    d = ember.detach(e)
    assert d is not e and d._storage is e._storage and not d.requires_grad
    assert_same(ember.rrelu(e), torch.rrelu(t))
    out = ember.feature_alpha_dropout(e, 0.5, False)
    assert out is e


@pytest.mark.parametrize("inplace", [False, True])
def test_feature_alpha_dropout_training(inplace):
    ember.manual_seed(0)
    x = ember.ones(4, 6, 3)
    fn = ember.feature_alpha_dropout_ if inplace else ember.feature_alpha_dropout
    y = fn(x, 0.5, True)
    assert (y is x) == inplace
    # Whole (N, C) planes share one fate: each plane holds a single value (kept or dropped).
    planes = y.reshape(24, 3)
    assert bool((planes == planes[:, :1]).all())
    assert len(set(planes[:, 0].tolist())) == 2
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        fn(ember.ones(3), 0.5, True)


def test_rrelu_training_slopes():
    ember.manual_seed(0)
    x = ember.tensor([-1.0, -2.0, 3.0] * 20)
    y = ember.rrelu(x, 0.1, 0.3, training=True)
    slopes = (y / x)[x < 0]
    assert bool((slopes >= 0.1).all()) and bool((slopes <= 0.3).all())
    assert bool((y[x > 0] == x[x > 0]).all())
    assert ember.rrelu_(x, 0.1, 0.3, training=True) is x


def test_embedding_renorm_():
    e, t = make_pair((4, 3), "float32")
    idx = [0, 2, 2]
    _run(lambda m, x: m.embedding_renorm_(x, m.tensor(idx), 1.0, 2.0), e, t)
    w = ember.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        ember.embedding_renorm_(w, ember.tensor([0]), 1.0, 2.0)


def test_generated_inplace_forms_follow_the_out_of_place_op():
    from ember._src.bindings import generated_inplace

    for name in ("gcd", "lcm", "i0", "ldexp", "sinc", "heaviside", "igamma", "igammac"):
        assert hasattr(ember.Tensor, name + "_")
    hypot_ = generated_inplace("hypot", ember.Tensor.hypot)  # the generic form (an op's record: ``inplace``)
    e, t = make_pair((3, 4), "float32", layout="transposed")
    o_e, o_t = make_pair((4,), "float32", seed=5)
    _run(lambda m, x: hypot_(x, o_e) if m is ember else x.hypot_(o_t), e, t)
    i_e, i_t = make_pair((3,), "int64")
    with pytest.raises(RuntimeError, match="can't be cast"):
        generated_inplace("true_divide", ember.Tensor.true_divide)(i_e, 2)

"""Reductions, scans and softmax against torch: dtypes, dims, keepdim, layouts, errors."""

import math
import warnings

import numpy as np
import pytest

import ember

from conftest import FLOAT_NAMES, INT_NAMES, assert_same, from_torch, make_pair, torch

ALL_NAMES = ["bool"] + INT_NAMES + FLOAT_NAMES
DIMS = [None, 0, -1, (0, 2), (-1, 0, 1), ()]
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


def _pair(shape, name, layout="contiguous", **kw):
    """make_pair, with "sliced" built from as_strided (basic indexing lives in another family)."""
    if layout != "sliced":
        return make_pair(shape, name, layout=layout, **kw)
    e, t = make_pair((shape[0] * 2,) + tuple(shape[1:]), name, **kw)
    stride = (2 * e.stride()[0],) + tuple(e.stride()[1:])
    return e.as_strided(shape, stride), t[::2]


def _kw(dim, keepdim):
    return {} if dim is None else {"dim": dim, "keepdim": keepdim}


def _tol(name):
    return {"rtol": 1e-2, "atol": 1e-2} if name in ("float16", "bfloat16") else {}


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_nansum_prod_dtypes_and_dims(name, dim, keepdim):
    e, t = make_pair((3, 4, 5), name, low=-2, high=3)
    assert_same(ember.sum(e, **_kw(dim, keepdim)), torch.sum(t, **_kw(dim, keepdim)), **_tol(name))
    assert_same(e.nansum(**_kw(dim, keepdim)), t.nansum(**_kw(dim, keepdim)), **_tol(name))
    if dim is None or isinstance(dim, int):
        assert_same(e.prod(**_kw(dim, keepdim)), t.prod(**_kw(dim, keepdim)), **_tol(name))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [None, 0, 1, 2, (0, 1), (1, 2)])
def test_sum_max_layouts(layout, dim):
    e, t = _pair((4, 6, 5), "float32", layout=layout)
    assert_same(e.sum(dim) if dim is not None else e.sum(), t.sum(dim) if dim is not None else t.sum())
    kw = {} if dim is None else {"dim": dim}
    assert_same(e.amax(**kw), t.amax(**kw))
    assert_same(e.amin(**kw), t.amin(**kw))
    assert_same(e.any(**kw), t.any(**kw))


@pytest.mark.parametrize("shape,dim", [((2000, 3), 0), ((5, 3000), 1), ((3, 700, 9), 1), ((100001,), 0)])
def test_float32_sum_accuracy_large(shape, dim):
    e, t = make_pair(shape, "float32", low=-1, high=3)
    assert_same(e.sum(dim), t.sum(dim), rtol=1e-5, atol=1e-3)
    assert_same(e.mean(dim), t.mean(dim), rtol=1e-5, atol=1e-5)
    assert_same(e.amax(dim), t.amax(dim))
    assert_same(e.argmin(dim), t.argmin(dim))


@pytest.mark.parametrize("name", ALL_NAMES)
def test_sum_dtype_argument(name):
    e, t = make_pair((3, 4), name)
    for d_e, d_t in [(ember.float64, torch.float64), (ember.int32, torch.int32), (ember.float16, torch.float16)]:
        assert_same(e.sum(1, dtype=d_e), t.sum(1, dtype=d_t), **_tol("float16"))
        assert_same(e.cumsum(0, dtype=d_e), t.cumsum(0, dtype=d_t), **_tol("float16"))


@pytest.mark.parametrize("name", FLOAT_NAMES)
@pytest.mark.parametrize("dim", [None, 1, (0, 2), -3])
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean_var_std_floats(name, dim, keepdim):
    e, t = make_pair((4, 3, 5), name)
    kw = _kw(dim, keepdim)
    assert_same(e.mean(**kw), t.mean(**kw), **_tol(name))
    assert_same(e.nanmean(**kw), t.nanmean(**kw), **_tol(name))
    assert_same(ember.var(e, **kw), torch.var(t, **kw), **_tol(name))
    assert_same(e.std(**kw, correction=0), t.std(**kw, correction=0), **_tol(name))
    assert_same(ember.var_mean(e, **kw), torch.var_mean(t, **kw), **_tol(name))
    assert_same(ember.std_mean(e, **kw, correction=2), torch.std_mean(t, **kw, correction=2), **_tol(name))


def test_var_unbiased_positional_forms():
    e, t = make_pair((4, 6), "float64")
    assert_same(e.var(False), t.var(False))
    assert_same(e.std(1, True, True), t.std(1, True, True))
    assert_same(ember.var_mean(e, 1, False), torch.var_mean(t, 1, False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(ember.ones(1).var(), torch.ones(1).var())
        assert_same(e.var(0, correction=4), t.var(0, correction=4))


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_arg(name, dim, keepdim):
    e, t = make_pair((4, 7), name, low=-3, high=3)
    if dim is None:
        assert_same(e.max(), t.max())
        assert_same(ember.min(e), torch.min(t))
        assert_same(e.amax(), t.amax())
    else:
        r, rt = e.max(dim, keepdim), t.max(dim, keepdim)
        assert_same(r.values, rt.values)
        assert_same(r.indices, rt.indices)
        r, rt = ember.min(e, dim=dim, keepdim=keepdim), torch.min(t, dim=dim, keepdim=keepdim)
        assert_same(tuple(r), tuple(rt))
        assert_same(tuple(ember.aminmax(e, dim=dim, keepdim=keepdim)),
                    tuple(torch.aminmax(t, dim=dim, keepdim=keepdim)))
    if name != "bool":
        assert_same(e.argmax(dim, keepdim), t.argmax(dim, keepdim))
        assert_same(ember.argmin(e, dim, keepdim), torch.argmin(t, dim, keepdim))


def test_max_binary_form_and_transposed_argmax():
    a, ta = make_pair((3, 4), "int32")
    b, tb = make_pair((3, 4), "int32", seed=1)
    assert_same(ember.max(a, b), torch.max(ta, tb))
    assert_same(ember.min(a, b), torch.min(ta, tb))
    e, t = make_pair((5, 6), "float32", layout="transposed")
    assert_same(e.argmax(), t.argmax())
    assert_same(e.argmax(0), t.argmax(0))
    assert_same(e.max(1).indices, t.max(1).indices)


@pytest.mark.parametrize("name", ["float32", "float64", "float16"])
def test_nan_propagation(name):
    vals = [[1.0, float("nan"), 3.0, 2.0] * 10, [0.0, 5.0, -1.0, float("nan")] * 10, [1.0] * 40]
    t = torch.tensor(vals, dtype=getattr(torch, name))
    e = from_torch(t)
    for fn in ("amax", "amin", "argmax", "argmin", "sum", "nansum", "nanmean"):
        assert_same(getattr(e, fn)(1), getattr(t, fn)(1))
    assert_same(tuple(e.max(1)), tuple(t.max(1)))
    assert_same(e.max(), t.max())
    assert_same(e.argmin(), t.argmin())
    assert_same(e.softmax(1), t.softmax(1))
    assert_same(e.logsumexp(1), t.logsumexp(1))


@pytest.mark.parametrize("p", [2, 1, math.inf, -math.inf, 0, 3, 0.5, "fro"])
@pytest.mark.parametrize("dim", [None, 1, (0, 1)])
@pytest.mark.parametrize("name", ["float32", "float64", "bfloat16"])
def test_norm(p, dim, name):
    e, t = make_pair((3, 4), name)
    assert_same(e.norm(p, dim), t.norm(p, dim), **_tol(name))
    assert_same(ember.norm(e, p, dim, keepdim=True), torch.norm(t, p, dim, keepdim=True), **_tol(name))


def test_norm_dtype_argument():
    e, t = make_pair((3, 4), "float32")
    assert_same(ember.norm(e, 2, dtype=ember.float64), torch.norm(t, 2, dtype=torch.float64))


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "int64", "bool"])
@pytest.mark.parametrize("dim", [0, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp(name, dim, keepdim):
    e, t = make_pair((3, 5), name, low=-30, high=30)
    assert_same(e.logsumexp(dim, keepdim), t.logsumexp(dim, keepdim), **_tol(name))


def test_logsumexp_infinities():
    t = torch.tensor([[-math.inf, -math.inf], [math.inf, 1.0], [1.0, 2.0]])
    assert_same(from_torch(t).logsumexp(1), t.logsumexp(1))


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("dim", [None, 0, (0, 1), -1])
def test_any_all_count_nonzero(name, dim):
    e, t = make_pair((4, 5), name, low=0, high=2)
    kw = {} if dim is None else {"dim": dim}
    assert_same(e.any(**kw), t.any(**kw))
    assert_same(ember.all(e, **kw), torch.all(t, **kw))
    assert_same(e.count_nonzero(**kw), t.count_nonzero(**kw))
    if dim is not None:
        assert_same(e.all(dim, True), t.all(dim, True))


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_cumsum_cumprod(name, dim, layout):
    e, t = make_pair((4, 5), name, low=-2, high=3, layout=layout)
    assert_same(e.cumsum(dim), t.cumsum(dim), **_tol(name))
    assert_same(ember.cumprod(e, dim), torch.cumprod(t, dim), **_tol(name))


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("dim", [0, -1])
def test_cummax_cummin(name, dim):
    e, t = make_pair((5, 6), name, low=-2, high=2, layout="transposed")
    assert_same(tuple(e.cummax(dim)), tuple(t.cummax(dim)))
    assert_same(tuple(ember.cummin(e, dim)), tuple(torch.cummin(t, dim)))


def test_cummax_nan_and_ties():
    t = torch.tensor([1.0, 3, 3, 2, float("nan"), 5, float("nan"), 1])
    e = from_torch(t)
    assert_same(tuple(e.cummax(0)), tuple(t.cummax(0)))
    assert_same(tuple(e.cummin(0)), tuple(t.cummin(0)))
    assert_same(tuple(ember.tensor(2.0).cummax(0)), tuple(torch.tensor(2.0).cummax(0)))
    with pytest.raises(IndexError):
        e.cummax(1)


@pytest.mark.parametrize("name", FLOAT_NAMES)
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_softmax_log_softmax(name, dim, layout):
    e, t = make_pair((3, 70, 5), name, low=-20, high=20, layout=layout)
    assert_same(e.softmax(dim), t.softmax(dim), **_tol(name))
    assert_same(ember.log_softmax(e, dim), torch.log_softmax(t, dim), **_tol(name))


def test_softmax_dtype_argument_and_large_rows():
    e, t = make_pair((4, 3), "int64")
    assert_same(ember.softmax(e, 1, dtype=ember.float32), torch.softmax(t, 1, dtype=torch.float32))
    e, t = make_pair((6, 1027), "float32", low=-50, high=50)
    assert_same(e.softmax(-1), t.softmax(-1), rtol=1e-5, atol=1e-7)
    assert_same(e.log_softmax(-1), t.log_softmax(-1), rtol=1e-5, atol=1e-5)
    assert_same(e.log_softmax(0), t.log_softmax(0), rtol=1e-5, atol=1e-5)


def test_zero_dim_tensors():
    e, t = ember.tensor(3.5), torch.tensor(3.5)
    for fn in ("sum", "mean", "prod", "amax", "max", "argmax", "any", "all", "nansum"):
        assert_same(getattr(e, fn)(), getattr(t, fn)())
    assert_same(e.sum(0), t.sum(0))
    assert_same(e.sum(-1, keepdim=True), t.sum(-1, keepdim=True))
    assert_same(tuple(e.max(0)), tuple(t.max(0)))
    assert_same(e.argmax(0), t.argmax(0))
    assert_same(e.cumsum(0), t.cumsum(0))
    assert_same(e.softmax(0), t.softmax(0))
    assert_same(e.logsumexp(0), t.logsumexp(0))
    assert_same(e.norm(), t.norm())


def test_empty_tensors():
    e, t = ember.zeros(0, 3), torch.zeros(0, 3)
    for fn in ("sum", "prod", "mean", "nansum", "any", "all", "count_nonzero", "norm"):
        assert_same(getattr(e, fn)(), getattr(t, fn)())
        assert_same(getattr(e, fn)(0), getattr(t, fn)(0))
    assert_same(e.amax(1), t.amax(1))
    assert_same(tuple(e.max(1)), tuple(t.max(1)))
    assert_same(e.argmax(1), t.argmax(1))
    assert_same(e.cumsum(0), t.cumsum(0))
    assert_same(e.softmax(0), t.softmax(0))
    assert_same(e.logsumexp(0), t.logsumexp(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(e.var(0), t.var(0))


@pytest.mark.parametrize("call", [
    lambda m, x: m.max(x), lambda m, x: x.amax(), lambda m, x: m.argmax(x), lambda m, x: m.aminmax(x),
    lambda m, x: x.max(0), lambda m, x: x.amin(0), lambda m, x: x.argmin(0), lambda m, x: x.norm(math.inf),
])
def test_empty_reductions_without_identity_raise_like_torch(call):
    with pytest.raises((IndexError, RuntimeError)) as t_err:
        call(torch, torch.zeros(0, 2))
    with pytest.raises(t_err.type):
        call(ember, ember.zeros(0, 2))


@pytest.mark.parametrize("call,exc", [
    (lambda m, x: x.sum(3), IndexError),
    (lambda m, x: x.sum((0, 0)), RuntimeError),
    (lambda m, x: x.sum("a"), TypeError),
    (lambda m, x: x.int().mean(), RuntimeError),
    (lambda m, x: x.int().nanmean(), RuntimeError),
    (lambda m, x: x.int().var(), RuntimeError),
    (lambda m, x: x.int().norm(), RuntimeError),
    (lambda m, x: x.int().softmax(0), NotImplementedError),
    (lambda m, x: x.bool().argmax(), RuntimeError),
    (lambda m, x: x.mean(dtype=m.int64), RuntimeError),
    (lambda m, x: x.argmax(-3), IndexError),
    (lambda m, x: x.cumsum(2), IndexError),
    (lambda m, x: x.softmax(5), IndexError),
    (lambda m, x: x.max(2), IndexError),
    (lambda m, x: m.logsumexp(x, 9), IndexError),
    (lambda m, x: m.sum([1, 2], x), TypeError),
])
def test_errors_match_torch(call, exc):
    with pytest.raises(exc):
        call(torch, torch.ones(2, 3))
    with pytest.raises(exc):
        call(ember, ember.ones(2, 3))


def test_uint8_any_all_keep_dtype_and_out():
    e, t = make_pair((3, 4), "uint8", low=0, high=2)
    assert_same(e.any(1), t.any(1))
    out_e, out_t = ember.zeros(4), torch.zeros(4)
    ember.sum(e.float(), 0, out=out_e)
    torch.sum(t.float(), 0, out=out_t)
    assert_same(out_e, out_t)


def test_meta_kernels_give_shapes_and_dtypes():
    x = ember.zeros(3, 4, 5, device="meta", dtype=ember.int32)
    f = ember.zeros(3, 4, 5, device="meta")
    cases = [
        (x.sum(1), (3, 5), ember.int64), (x.sum((0, 2), keepdim=True), (1, 4, 1), ember.int64),
        (x.prod(), (), ember.int64), (f.mean(-1), (3, 4), ember.float32), (x.amax(0), (4, 5), ember.int32),
        (x.argmax(), (), ember.int64), (x.any(2), (3, 4), ember.bool), (f.var(1), (3, 5), ember.float32),
        (f.norm(dim=0), (4, 5), ember.float32), (x.logsumexp(1), (3, 5), ember.float32),
        (x.cumsum(0), (3, 4, 5), ember.int64), (f.softmax(1), (3, 4, 5), ember.float32),
        (x.count_nonzero(), (), ember.int64), (x.max(1).indices, (3, 5), ember.int64),
    ]
    for r, shape, dtype in cases:
        assert r.device.type == "meta" and tuple(r.shape) == shape and r.dtype is dtype


def test_two_threads_match_torch_on_inputs_above_the_grain():
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        a = np.random.default_rng(3).standard_normal((300, 257)).astype(np.float32)
        e, t = ember.from_numpy(a), torch.from_numpy(a)
        assert_same(e.sum(0), t.sum(0), rtol=1e-5, atol=1e-5)
        assert_same(e.sum(1), t.sum(1), rtol=1e-5, atol=1e-5)
        assert_same(e.softmax(0), t.softmax(0), rtol=1e-5, atol=1e-7)
        assert_same(e.log_softmax(1), t.log_softmax(1), rtol=1e-5, atol=1e-5)
        assert_same(e.cumsum(1), t.cumsum(1), rtol=1e-5, atol=1e-5)
        assert_same(e.argmax(1), t.argmax(1))
    finally:
        ember.set_num_threads(before)


def test_max_min_out_and_keyword_forms():
    e, t = make_pair((3, 5), "float32")
    vals, idx = ember.zeros(0), ember.zeros(0, dtype=ember.int64)
    r = ember.max(e, dim=1, keepdim=True, out=(vals, idx))
    rt = torch.max(t, dim=1, keepdim=True)
    assert_same(tuple(r), tuple(rt))
    assert_same(vals, rt.values)
    assert_same(e.min(dim=0).indices, t.min(dim=0).indices)
    m = ember.zeros(3, 5, device="meta").max(1)
    assert m.values.shape == (3,) and m.indices.dtype is ember.int64


@pytest.mark.parametrize("fn", ["std", "var", "std_mean", "var_mean"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_var_std_of_large_values_do_not_overflow_the_accumulator(fn, dtype):
    # Found by test_fuzz_ops: squared deviations overflowed float32 (std returned inf); PyTorch
    # accumulates in double, so std of [3e38, -1] is finite.
    vals = [[3e38, -1.0, 0.5], [1e20, 1e20, 3.0]]
    e = ember.tensor(vals).to(getattr(ember, dtype))
    t = torch.tensor(vals).to(getattr(torch, dtype))
    for dim in (None, 1):
        assert_same(getattr(ember, fn)(e, dim), getattr(torch, fn)(t, dim))


@pytest.mark.parametrize("call", [
    lambda L, x: L.norm(x[0], "nuc"),
    lambda L, x: L.norm(x, "nuc", dim=(1, 2)),
    lambda L, x: L.norm(x, p="nuc", dim=(0, 2), keepdim=True),
    lambda L, x: x[0].norm(p="nuc", dtype=L.float64),
])
def test_norm_nuc_is_the_nuclear_norm_as_torch(call):
    """torch.norm(x, "nuc") (dims given or a matrix) is the sum of singular values; it raised."""
    data = np.random.default_rng(3).standard_normal((3, 4, 5)).astype(np.float32)
    got, expected = call(ember, ember.tensor(data)), call(torch, torch.tensor(data))
    assert got.dtype.name == str(expected.dtype)[6:]
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5)


@pytest.mark.parametrize("call", [lambda L, x: L.norm(x, "nuc"), lambda L, x: L.norm(x[0, 0], "nuc")])
def test_norm_nuc_rejects_what_torch_rejects(call):
    data = np.ones((3, 4, 5), np.float32)
    with pytest.raises(RuntimeError):
        call(torch, torch.tensor(data))
    with pytest.raises(RuntimeError):
        call(ember, ember.tensor(data))

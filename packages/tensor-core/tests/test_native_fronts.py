"""The native fast path for sum/mean, the view ops, mm/matmul, where and the no-keyword forms of
add/sub/mul/div and their in-place methods (csrc/common/fast_front.cpp, fast_views.cpp,
fast_reduce.cpp, fast_where.cpp): against the Python path (a dispatch mode forces it) and PyTorch,
with gradients, views' bases and version counters, and the calls that must fall back."""

import numpy as np
import pytest
import torch

import ember
from ember._src import dispatch


class _PassThrough(dispatch.DispatchMode):
    """Entering any mode sends calls through the Python functions (the reference path)."""


class _Recorder(dispatch.DispatchMode):
    def __init__(self):
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.name)
        return func(*args, **(kwargs or {}))


def _pair(shape, seed=0, dtype="float32", requires_grad=False):
    data = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return (ember.tensor(data, requires_grad=requires_grad),
            torch.tensor(data, requires_grad=requires_grad))


def _same(ours, theirs, rtol=1e-6):
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=1e-6)


REDUCE_CALLS = [
    lambda m, x: m.sum(x), lambda m, x: x.sum(), lambda m, x: x.sum(1), lambda m, x: x.sum(-1, True),
    lambda m, x: x.sum(dim=(0, 2)), lambda m, x: x.sum(dim=[2, 0], keepdim=True), lambda m, x: x.sum(()),
    lambda m, x: x.mean(), lambda m, x: x.mean(0), lambda m, x: m.mean(x, (1, 2), True),
    lambda m, x: x.mean(dim=-2), lambda m, x: x.transpose(0, 2).sum(1), lambda m, x: x[:, 1:].mean(0),
]


@pytest.mark.parametrize("call", range(len(REDUCE_CALLS)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sum_mean_values_and_grads(call, dtype):
    fn = REDUCE_CALLS[call]
    e, t = _pair((3, 4, 5), call, dtype, requires_grad=True)
    ours, theirs = fn(ember, e), fn(torch, t)
    _same(ours, theirs, rtol=1e-5)
    ref = _python_path(lambda: fn(ember, e))
    np.testing.assert_array_equal(ours.detach().numpy(), ref.detach().numpy())
    assert type(ours.grad_fn).__name__ == type(ref.grad_fn).__name__
    ours.sum().backward()
    theirs.sum().backward()
    _same(e.grad, t.grad)


def _python_path(fn):
    with _PassThrough():
        return fn()


@pytest.mark.parametrize("call", [
    lambda m, x: x.sum(dtype=m.float64), lambda m, x: m.sum(x.int()), lambda m, x: x.int().sum(0),
    lambda m, x: x.mean(1, dtype=m.float64), lambda m, x: x.half().sum(),
    lambda m, x: x.sum(0, keepdim=True, dtype=None), lambda m, x: m.sum(x[0, 0, 0]), lambda m, x: x.bool().sum(1),
])
def test_sum_mean_fallbacks_match_torch(call):
    e, t = _pair((3, 4, 5), 1)
    _same(call(ember, e), call(torch, t), rtol=1e-3)


@pytest.mark.parametrize("call", [
    lambda m, x: x.sum(3), lambda m, x: x.sum((0, 0)), lambda m, x: x.mean(1.5), lambda m, x: x.int().mean(),
    lambda m, x: x.view(7, -1), lambda m, x: x.view(-1, -1), lambda m, x: x.t(), lambda m, x: x.transpose(0, 3),
    lambda m, x: x.permute(0, 1), lambda m, x: x.permute(0, 0, 1), lambda m, x: x.unsqueeze(4),
    lambda m, x: x.expand(3, 5, 5), lambda m, x: x.expand(4, 5), lambda m, x: x.flatten(2, 1),
    lambda m, x: x.transpose(0, 1).view(-1),
    lambda m, x: m.where(x, x, 0.0), lambda m, x: x.reshape(5, 5),
])
def test_errors_match_torch(call):
    e, t = _pair((3, 4, 5), 2)
    with pytest.raises(Exception) as theirs:
        call(torch, t)
    with pytest.raises(theirs.type):
        call(ember, e)


VIEW_CALLS = [
    lambda x: x.view(12, 5), lambda x: x.view((4, -1)), lambda x: x.view([60]), lambda x: x.reshape(-1, 5),
    lambda x: x.reshape(3, 20), lambda x: x.transpose(0, 1).reshape(-1), lambda x: x.flatten(),
    lambda x: x.flatten(1), lambda x: x.flatten(0, 1), lambda x: x.flatten(2, 2), lambda x: x.transpose(-1, 0),
    lambda x: x[0].t(), lambda x: x.permute(2, 0, 1), lambda x: x.permute((1, 2, 0)), lambda x: x.unsqueeze(0),
    lambda x: x.unsqueeze(-1), lambda x: x.unsqueeze(3), lambda x: x[:, :1].expand(2, 3, 4, 5),
    lambda x: x[:1].expand(3, -1, 5), lambda x: x.contiguous(), lambda x: x.transpose(0, 1).contiguous(),
    lambda x: x[:, 1:3].view(3, 10), lambda x: x[:, 1:3].transpose(0, 2).unsqueeze(1),
    lambda x: x.view(x.shape), lambda x: x.reshape(x[0].shape[::-1] + (3,)), lambda x: x[:1].expand(x.shape),
]


@pytest.mark.parametrize("call", range(len(VIEW_CALLS)))
def test_views_match_torch_and_python_path(call):
    fn = VIEW_CALLS[call]
    e, t = _pair((3, 4, 5), 3, requires_grad=True)
    ours, theirs = fn(e), fn(t)
    _same(ours, theirs)
    assert ours.stride() == theirs.stride()
    assert ours.storage_offset() == theirs.storage_offset()
    ref = _python_path(lambda: fn(e))
    assert ours.stride() == ref.stride() and (ours._base is None) == (ref._base is None)
    if ours._base is e:  # (a reshape that copies has a fresh base each call)
        assert ref._base is e
    (ours * ours).sum().backward()
    (theirs * theirs).sum().backward()
    _same(e.grad, t.grad)


def test_views_share_storage_and_version():
    x = ember.zeros(2, 3)
    v = x.view(6)
    w = x.t().unsqueeze(0)
    v.add_(1)
    assert x._version == v._version == w._version == 1
    assert v._base is x and w._base is x and w.t is not None
    assert float(w.sum()) == 6.0
    with ember.no_grad():
        y = ember.ones(2, requires_grad=True).view(1, 2)
    # no history of its own, yet it requires grad through its base (PyTorch: True)
    assert y.grad_fn is None and y.requires_grad and not y._requires_grad


def test_views_of_other_dtypes():
    for dtype in (ember.bool, ember.float16, ember.int8, ember.complex64):
        x = ember.zeros(2, 3, dtype=dtype)
        for v in (x.view(3, 2), x.t(), x.permute(1, 0), x.unsqueeze(1), x.expand(4, 2, 3)):
            assert v.dtype is dtype and v._base is x


@pytest.mark.parametrize("shapes", [((4, 3), (3, 5)), ((1, 7), (7, 1)), ((5, 0), (0, 2)), ((64, 64), (64, 64))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mm_matmul(shapes, dtype):
    (a, ta), (b, tb) = _pair(shapes[0], 4, dtype, True), _pair(shapes[1], 5, dtype, True)
    for fn in (lambda m, x, y: m.mm(x, y), lambda m, x, y: x @ y, lambda m, x, y: m.matmul(x, y)):
        ours, theirs = fn(ember, a, b), fn(torch, ta, tb)
        _same(ours, theirs, rtol=1e-4)
        ours.sum().backward()
        theirs.sum().backward()
    _same(a.grad, ta.grad, rtol=1e-4)
    _same(b.grad, tb.grad, rtol=1e-4)


def test_matmul_falls_back_for_other_ranks_and_dtypes():
    for sa, sb in [((3,), (3,)), ((2, 3), (3,)), ((4, 2, 3), (3, 5)), ((2, 3), (4, 5))]:
        e1, t1 = _pair(sa, 6)
        e2, t2 = _pair(sb, 7)
        try:
            theirs = t1 @ t2
        except RuntimeError:
            with pytest.raises(RuntimeError):
                e1 @ e2
            continue
        _same(e1 @ e2, theirs, rtol=1e-5)
    a = ember.ones(2, 2, dtype=ember.int64)
    assert (a @ a).dtype is ember.int64 and a.mm(a).tolist() == [[2, 2], [2, 2]]


@pytest.mark.parametrize("args", ["tt", "ts", "st", "broadcast"])
def test_where(args):
    (x, tx), (y, ty) = _pair((3, 4), 8, requires_grad=True), _pair((3, 4), 9, requires_grad=True)
    ce, ct = x.detach() > 0, tx.detach() > 0
    if args == "tt":
        ours, theirs = ember.where(ce, x, y), torch.where(ct, tx, ty)
    elif args == "ts":
        ours, theirs = ember.where(ce, x, 0.5), torch.where(ct, tx, 0.5)
    elif args == "st":
        ours, theirs = ember.where(ce, 2, y), torch.where(ct, 2, ty)
    else:
        ours, theirs = ember.where(ce[:1], x, y[0]), torch.where(ct[:1], tx, ty[0])
    _same(ours, theirs)
    ours.sum().backward()
    theirs.sum().backward()
    for e, t in ((x, tx), (y, ty)):
        if t.grad is not None:
            _same(e.grad, t.grad)


def test_binary_functions_and_inplace_methods():
    e, t = _pair((2, 3), 10)
    for name in ("add", "sub", "mul", "div"):
        _same(getattr(ember, name)(e, e), getattr(torch, name)(t, t))
        _same(getattr(ember, name)(e, 3), getattr(torch, name)(t, 3))
        _same(getattr(e, name)(2.5), getattr(t, name)(2.5))
    for name in ("add_", "sub_", "div_"):
        a, ta = e.clone(), t.clone()
        getattr(a, name)(e)
        getattr(ta, name)(t)
        _same(a, ta)
        assert a._version == 1
    a, ta = e.clone(), t.clone()
    a.add_(e, alpha=2)
    ta.add_(t, alpha=2)
    _same(a, ta)
    with pytest.raises(RuntimeError):
        ember.ones(2, requires_grad=True).add_(1)
    w = ember.ones(2, requires_grad=True)
    y = w * 1
    y.add_(w)
    y.sum().backward()
    assert w.grad.tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError):
        ember.sub(ember.ones(2, dtype=ember.bool), ember.ones(2, dtype=ember.bool))


def test_modes_still_see_every_op():
    x = ember.ones(2, 3)
    with _Recorder() as rec:
        x.sum()
        x.mean(0)
        x.view(6)
        x.t()
        x.reshape(3, 2)
        ember.where(x > 0, x, 0.0)
        x @ x.t()
        ember.add(x, x)
    assert rec.names == ["sum", "mean", "view", "transpose", "view", "gt", "where", "transpose", "mm", "add"]


def test_fronts_present_the_python_functions():
    import inspect

    assert ember.sum.__name__ == "sum" and ember.Tensor.view.__name__ == "view"
    assert list(inspect.signature(ember.sum).parameters) == ["input", "dim", "keepdim", "dtype", "out"]
    assert "reshape" in repr(ember.reshape)
    x = ember.ones(2, 2)
    assert x.sum.__self__ is x


@pytest.mark.parametrize("bias_shape", [(5,), (1, 5), (3, 5), (3, 1), ()])
def test_addmm_and_linear(bias_shape):
    (b, tb), (a, ta), (w, tw) = (_pair(s, i, requires_grad=True) for i, s in enumerate([bias_shape, (3, 4), (4, 5)]))
    ours, theirs = ember.addmm(b, a, w), torch.addmm(tb, ta, tw)
    _same(ours, theirs, rtol=1e-5)
    np.testing.assert_array_equal(ours.detach().numpy(), _python_path(lambda: ember.addmm(b, a, w)).detach().numpy())
    ours.sum().backward()
    theirs.sum().backward()
    for e, t in ((b, tb), (a, ta), (w, tw)):
        _same(e.grad, t.grad, rtol=1e-5)
    _same(ember.addmm(b, a, w, beta=0.5, alpha=2), torch.addmm(tb, ta, tw, beta=0.5, alpha=2), rtol=1e-5)
    lin = ember.nn.functional.linear(a, w.t(), b if len(bias_shape) == 1 else None)
    _same(lin, torch.nn.functional.linear(ta, tw.t(), tb if len(bias_shape) == 1 else None), rtol=1e-5)
    with pytest.raises(RuntimeError):
        ember.addmm(ember.ones(2, 7), a, w)


def test_fronts_pickle_and_copy_by_reference():
    import copy
    import pickle

    for fn in (ember.sum, ember.where, ember.matmul, ember.addmm, ember.Tensor.view, ember.Tensor.add_):
        assert pickle.loads(pickle.dumps(fn)) is fn
        assert copy.deepcopy(fn) is fn and copy.copy(fn) is fn


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "complex64"])
def test_views_of_half_and_complex_tensors_keep_their_history(dtype):
    # The native grad recorder builds real floating nodes (float16/bfloat16 included); complex ones
    # must record through Python instead of losing the graph (a bf16 model's x.t() had no grad_fn).
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    def make(lib):
        if dtype == "complex64":
            return lib.complex(lib.tensor(base), lib.tensor(-base)).requires_grad_()
        return lib.tensor(base, dtype=getattr(lib, dtype)).requires_grad_()
    ours, theirs = make(ember), make(torch)
    for fn in (lambda t: t.t(), lambda t: t.view(12), lambda t: t.transpose(0, 1), lambda t: t.unsqueeze(0),
               lambda t: t.permute(1, 0), lambda t: t.expand(2, 3, 4), lambda t: t.sum(), lambda t: t.mean(0)):
        out_e, out_t = fn(ours), fn(theirs)
        assert out_e.requires_grad and out_e.grad_fn is not None
        (out_e.abs() if dtype == "complex64" else out_e).sum().backward()
        (out_t.abs() if dtype == "complex64" else out_t).sum().backward()
    np.testing.assert_allclose(ours.grad.to(ember.complex128 if dtype == "complex64" else ember.float64).numpy(),
                               theirs.grad.to(torch.complex128 if dtype == "complex64" else torch.float64).numpy(),
                               rtol=1e-2)


def test_complex_randn_and_rand_match_pytorch_statistics():
    z = ember.randn(200_000, dtype=ember.complex64)
    assert z.dtype is ember.complex64
    assert abs(z.abs().pow(2).mean().item() - 1.0) < 0.02  # E|z|^2 = 1, as torch.randn
    assert abs(z.real.var().item() - 0.5) < 0.02 and abs(z.imag.var().item() - 0.5) < 0.02
    u = ember.rand(200_000, dtype=ember.complex128)
    assert 0 <= u.real.min().item() and u.real.max().item() < 1 and 0 <= u.imag.min().item() < 1


def test_autocast_regions_keep_the_native_path_for_ops_without_a_cast_policy():
    # Inside autocast only ops with a policy (mm, addmm, ...) go through the cast step; the others
    # record natively (views with meta-only formulas, bfloat16 results) as the Python path does.
    def run():
        x = ember.tensor(np.arange(24, dtype=np.float32).reshape(4, 6) / 10, requires_grad=True)
        w = ember.tensor(np.ones((6, 6), dtype=np.float32) / 3, requires_grad=True)
        with ember.autocast("cpu", dtype=ember.bfloat16):
            h = ember.matmul(x, w)  # bfloat16
            y = (h.view(24).unsqueeze(0).transpose(0, 1) * 2 + 1).sum()
        y.backward()
        return y, x.grad, w.grad, type(h.view(24).grad_fn).__name__

    ours = run()
    with _PassThrough():
        ref = run()
    assert ours[3] == ref[3] == "ViewBackward0"
    for a, b in zip(ours[:3], ref[:3]):
        assert a.dtype is b.dtype
        np.testing.assert_array_equal(a.detach().float().numpy(), b.detach().float().numpy())


# -- basic indexing, squeeze, bmm, addmm's beta/alpha, integer sums, Tensor.where (fast_index.cpp) --

GETITEM_CALLS = [
    lambda x: x[1], lambda x: x[-1], lambda x: x[:, 1:3], lambda x: x[None], lambda x: x[..., 0],
    lambda x: x[1, ..., None, ::2], lambda x: x[()], lambda x: x[:], lambda x: x[::2], lambda x: x[1:],
    lambda x: x[:, None, 2], lambda x: x[0, 0, 0], lambda x: x[..., None], lambda x: x[:, -2:],
    lambda x: x[5:10], lambda x: x[-10:2], lambda x: x[1:2, 3:1], lambda x: x[:, :, 1:4:2],
    lambda x: x.t()[1] if x.ndim == 2 else x.transpose(0, 2)[1, 2:],
]


@pytest.mark.parametrize("call", range(len(GETITEM_CALLS)))
def test_getitem_matches_torch_and_python_path(call):
    fn = GETITEM_CALLS[call]
    e, t = _pair((3, 4, 5), 11, requires_grad=True)
    ours, theirs = fn(e), fn(t)
    _same(ours, theirs)
    assert ours.stride() == theirs.stride()
    ref = _python_path(lambda: fn(e))
    assert ours.storage_offset() == ref.storage_offset()
    if theirs.numel():  # (an empty slice keeps its input's offset in ember, as the Python path does)
        assert ours.storage_offset() == theirs.storage_offset()
    assert ours._base is ref._base is e
    assert type(ours.grad_fn).__name__ == type(ref.grad_fn).__name__
    (ours * ours).sum().backward()
    (theirs * theirs).sum().backward()
    _same(e.grad, t.grad)


@pytest.mark.parametrize("call", [
    lambda x: x[3], lambda x: x[0, 0, 0, 0], lambda x: x[::0], lambda x: x[::-1], lambda x: x[1.5],
    lambda x: x[..., 5], lambda x: x[0][0][0][0],
])
def test_getitem_errors_match_torch(call):
    e, t = _pair((3, 4, 5), 12)
    with pytest.raises(Exception) as theirs:
        call(t)
    with pytest.raises(theirs.type):
        call(e)


@pytest.mark.parametrize("call", [
    lambda m, x: x[True], lambda m, x: x[m.tensor([0, 2])], lambda m, x: x[[0, 1]], lambda m, x: x[x > 0],
    lambda m, x: x[m.tensor(1)], lambda m, x: x[1, [0, 2]], lambda m, x: x[None, ..., m.tensor([1, 1])],
])
def test_getitem_advanced_items_fall_back(call):
    e, t = _pair((3, 4, 5), 13)
    _same(call(ember, e), call(torch, t))


def test_getitem_chains_the_view_ops():
    x = ember.ones(3, 4, 5)
    with _Recorder() as rec:
        x[1, :2, None]
        x[...]
    assert rec.names == ["select", "slice", "unsqueeze", "alias"]
    y = x[1, :2]
    y.add_(1)
    assert x._version == y._version == 1 and float(x.sum()) == 70.0


SQUEEZE_CALLS = [
    lambda m, x: x.squeeze(), lambda m, x: x.squeeze(0), lambda m, x: x.squeeze(dim=2), lambda m, x: x.squeeze((0, 2)),
    lambda m, x: m.squeeze(x, [0]), lambda m, x: x.squeeze(-1), lambda m, x: x.squeeze(1), lambda m, x: m.squeeze(x),
]


@pytest.mark.parametrize("call", range(len(SQUEEZE_CALLS)))
def test_squeeze_matches_torch_and_python_path(call):
    fn = SQUEEZE_CALLS[call]
    e, t = _pair((1, 4, 1), 14, requires_grad=True)
    ours, theirs = fn(ember, e), fn(torch, t)
    _same(ours, theirs)
    assert ours.stride() == theirs.stride()
    ref = _python_path(lambda: fn(ember, e))
    assert type(ours.grad_fn).__name__ == type(ref.grad_fn).__name__ and ours._base is e
    (ours * ours).sum().backward()
    (theirs * theirs).sum().backward()
    _same(e.grad, t.grad)
    assert ember.zeros(()).squeeze().shape == () and ember.zeros(()).squeeze(0).shape == ()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bmm(dtype):
    (a, ta), (b, tb) = _pair((2, 3, 4), 15, dtype, True), _pair((2, 4, 5), 16, dtype, True)
    ours, theirs = ember.bmm(a, b), torch.bmm(ta, tb)
    _same(ours, theirs, rtol=1e-5)
    assert type(ours.grad_fn).__name__ == type(_python_path(lambda: ember.bmm(a, b)).grad_fn).__name__
    ours.sum().backward()
    theirs.sum().backward()
    _same(a.grad, ta.grad, rtol=1e-5)
    _same(b.grad, tb.grad, rtol=1e-5)
    _same(ember.bmm(a.transpose(1, 2), b[:, :3]), torch.bmm(ta.transpose(1, 2), tb[:, :3]), rtol=1e-5)
    assert ember.bmm(a.int(), b.int()).dtype is ember.int32
    for bad in ((a, a), (a, b[:1]), (a[0], b[0])):
        with pytest.raises(RuntimeError):
            ember.bmm(*bad)


@pytest.mark.parametrize(("beta", "alpha"), [(0.5, 2.0), (0, 1), (2, 0), (1, 1.0), (float("nan"), 1)])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_addmm_beta_alpha(beta, alpha, requires_grad):
    (b, tb), (a, ta), (w, tw) = (_pair(s, 17 + i, requires_grad=requires_grad)
                                 for i, s in enumerate([(5,), (3, 4), (4, 5)]))
    ours, theirs = ember.addmm(b, a, w, beta=beta, alpha=alpha), torch.addmm(tb, ta, tw, beta=beta, alpha=alpha)
    _same(ours, theirs, rtol=1e-5)
    if requires_grad:
        ours.sum().backward()
        theirs.sum().backward()
        for e, t in ((b, tb), (a, ta), (w, tw)):
            _same(e.grad, t.grad, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
@pytest.mark.parametrize("call", [
    lambda m, x: x.sum(), lambda m, x: x.sum(0), lambda m, x: m.sum(x, (0, 2), True), lambda m, x: x.sum(dim=-1),
    lambda m, x: x.transpose(0, 1).sum(1), lambda m, x: x[:, 1:].sum(()),
])
def test_integer_sums(dtype, call):
    data = np.random.default_rng(18).integers(0, 100, (3, 4, 5)).astype(dtype)
    ours, theirs = call(ember, ember.tensor(data)), call(torch, torch.tensor(data))
    _same(ours, theirs)
    assert ours.dtype is ember.int64


def test_tensor_where_method_records_grad():
    (x, tx), (y, ty) = _pair((3, 4), 19, requires_grad=True), _pair((3, 4), 20, requires_grad=True)
    ours, theirs = x.where(x.detach() > 0, y), tx.where(tx.detach() > 0, ty)
    _same(ours, theirs)
    ref = _python_path(lambda: x.where(x.detach() > 0, y))
    assert type(ours.grad_fn).__name__ == type(ref.grad_fn).__name__
    (ours * ours).sum().backward()
    (theirs * theirs).sum().backward()
    _same(x.grad, tx.grad)
    _same(y.grad, ty.grad)
    _same(x.where(x > 0, 0.0), tx.where(tx > 0, 0.0))

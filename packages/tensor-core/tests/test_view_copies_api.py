"""The ``*_copy`` view variants and narrow_copy against PyTorch: values, contiguous fresh
results, dtypes, non-contiguous inputs, out=, errors, and gradients."""

import numpy as np
import pytest

import ember
from ember._src import plugins

from conftest import assert_same, make_pair, torch

LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]

# (name, args after the input) for a (4, 3, 2)-shaped input (ravel-able / viewable everywhere).
CASES = [
    ("view_copy", ((6, 4),)),
    ("view_copy", ((-1,),)),
    ("permute_copy", ((2, 0, 1),)),
    ("expand_copy", ((2, 4, 3, 2),)),
    ("select_copy", (1, -1)),
    ("slice_copy", (0, 1, 3)),
    ("slice_copy", (1, -2, None, 2)),
    ("slice_copy", (2, None, 10)),
    ("diagonal_copy", (0, 0, 1)),
    ("diagonal_copy", (-1, 1, 2)),
    ("transpose_copy", (0, 2)),
    ("squeeze_copy", ()),
    ("unsqueeze_copy", (1,)),
    ("unfold_copy", (0, 2, 1)),
    ("as_strided_copy", ((2, 2), (1, 2), 1)),
    ("alias_copy", ()),
    ("detach_copy", ()),
    ("narrow_copy", (1, 1, 2)),
]


def _check_fresh(e_out, e_in):
    assert e_out.is_contiguous()
    assert e_out.untyped_storage() is not e_in.untyped_storage()


@pytest.mark.parametrize("name, args", CASES, ids=[f"{n}{a}" for n, a in CASES])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_copy_matches_torch(name, args, layout, dtype):
    e, t = make_pair((4, 3, 2), dtype, layout=layout)
    if name == "as_strided_copy":  # storage coordinates: compare on a contiguous copy
        e, t = e.contiguous(), t.contiguous()
    e_out, t_out = getattr(ember, name)(e, *args), getattr(torch, name)(t, *args)
    assert_same(e_out, t_out)
    _check_fresh(e_out, e)
    assert e_out.stride() == t_out.stride()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "uint8", "int8"])
def test_more_dtypes(dtype):
    e, t = make_pair((3, 4), dtype, layout="transposed")
    assert_same(ember.t_copy(e), torch.t_copy(t))
    assert_same(ember.view_copy(e, (12,)), torch.view_copy(t, (12,)))
    assert_same(ember.squeeze_copy(e.unsqueeze(0), 0), torch.squeeze_copy(t.unsqueeze(0), 0))


def test_list_results():
    e, t = make_pair((5, 3), "float32", layout="transposed")
    for fn, args in (("unbind_copy", (1,)), ("split_copy", (2, 1)), ("split_with_sizes_copy", ([1, 2], 1))):
        e_out, t_out = getattr(ember, fn)(e, *args), getattr(torch, fn)(t, *args)
        assert type(e_out) is tuple
        assert_same(e_out, t_out)
        for piece in e_out:
            _check_fresh(piece, e)


def test_complex_views():
    z = ember.tensor([1 + 2j, 3 - 4j])
    tz = torch.tensor([1 + 2j, 3 - 4j])
    r = ember.view_as_real_copy(z)
    assert r.tolist() == torch.view_as_real_copy(tz).tolist()
    _check_fresh(r, z)
    back = ember.view_as_complex_copy(r)
    assert back.tolist() == torch.view_as_complex_copy(torch.view_as_real_copy(tz)).tolist()


def test_view_copy_dtype_and_meta():
    e, t = make_pair((2, 4), "float32")
    assert_same(ember.view_copy(e, ember.int32), torch.view_copy(t, torch.int32))
    m = ember.empty(3, 4, device="meta")
    out = ember.transpose_copy(m, 0, 1)
    assert out.is_meta and tuple(out.shape) == (4, 3)


def test_out_argument():
    e, t = make_pair((3, 4), "float32")
    out = ember.empty(0)
    ember.transpose_copy(e, 0, 1, out=out)
    assert_same(out, torch.transpose_copy(t, 0, 1))
    outs = [ember.empty(4), ember.empty(4)]
    assert ember.unbind_copy(e[:2], 0, out=outs) is None
    assert_same(outs[1], t[1])
    with pytest.raises(RuntimeError):
        ember.transpose_copy(e, 0, 1, out=ember.empty(0, dtype=ember.int64))


@pytest.mark.parametrize("call, exc", [
    (lambda m, x: m.slice_copy(x, 0, 0, 2, 0), RuntimeError),
    (lambda m, x: m.slice_copy(m.tensor(1.0), 0), IndexError),
    (lambda m, x: m.select_copy(x, 0, 7), IndexError),
    (lambda m, x: m.select_copy(x, 3, 0), IndexError),
    (lambda m, x: m.view_copy(x, (5,)), RuntimeError),
    (lambda m, x: m.permute_copy(x, (0,)), RuntimeError),
    (lambda m, x: m.expand_copy(x, (2, 2)), RuntimeError),
    (lambda m, x: m.narrow_copy(x, 0, 2, 5), RuntimeError),
    (lambda m, x: m.transpose_copy(x, 0, 5), IndexError),
    (lambda m, x: m.diagonal_copy(x, 0, 1, 1), RuntimeError),
    (lambda m, x: m.unfold_copy(x, 0, 9, 1), RuntimeError),
    (lambda m, x: m.view_as_complex_copy(x), RuntimeError),
    (lambda m, x: m.t_copy(m.zeros(2, 2, 2)), RuntimeError),
    (lambda m, x: m.unbind_copy([1, 2]), TypeError),
])
def test_errors_match_torch(call, exc):
    x_e, x_t = make_pair((3, 4), "float32")
    with pytest.raises(exc):
        call(torch, x_t)
    with pytest.raises(exc):
        call(ember, x_e)


needs_autograd = pytest.mark.skipif(plugins.load("autograd") is None, reason="needs ember-autograd")

GRAD_CASES = [
    ("view_copy", ((6, 2),)), ("permute_copy", ((1, 0),)), ("expand_copy", ((2, 4, 3),)), ("select_copy", (1, 2)),
    ("slice_copy", (0, 1, None, 2)), ("diagonal_copy", (1,)), ("t_copy", ()), ("transpose_copy", (0, 1)),
    ("unsqueeze_copy", (0,)), ("unfold_copy", (0, 2, 1)), ("as_strided_copy", ((3, 2), (2, 1))),
    ("alias_copy", ()), ("narrow_copy", (1, 1, 2)), ("squeeze_copy", ()),
]


@needs_autograd
@pytest.mark.parametrize("name, args", GRAD_CASES, ids=[n for n, _ in GRAD_CASES])
def test_gradients_match_torch(name, args):
    rng = np.random.default_rng(1)
    data = rng.uniform(-1, 1, (4, 3))
    xe = ember.tensor(data.copy(), requires_grad=True)
    xt = torch.tensor(data.copy(), requires_grad=True)
    ye, yt = getattr(ember, name)(xe, *args), getattr(torch, name)(xt, *args)
    w = rng.uniform(-1, 1, tuple(yt.shape))
    (ye * ember.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)


@needs_autograd
def test_list_copy_gradients_and_detach_copy():
    xe = ember.arange(6.0, dtype=ember.float64).reshape(2, 3).requires_grad_()
    xt = torch.arange(6.0, dtype=torch.float64).reshape(2, 3).requires_grad_()
    for m, x in ((ember, xe), (torch, xt)):
        a, b = m.split_with_sizes_copy(x, [1, 2], 1)
        (a.sum() * 2 + (b * b).sum()).backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy())
    assert ember.detach_copy(xe).requires_grad is False

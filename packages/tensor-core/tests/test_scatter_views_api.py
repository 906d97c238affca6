"""slice_scatter / select_scatter / diagonal_scatter / as_strided_scatter against PyTorch:
values, dtype casts, non-contiguous inputs, out=, errors, and gradients to input and src."""

import numpy as np
import pytest

import ember
from ember._src import plugins

from conftest import assert_same, make_pair, torch

LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]

# (name, src shape for a (4, 3) input, extra args)
CASES = [
    ("slice_scatter", (2, 3), (0, 1, 3)),
    ("slice_scatter", (4, 2), (1, None, None, 2)),
    ("slice_scatter", (4, 1), (1, -1)),
    ("slice_scatter", (4, 3), (0, -10, 10)),
    ("slice_scatter", (0, 3), (0, 3, 1)),
    ("select_scatter", (3,), (0, -1)),
    ("select_scatter", (4,), (1, 1)),
    ("diagonal_scatter", (3,), ()),
    ("diagonal_scatter", (2,), (1,)),
    ("diagonal_scatter", (2,), (-1, 1, 0)),
    ("as_strided_scatter", (2, 2), ((2, 2), (3, 1), 1)),
    ("as_strided_scatter", (3,), ((3,), (4,))),
]


@pytest.mark.parametrize("name, src_shape, args", CASES, ids=[f"{n}{a}" for n, _, a in CASES])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_matches_torch(name, src_shape, args, layout, dtype):
    e, t = make_pair((4, 3), dtype, layout=layout)
    if name == "as_strided_scatter" and layout == "expanded":
        e, t = e.contiguous(), t.contiguous()  # PyTorch copies an overlapping input first too
    se, st = make_pair(src_shape, dtype, seed=3)
    e_out, t_out = getattr(ember, name)(e, se, *args), getattr(torch, name)(t, st, *args)
    assert_same(e_out, t_out)
    assert e_out.untyped_storage() is not e.untyped_storage()
    assert_same(e, t)  # the input is untouched
    if name == "as_strided_scatter":
        assert e_out.stride() == t_out.stride()


@pytest.mark.parametrize("name, src_shape, args", CASES[:3] + CASES[5:8])
def test_src_of_another_dtype_is_cast(name, src_shape, args):
    e, t = make_pair((4, 3), "float32")
    se, st = make_pair(src_shape, "int64", seed=3)
    assert_same(getattr(ember, name)(e, se, *args), getattr(torch, name)(t, st, *args))


def test_methods_and_out():
    e, t = make_pair((3, 3), "float64")
    assert_same(e.diagonal_scatter(ember.ones(3, dtype=ember.float64)),
                t.diagonal_scatter(torch.ones(3, dtype=torch.float64)))
    out = ember.empty(0, dtype=ember.float64)
    ember.select_scatter(e, ember.zeros(3, dtype=ember.float64), 0, 1, out=out)
    assert_same(out, torch.select_scatter(t, torch.zeros(3, dtype=torch.float64), 0, 1))


def test_meta():
    out = ember.slice_scatter(ember.empty(4, 3, device="meta"), ember.empty(2, 3, device="meta"), 0, 0, 2)
    assert out.is_meta and tuple(out.shape) == (4, 3)


@pytest.mark.parametrize("call, exc", [
    (lambda m, x: m.diagonal_scatter(x, m.ones(2)), RuntimeError),
    (lambda m, x: m.diagonal_scatter(x, m.ones(3, 1)), RuntimeError),
    (lambda m, x: m.select_scatter(x, m.ones(3), 0, 5), IndexError),
    (lambda m, x: m.select_scatter(x, m.ones(3), 2, 0), IndexError),
    (lambda m, x: m.slice_scatter(x, m.ones(4, 1), 1, 0, 1, 0), RuntimeError),
    (lambda m, x: m.slice_scatter(x, m.ones(4, 2), 1, 0, 1), RuntimeError),
    (lambda m, x: m.as_strided_scatter(x, m.ones(2), (2,), (0,)), RuntimeError),
    (lambda m, x: m.as_strided_scatter(x, m.ones(2), (2,), (1,), 20), RuntimeError),
    (lambda m, x: m.slice_scatter(x, [1.0], 0), TypeError),
])
def test_errors_match_torch(call, exc):
    x_e, x_t = make_pair((4, 3), "float32")
    with pytest.raises(exc):
        call(torch, x_t)
    with pytest.raises(exc):
        call(ember, x_e)


needs_autograd = pytest.mark.skipif(plugins.load("autograd") is None, reason="needs ember-autograd")


def _torch_reference(name):
    if name != "as_strided_scatter":
        return getattr(torch, name)

    # PyTorch's own derivative of as_strided_scatter for `input` is wrong (it passes the gradient
    # at the overwritten positions and fails gradcheck); the in-place form it abbreviates is right.
    def reference(x, s, size, stride, offset=None):
        y = x.clone()
        y.as_strided(size, stride, offset).copy_(s)
        return y

    return reference


@needs_autograd
@pytest.mark.parametrize("name, src_shape, args", CASES, ids=[f"{n}{a}" for n, _, a in CASES])
@pytest.mark.parametrize("grad_of", ["both", "input", "src"])
def test_gradients_match_torch(name, src_shape, args, grad_of):
    rng = np.random.default_rng(2)
    x, s = rng.uniform(-1, 1, (4, 3)), rng.uniform(-1, 1, src_shape)
    w = rng.uniform(-1, 1, (4, 3))
    grads = {}
    for m in (ember, torch):
        xm = m.tensor(x.copy(), requires_grad=grad_of in ("both", "input"))
        sm = m.tensor(s.copy(), requires_grad=grad_of in ("both", "src"))
        out = (getattr(ember, name) if m is ember else _torch_reference(name))(xm, sm, *args)
        (out * m.tensor(w)).sum().backward()
        grads[m] = [None if g is None else g.detach().numpy() for g in (xm.grad, sm.grad)]
    for a, b in zip(grads[ember], grads[torch]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@needs_autograd
def test_as_strided_scatter_passes_gradcheck():
    from ember.autograd import gradcheck

    x = ember.randn(4, 3, dtype=ember.float64, requires_grad=True)
    s = ember.randn(2, 2, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda a, b: ember.as_strided_scatter(a, b, (2, 2), (3, 1), 1), (x, s))

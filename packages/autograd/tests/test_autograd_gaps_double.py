"""Double backward through the fused nn ops' backward kernels (pooling, padding, upsampling,
embedding, layer/batch/group norm): gradgradcheck in float64, and second-order gradients equal
to PyTorch's on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ag_helpers import leaves, make_arrays
from test_autograd_formulas_nn import _F

import ember
from ember.autograd.gradcheck import gradgradcheck


def _second_order_grads(lib, fn, xs, seed=3):
    """d/d(xs, v) of sum(w * d(sum(v * fn(xs)))/dxs): the derivative of every first-order formula,
    w.r.t. its grad_output (v) too."""
    out = fn(lib, *xs)
    rng = np.random.default_rng(seed)
    v = lib.tensor(rng.uniform(-1, 1, tuple(out.shape)), requires_grad=True)
    firsts = lib.autograd.grad((out * v).sum(), xs, create_graph=True, allow_unused=True)
    total = 0
    for f in firsts:
        if f is not None and f.requires_grad:
            total = total + (f * lib.tensor(rng.uniform(-1, 1, tuple(f.shape)))).sum()
    return lib.autograd.grad(total, tuple(xs) + (v,), allow_unused=True), v


def _check(fn, arrays, rtol=1e-6, atol=1e-8, finite_differences=True):
    es, ts = leaves(arrays)
    e_grads, v = _second_order_grads(ember, fn, es)
    t_grads, _ = _second_order_grads(torch, fn, ts)
    for i, (eg, tg, x) in enumerate(zip(e_grads, t_grads, es + [v])):
        # None and zeros are the same gradient here (PyTorch returns zeros for some of these).
        eg = np.zeros(tuple(x.shape)) if eg is None else eg.detach().numpy()
        tg = np.zeros(tuple(x.shape)) if tg is None else tg.numpy()
        np.testing.assert_allclose(eg, tg, rtol=rtol, atol=atol, err_msg=f"input {i}")
    if finite_differences:
        es, _ = leaves(arrays)
        assert gradgradcheck(lambda *xs: fn(ember, *xs), tuple(es))


def _image(x):
    return x.reshape(1, 2, 4, 4)


CASES = [
    ("max_pool2d", lambda m, x: _F(m).max_pool2d(_image(x), 2), [(2, 16)]),
    ("max_pool2d_indices", lambda m, x: _F(m).max_pool2d(_image(x), 3, 1, 1, return_indices=True)[0], [(2, 16)]),
    ("avg_pool2d", lambda m, x: _F(m).avg_pool2d(_image(x), 2, padding=1), [(2, 16)]),
    ("adaptive_avg", lambda m, x: _F(m).adaptive_avg_pool2d(_image(x), 3), [(2, 16)]),
    ("adaptive_max", lambda m, x: _F(m).adaptive_max_pool2d(_image(x), 3), [(2, 16)]),
    ("pad_reflect", lambda m, x: _F(m).pad(_image(x), (1, 2, 2, 1), mode="reflect"), [(2, 16)]),
    ("pad_replicate", lambda m, x: _F(m).pad(_image(x), (1, 2, 2, 1), mode="replicate"), [(2, 16)]),
    ("upsample_bilinear", lambda m, x: _F(m).interpolate(_image(x), scale_factor=1.5, mode="bilinear"), [(2, 16)]),
    ("upsample_nearest", lambda m, x: _F(m).interpolate(_image(x), size=(6, 5)), [(2, 16)]),
    ("layer_norm", lambda m, x, w, b: _F(m).layer_norm(x, (4,), w, b), [(3, 4), (4,), (4,)]),
    ("layer_norm_plain", lambda m, x: _F(m).layer_norm(x.reshape(2, 3, 2), (3, 2)), [(2, 6)]),
    ("batch_norm", lambda m, x, w, b: _F(m).batch_norm(x.reshape(3, 2, 2), None, None, w, b, training=True),
     [(3, 4), (2,), (2,)]),
    ("group_norm", lambda m, x, w, b: _F(m).group_norm(x.reshape(2, 4, 2), 2, w, b), [(2, 8), (4,), (4,)]),
]


@pytest.mark.parametrize("name, fn, shapes", CASES, ids=[c[0] for c in CASES])
def test_double_backward(name, fn, shapes):
    _check(fn, make_arrays(shapes, 11))


def test_batch_norm_eval_double_backward():
    rm, rv = np.array([0.1, -0.2]), np.array([0.5, 2.0])

    def fn(m, x, w):
        return _F(m).batch_norm(x.reshape(3, 2), m.tensor(rm), m.tensor(rv), w, None, training=False)

    _check(fn, make_arrays([(3, 2), (2,)], 12))


@pytest.mark.parametrize("padding_idx, scale", [(None, False), (1, False), (None, True)])
def test_embedding_double_backward(padding_idx, scale):
    index = np.array([[0, 2, 1], [2, 2, 3]])

    def fn(m, w):
        out = _F(m).embedding(m.tensor(index), w, padding_idx=padding_idx, scale_grad_by_freq=scale)
        return out * out

    # With scale_grad_by_freq the first-order gradient is a convention, not a derivative: no
    # finite-difference check, only PyTorch's values.
    _check(fn, make_arrays([(4, 3)], 13), finite_differences=not scale)

"""Derivatives that used to raise: polygamma/digamma, qr, svd, eigh's eigenvectors, lstsq,
scatter_reduce (prod/mean/amax/amin), rms_norm. Each is gradchecked in float64 and compared with
PyTorch's gradients on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ag_helpers import grads_match_torch, leaves, make_arrays

import ember
from ember.autograd.gradcheck import gradcheck, gradgradcheck


def _check(fn, arrays, layout="contiguous", rtol=1e-6, atol=1e-8, second_order=False):
    grads_match_torch(fn, arrays, layout, rtol=rtol, atol=atol)
    es, _ = leaves(arrays, layout)
    assert gradcheck(lambda *xs: fn(ember, *xs), tuple(es))
    if second_order:
        es, _ = leaves(arrays, layout)
        assert gradgradcheck(lambda *xs: fn(ember, *xs), tuple(es))


# -- polygamma / digamma -----------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 3])
@pytest.mark.parametrize("shape", [(2, 3), ()])
def test_polygamma(n, shape):
    _check(lambda m, x: m.polygamma(n, x), make_arrays([shape], n, 0.3, 3.0), second_order=n < 2)


def test_polygamma_method_and_special():
    _check(lambda m, x: x.polygamma(2), make_arrays([(4,)], 0, 0.5, 2.0))
    _check(lambda m, x: m.special.polygamma(1, x), make_arrays([(2, 2)], 0, 0.5, 2.0), layout="transposed")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_polygamma_values_match_torch(dtype):
    x = np.array([-2.5, -1.5, -0.3, 0.0, 0.2, 1.0, 4.5, 30.0, -2.0], dtype=dtype)
    for n in range(5):
        e = ember.polygamma(n, ember.tensor(x)).numpy()
        t = torch.polygamma(n, torch.tensor(x)).numpy()
        np.testing.assert_allclose(e, t, rtol=1e-5 if dtype == "float32" else 1e-10, atol=1e-6, equal_nan=True)


def test_polygamma_errors_and_int_input():
    assert ember.polygamma(1, ember.tensor([1, 2])).dtype is ember.float32
    with pytest.raises(RuntimeError):
        ember.polygamma(-1, ember.tensor([1.0]))
    with pytest.raises(TypeError):
        ember.polygamma(1.5, ember.tensor([1.0]))


def test_digamma_derivative():
    _check(lambda m, x: m.digamma(x), make_arrays([(2, 3)], 0, 0.3, 3.0), second_order=True)


def test_mvlgamma():
    _check(lambda m, x: m.mvlgamma(x, 3), make_arrays([(2, 3)], 0, 1.5, 3.0))


# -- linalg decompositions -----------------------------------------------------------------------


def _sym(m, a):
    return a + a.mT


@pytest.mark.parametrize("batch", [(), (2,)])
def test_eigh_eigenvectors(batch):
    # Eigenvectors are defined up to sign: v * v is not.
    def fn(m, a):
        values, vectors = m.linalg.eigh(_sym(m, a))
        return values, vectors * vectors

    _check(fn, make_arrays([batch + (3, 3)], 0))


def test_eigh_vectors_only_and_upper():
    _check(lambda m, a: m.linalg.eigh(_sym(m, a), UPLO="U")[1].abs(), make_arrays([(4, 4)], 2))


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4), (2, 4, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr(shape, mode):
    if mode == "complete" and shape[-2] > shape[-1]:
        pytest.skip("complete mode of a tall matrix is not differentiable (tested below)")
    _check(lambda m, a: m.linalg.qr(a, mode=mode), make_arrays([shape], 1))


def test_qr_r_only_and_complete_tall_raise_like_torch():
    for mode in ("r", "complete"):
        for lib in (ember, torch):
            a = lib.tensor(np.random.default_rng(0).uniform(-1, 1, (4, 3)), requires_grad=True)
            with pytest.raises(RuntimeError):
                lib.linalg.qr(a, mode=mode)[1].sum().backward()


def _svd_invariants(m, a, full_matrices):
    u, s, vh = m.linalg.svd(a, full_matrices=full_matrices)
    k = s.shape[-1]
    return u[..., :k] * u[..., :k], s, vh[..., :k, :] * vh[..., :k, :], (u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :]


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4), (2, 4, 3)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd(shape, full_matrices):
    _check(lambda m, a: _svd_invariants(m, a, full_matrices), make_arrays([shape], 2))


def test_svd_full_matrices_ignores_the_extra_columns_like_torch():
    # PyTorch 2.13 narrows U / Vh to their first k columns / rows before differentiating: a
    # gradient reaching the extra ones (not determined by A) is dropped, not an error.
    def fn(m, a):
        u, s, vh = m.linalg.svd(a, full_matrices=True)
        return (u * u).sum(-1), s

    grads_match_torch(fn, make_arrays([(4, 2)], 12))


def test_svd_values_only_and_torch_svd():
    _check(lambda m, a: m.linalg.svd(a)[1], make_arrays([(3, 5)], 3))
    _check(lambda m, a: m.linalg.svdvals(a), make_arrays([(4, 2)], 3))

    def fn(m, a):
        u, s, v = m.svd(a)
        return u * u, s, v * v

    _check(fn, make_arrays([(4, 3)], 4), layout="transposed")


@pytest.mark.parametrize("shapes", [[(4, 3), (4, 2)], [(4, 3), (4,)], [(2, 3), (2, 2)], [(2, 4, 3), (1, 4, 2)]],
                         ids=["tall", "vector", "wide", "broadcast"])
def test_lstsq(shapes):
    _check(lambda m, a, b: m.linalg.lstsq(a, b).solution, make_arrays(shapes, 5))


def test_lstsq_second_order():
    es, _ = leaves(make_arrays([(3, 2), (3, 1)], 6))
    assert gradgradcheck(lambda a, b: ember.linalg.lstsq(a, b).solution, tuple(es))


# -- scatter_reduce / scatter -----------------------------------------------------------------


INDEX = np.array([[0, 1, 0, 2], [2, 2, 1, 0]])


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    def fn(m, x, src):
        return m.scatter_reduce(x, 1, m.tensor(INDEX), src, reduce, include_self=include_self)

    _check(fn, make_arrays([(2, 3), (2, 4)], 7, 0.5, 2.0))


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
def test_scatter_reduce_larger_src_and_dim0(reduce):
    # src larger than index: only src[:index.shape] is read. PyTorch 2.13's own backward rejects this
    # case (its gradient has index's shape), so this checks ember's against finite differences.
    index = ember.tensor(INDEX.T[:3].copy())
    es, _ = leaves(make_arrays([(3, 2), (4, 3)], 8, 0.5, 2.0))
    assert gradcheck(lambda x, src: ember.scatter_reduce(x, 0, index, src, reduce, include_self=False), tuple(es))


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_ties_split_evenly(reduce, include_self):
    x = np.array([[1.0, 2.0, 3.0]])
    src = np.array([[1.0, 3.0, 1.0, 3.0]])
    index = np.array([[0, 2, 0, 2]])

    def fn(m, a, b):
        return m.scatter_reduce(a, 1, m.tensor(index), b, reduce, include_self=include_self)

    grads_match_torch(fn, [x, src])


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_with_zeros(include_self):
    x = np.array([[0.0, 2.0, 3.0, 0.5]])
    src = np.array([[0.0, 1.5, 0.0, 2.0, 0.0, 4.0]])
    index = np.array([[1, 1, 2, 2, 2, 3]])

    def fn(m, a, b):
        return m.scatter_reduce(a, 1, m.tensor(index), b, "prod", include_self=include_self)

    grads_match_torch(fn, [x, src])


def test_scatter_reduce_inplace_reads_self_before_the_op():
    def fn(m, x, src):
        y = x * 1.0
        y.scatter_reduce_(1, m.tensor(INDEX), src, "prod")
        return y

    _check(fn, make_arrays([(2, 3), (2, 4)], 9, 0.5, 2.0))


def test_scatter_with_reduce_raises_like_torch():
    for lib in (ember, torch):
        x = lib.tensor(np.ones((2, 3)), requires_grad=True)
        y = x.scatter(1, lib.tensor(INDEX[:, :3].copy()), 2.0, reduce="multiply")
        with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
            y.sum().backward()


# -- rms_norm ----------------------------------------------------------------------------------


@pytest.mark.parametrize("with_weight", [True, False])
@pytest.mark.parametrize("shapes", [[(2, 3, 4), (4,)], [(2, 3, 4), (3, 4)], [(5,), (5,)]], ids=["1d", "2d", "only"])
def test_rms_norm(shapes, with_weight):
    arrays = make_arrays(shapes if with_weight else shapes[:1], 10)
    norm_shape = shapes[1]

    def fn(m, x, w=None):
        return m.nn.functional.rms_norm(x, norm_shape, w, eps=1e-5) if m is torch else m.rms_norm(x, norm_shape, w,
                                                                                                  eps=1e-5)

    _check(fn, arrays, second_order=True)


# -- scaled_dot_product_attention: grouped heads and dropout ------------------------------------


def _attention_fn():
    from ember._src.ops.nn.attention import scaled_dot_product_attention  # ember.nn is not required here

    return scaled_dot_product_attention


def _sdpa(m):
    return torch.nn.functional.scaled_dot_product_attention if m is torch else _attention_fn()


@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_grouped_heads(is_causal):
    def fn(m, q, k, v):
        return _sdpa(m)(q, k, v, is_causal=is_causal, enable_gqa=True)

    _check(fn, make_arrays([(1, 4, 3, 2), (1, 2, 3, 2), (1, 2, 3, 2)], 14))


def test_sdpa_dropout_gradient_uses_the_forward_mask():
    # out = D @ v with D the dropped attention weights: running with v = I (same seed) gives D,
    # and the gradient of sum(out * w) w.r.t. v must be D^T w.
    q, k, v, w = (ember.tensor(a) for a in make_arrays([(2, 4, 3), (2, 4, 3), (2, 4, 3), (2, 4, 3)], 15))
    ember.manual_seed(7)
    weights = _attention_fn()(q, k, ember.eye(4, dtype=ember.float64).expand(2, 4, 4),
                                                 dropout_p=0.5)
    v.requires_grad_(True)
    q.requires_grad_(True)
    ember.manual_seed(7)
    out = _attention_fn()(q, k, v, dropout_p=0.5)
    np.testing.assert_allclose(out.detach().numpy(), (weights @ v).detach().numpy(), rtol=1e-12)
    (out * w).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), (weights.mT @ w).numpy(), rtol=1e-12, atol=1e-14)
    assert q.grad is not None and np.isfinite(q.grad.numpy()).all()

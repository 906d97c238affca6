"""Gradients the op database's autograd test skipped as open bugs (issue 17), now fixed: vs PyTorch.

- in-place composites (i0_, ldexp_, sinc_) saved their input for backward and then overwrote it,
  so any gradient through them raised a version-counter error;
- matrix_power(A, 0) returned an identity outside A's graph (PyTorch: requires grad, zero gradient);
- embedding_renorm_ on a tensor that requires grad let the gradient pass through the rescale unchanged
  (a silent wrong answer; PyTorch has no derivative and raises NotImplementedError);
- vander: PyTorch 2.13's own backward fails (a version-counter error), ember's passes gradcheck;
- second derivatives of the norms through forward AD (jacfwd(jacrev), jacrev(jacfwd)) raised or were
  wrong; cholesky_inverse's tangent (PyTorch's own is wrong) against finite differences.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

RNG = np.random.default_rng(17)
X = RNG.uniform(0.2, 2.0, (3, 4))
OTHER = RNG.uniform(0.2, 2.0, (3, 4))


def _grads(lib, name, other):
    x = lib.tensor(X, requires_grad=True)
    o = lib.tensor(OTHER, requires_grad=True)
    y = x * 1
    getattr(y, name)(*((o,) if other else ()))
    gs = lib.autograd.grad((y * lib.tensor(OTHER)).sum(), [x, o], allow_unused=True)
    return [None if g is None else np.asarray(g.detach() if lib is torch else g) for g in gs]


@pytest.mark.parametrize("name,other", [("i0_", False), ("ldexp_", True), ("sinc_", False)])
def test_inplace_composite_gradients(name, other):
    e, t = _grads(ember, name, other), _grads(torch, name, other)
    for eg, tg in zip(e, t):
        assert (eg is None) == (tg is None)
        if tg is not None:
            np.testing.assert_allclose(eg, tg, rtol=1e-10, atol=1e-12)


def test_matrix_power_zero_stays_in_the_graph():
    for lib in (ember, torch):
        a = lib.tensor(X[:3, :3], requires_grad=True)
        r = lib.linalg.matrix_power(a, 0)
        assert r.requires_grad
        assert r.tolist() == np.eye(3).tolist()
        (g,) = lib.autograd.grad(r.sum(), a)
        assert float(g.abs().sum()) == 0.0
    # integer and transposed inputs keep working
    r = ember.matrix_power(ember.ones(3, 3, dtype=ember.int64).t(), 0)
    assert r.tolist() == np.eye(3).tolist() and r.is_contiguous()


def test_embedding_renorm_refuses_recorded_gradient():
    w = ember.tensor(X, requires_grad=True)
    v = w * 1
    with pytest.raises(NotImplementedError, match="embedding_renorm"):
        ember.embedding_renorm_(v, ember.tensor([0, 1]), 1.0, 2.0)
    with pytest.raises(RuntimeError, match="leaf"):
        ember.embedding_renorm_(w, ember.tensor([0, 1]), 1.0, 2.0)
    # without recording (nn.Embedding's max_norm path) it renormalizes as PyTorch does
    with ember.no_grad():
        ember.embedding_renorm_(v, ember.tensor([0, 1]), 1.0, 2.0)
    t = torch.tensor(X)
    torch.embedding_renorm_(t, torch.tensor([0, 1]), 1.0, 2.0)
    np.testing.assert_allclose(v.detach().numpy(), t.numpy(), rtol=1e-12)


@pytest.mark.parametrize("n,increasing", [(None, False), (None, True), (2, False), (5, True)])
def test_vander_gradient_where_torch_fails(n, increasing):
    xv = np.array([0.5, -1.2, 2.0, 0.0])
    t = torch.tensor(xv, requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(torch.vander(t, n, increasing).sum(), t)
    e = ember.tensor(xv, requires_grad=True)
    assert ember.autograd.gradcheck(lambda a: ember.vander(a, n, increasing), (e,))


def test_vander_one_column_needs_no_grad():
    for lib in (ember, torch):
        assert not lib.vander(lib.tensor([0.5, 2.0], requires_grad=True), 1).requires_grad


def test_logcumsumexp_forward_ad():
    # The JVP came from a double backward of a formula that is not linear in its cotangent (log|g|).
    import torch.autograd.forward_ad as tfwd

    import ember.autograd.forward_ad as efwd

    x = RNG.normal(size=(3, 4))
    x[0, 1] = -np.inf
    t = RNG.normal(size=(3, 4))
    got = []
    for lib, fwd in ((ember, efwd), (torch, tfwd)):
        with fwd.dual_level():
            dual = fwd.make_dual(lib.tensor(x), lib.tensor(t))
            got.append(np.asarray(fwd.unpack_dual(lib.logcumsumexp(dual, 1)).tangent))
    np.testing.assert_allclose(got[0], got[1], rtol=1e-12, atol=1e-12)


def test_as_strided_scatter_base_gradient_where_torch_is_wrong():
    # PyTorch 2.13 masks the base's gradient where the view is NOT written (its own gradcheck fails);
    # the base's gradient is the cotangent outside the written view, zero inside it.
    src, base_values = RNG.normal(size=(2, 2)), RNG.normal(size=(4, 3))
    t_base = torch.tensor(base_values, requires_grad=True)
    assert not torch.autograd.gradcheck(lambda b: torch.as_strided_scatter(b, torch.tensor(src), (2, 2), (3, 1), 1),
                                        (t_base,), raise_exception=False)
    base = ember.tensor(base_values, requires_grad=True)
    s = ember.tensor(src, requires_grad=True)
    assert ember.autograd.gradcheck(lambda b, v: ember.as_strided_scatter(b, v, (2, 2), (3, 1), 1), (base, s))
    (g,) = ember.autograd.grad(ember.as_strided_scatter(base, s, (2, 2), (3, 1), 1).sum(), base)
    want = np.ones((4, 3))
    want.reshape(-1)[[1, 2, 4, 5]] = 0
    np.testing.assert_array_equal(g.numpy(), want)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("which", ["both", "self", "values"])
def test_index_put_forward_ad_with_repeated_indices(accumulate, which):
    # The tangent came from a double backward, which adds every repeated index's tangent even
    # without accumulate; index_put_ is linear, so its tangent is the same put of the tangents.
    import torch.autograd.forward_ad as tfwd

    import ember.autograd.forward_ad as efwd

    x, tx = np.arange(20.0).reshape(4, 5), RNG.normal(size=(4, 5))
    v, tv = np.arange(5.0) + 100, RNG.normal(size=5)
    got = []
    for lib, fwd in ((ember, efwd), (torch, tfwd)):
        with fwd.dual_level():
            xs = lib.tensor(x) if which == "values" else fwd.make_dual(lib.tensor(x), lib.tensor(tx))
            vs = lib.tensor(v) if which == "self" else fwd.make_dual(lib.tensor(v), lib.tensor(tv))
            y = xs.clone()
            y.index_put_((lib.tensor([1, 1, 3]),), vs, accumulate=accumulate)
            got.append(np.asarray(fwd.unpack_dual(y).tangent))
    np.testing.assert_allclose(got[0], got[1], rtol=1e-12)


# -- the norms' second derivatives through forward AD (issue 17, session 4) -------------------------
# The truth is PyTorch's reverse over reverse: its own jacrev(jacfwd(f)) differs for layer and batch
# norm (docs/deviations.md); ember's jacfwd(jacrev(f)) raised, its jacrev(jacfwd(f)) was wrong.
_NORMS = {
    "layer_norm": lambda m, x, w: m.nn.functional.layer_norm(x, [4], w, None),
    "group_norm": lambda m, x, w: m.nn.functional.group_norm(x, 3, w[:3], None),
    "batch_norm": lambda m, x, w: m.nn.functional.batch_norm(x, None, None, w[:3], training=True),
}


@pytest.mark.parametrize("norm", sorted(_NORMS))
def test_norm_hessians_through_forward_ad(norm):
    x, w = RNG.normal(size=(2, 3, 4)), RNG.normal(size=4)

    def fn(m):
        wt = m.tensor(w)
        return lambda t: _NORMS[norm](m, t, wt).sin().sum()

    truth = torch.func.jacrev(torch.func.jacrev(fn(torch)))(torch.tensor(x)).numpy()
    ex = ember.tensor(x)
    for hess in (ember.func.jacfwd(ember.func.jacrev(fn(ember)))(ex),
                 ember.func.jacrev(ember.func.jacfwd(fn(ember)))(ex)):
        np.testing.assert_allclose(np.asarray(hess), truth, rtol=1e-9, atol=1e-10)


def test_cholesky_inverse_tangent_is_the_derivative():
    # PyTorch's cholesky_inverse_jvp disagrees with finite differences; ember's tangent agrees.
    import ember.autograd.forward_ad as fwd

    low = np.tril(RNG.normal(size=(4, 4))) + 3 * np.eye(4)
    dl = np.tril(RNG.normal(size=(4, 4)))
    with fwd.dual_level():
        tangent = fwd.unpack_dual(ember.cholesky_inverse(fwd.make_dual(ember.tensor(low), ember.tensor(dl)))).tangent
    eps = 1e-6
    fd = (torch.cholesky_inverse(torch.tensor(low + eps * dl)) - torch.cholesky_inverse(torch.tensor(low - eps * dl)))
    np.testing.assert_allclose(np.asarray(tangent.detach()), fd.numpy() / (2 * eps), rtol=1e-6, atol=1e-8)

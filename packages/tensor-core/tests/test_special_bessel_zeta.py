"""ember.special's Bessel, Airy, erfcx, log_ndtr and zeta functions against torch.special (and
mpmath where torch's approximations are the less accurate side), with gradients."""

import mpmath
import numpy as np
import pytest
import torch

import ember

UNARY = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "erfcx", "i0e", "i1e", "log_ndtr",
         "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
         "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0"]
POINTS = [-40.0, -12.5, -5.0, -1.0, -0.3, 0.0, 1e-3, 0.4, 1.0, 2.5, 7.0, 19.0, 30.0, 120.0, 600.0, 800.0,
          float("nan"), float("inf"), -float("inf")]

MP = {
    "airy_ai": mpmath.airyai, "bessel_j0": lambda x: mpmath.besselj(0, x), "bessel_j1": lambda x: mpmath.besselj(1, x),
    "bessel_y0": lambda x: mpmath.bessely(0, x), "bessel_y1": lambda x: mpmath.bessely(1, x),
    "modified_bessel_k0": lambda x: mpmath.besselk(0, x), "modified_bessel_k1": lambda x: mpmath.besselk(1, x),
    "erfcx": lambda x: mpmath.exp(x * x) * mpmath.erfc(x),
    "log_ndtr": lambda x: mpmath.log(mpmath.erfc(-x / mpmath.sqrt(2)) / 2) if x < 0 else mpmath.log1p(
        -mpmath.erfc(x / mpmath.sqrt(2)) / 2),
}


@pytest.mark.parametrize("name", UNARY)
def test_float64_values_match_torch(name):
    x = np.array(POINTS)
    got = getattr(ember.special, name)(ember.tensor(x)).numpy()
    want = getattr(torch.special, name)(torch.tensor(x)).numpy()
    # torch's Bessel J/Y are accurate to ~1e-8 relative only: ember's (libstdc++) are checked
    # against mpmath below.
    atol = 1e-7 if name.startswith(("bessel_j", "bessel_y")) else 1e-300
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=atol, equal_nan=True)


@pytest.mark.parametrize("name", sorted(MP))
def test_float64_values_are_accurate(name):
    xs = [x for x in (0.05, 0.4, 1.0, 2.5, 5.0, 7.0, 19.0, 30.0) if name != "log_ndtr" or True]
    xs += [-0.4, -2.5, -7.0, -30.0] if name in ("airy_ai", "bessel_j0", "bessel_j1", "erfcx", "log_ndtr") else []
    got = getattr(ember.special, name)(ember.tensor(xs, dtype=ember.float64)).numpy()
    mpmath.mp.dps = 40
    want = np.array([float(MP[name](mpmath.mpf(x))) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_dtypes_and_layouts_match_torch(name, dtype):
    r = np.random.default_rng(3)
    base = r.uniform(0.1, 6, size=(4, 5)) if dtype != "int64" else r.integers(1, 6, size=(4, 5))
    e, t = ember.tensor(base).to(getattr(ember, dtype)), torch.tensor(base).to(getattr(torch, dtype))
    for ee, tt in ((e, t), (e.t(), t.t()), (e[1:, ::2], t[1:, ::2])):
        got, want = getattr(ember.special, name)(ee), getattr(torch.special, name)(tt)
        assert str(got.dtype) == str(want.dtype).replace("torch", "ember")
        atol = 1e-6 if name.startswith(("bessel_j", "bessel_y")) else 1e-30  # torch's float32 J/Y: ~1e-7 abs
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2e-6, atol=atol)
    out = ember.empty(0, dtype=got.dtype)
    getattr(ember.special, name)(e, out=out)
    assert out.shape == e.shape


@pytest.mark.parametrize("name", ["erfcx", "i0e", "i1e", "log_ndtr"])
def test_gradients_match_torch(name):
    x = np.array([-12.0, -3.0, -0.5, 0.0, 0.25, 1.0, 4.0, 30.0])
    e = ember.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    (ge,) = ember.autograd.grad(getattr(ember.special, name)(e).sum(), e)
    (gt,) = torch.autograd.grad(getattr(torch.special, name)(t).sum(), t)
    np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-9, atol=1e-12)
    assert ember.autograd.gradcheck(getattr(ember.special, name), (ember.tensor(x[1:-1], requires_grad=True),))


@pytest.mark.parametrize("name", ["bessel_j0", "airy_ai", "modified_bessel_k1", "spherical_bessel_j0"])
def test_non_differentiable_as_in_torch(name):
    y = getattr(ember.special, name)(ember.tensor([0.5, 1.0], requires_grad=True))
    assert not y.requires_grad and y.grad_fn is None


def test_zeta_matches_torch_with_edge_cases_and_gradient():
    x = [1.0, 0.5, 2.0, 2.0, 2.0, 3.0, 4.5, 1.1, 2.0, 6.0]
    q = [1.0, 1.0, 0.0, -1.0, -1.5, -1.5, 0.3, 1e9, 1e-3, 50.0]
    got = ember.special.zeta(ember.tensor(x, dtype=ember.float64), ember.tensor(q, dtype=ember.float64))
    want = torch.special.zeta(torch.tensor(x, dtype=torch.float64), torch.tensor(q, dtype=torch.float64))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, equal_nan=True)
    # Python-number operands and broadcasting, as in torch.
    np.testing.assert_allclose(ember.special.zeta(2.0, ember.tensor([1.0, 2.0])).numpy(),
                               torch.special.zeta(2.0, torch.tensor([1.0, 2.0])).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ember.special.zeta(ember.tensor([[2.0], [3.0]]), 1).numpy(),
                               torch.special.zeta(torch.tensor([[2.0], [3.0]]), 1).numpy(), rtol=1e-6, atol=1e-6)
    qe = ember.tensor([0.5, 1.5, 4.0], dtype=ember.float64, requires_grad=True)
    qt = torch.tensor([0.5, 1.5, 4.0], dtype=torch.float64, requires_grad=True)
    (ge,) = ember.autograd.grad(ember.special.zeta(ember.tensor(3.0, dtype=ember.float64), qe).sum(), qe)
    (gt,) = torch.autograd.grad(torch.special.zeta(torch.tensor(3.0, dtype=torch.float64), qt).sum(), qt)
    np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-12)
    xe = ember.tensor([3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="not implemented"):
        ember.special.zeta(xe, ember.tensor([1.0])).sum().backward()


@pytest.mark.parametrize("name", UNARY + ["zeta"])
def test_half_types_raise_as_in_torch(name):
    args = (ember.ones(2, dtype=ember.float16),) * (2 if name == "zeta" else 1)
    targs = (torch.ones(2, dtype=torch.float16),) * len(args)
    if name in ("i0e", "i1e"):
        got, want = getattr(ember.special, name)(*args), getattr(torch.special, name)(*targs)
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-3)
        return
    with pytest.raises(NotImplementedError) as err:
        getattr(torch.special, name)(*targs)
    with pytest.raises(NotImplementedError, match=str(err.value).replace("'", ".")):
        getattr(ember.special, name)(*args)


def test_bad_inputs_raise_torch_types():
    with pytest.raises(TypeError):
        ember.special.bessel_j0([1.0])
    with pytest.raises(TypeError):
        torch.special.bessel_j0([1.0])
    with pytest.raises(TypeError):
        ember.special.zeta(2.0, 3.0)

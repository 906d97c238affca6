"""Backward through complex tensors (PyTorch's convention: the gradient of a real loss L is
conj(dL/dz*) * 2 ... as torch.autograd computes it) against PyTorch, and finite differences of
the real and imaginary parts for the same gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _data(shapes, real, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i, s in enumerate(shapes):
        a = rng.standard_normal(s)
        out.append(a if i in real else a + 1j * rng.standard_normal(s))
    return out


def _loss(lib, y):
    # A real loss that weights every element's real and imaginary part differently.
    if y.is_complex():
        w = lib.arange(y.numel(), dtype=lib.float64).reshape(y.shape) * 0.1 + 1
        return (lib.view_as_real(y * 1).pow(2).sum(-1) * w).sum() + (y.real * 0.5).sum()
    return (y * y).sum()


def _grads(lib, fn, arrays):
    leaves = [lib.tensor(a).requires_grad_() for a in arrays]
    _loss(lib, fn(lib, *leaves)).backward()
    return [leaf.grad.resolve_conj().detach().numpy() for leaf in leaves]


CASES = {
    "add_sub": (lambda lib, a, b: a + b - 2 * a, [(3, 4), (3, 4)]),
    "mul_broadcast": (lambda lib, a, b: a * b, [(3, 4), (4,)]),
    "div": (lambda lib, a, b: a / (b + 3), [(3, 4), (3, 4)]),
    "neg_conj": (lambda lib, a, b: -a.conj() * b, [(3, 4), (3, 4)]),
    "conj_physical": (lambda lib, a, b: lib.conj_physical(a) + b, [(2, 3), (2, 3)]),
    "abs": (lambda lib, a, b: (a * b).abs(), [(3, 4), (3, 4)]),
    "angle": (lambda lib, a, b: (a + b).angle(), [(3, 4), (3, 4)]),
    "real_imag": (lambda lib, a, b: a.real * 2 + (a * b).imag, [(3, 4), (3, 4)]),
    "view_as_real": (lambda lib, a, b: lib.view_as_real(a * b) * 3, [(3, 4), (3, 4)]),
    "view_as_complex": (lambda lib, a, b: lib.view_as_complex(lib.view_as_real(a) * 2) * b, [(3, 4), (3, 4)]),
    "exp_log": (lambda lib, a, b: a.exp() + (b * b + 1).log(), [(3, 4), (3, 4)]),
    "sqrt_pow_recip": (lambda lib, a, b: (a * a + 2).sqrt() + b.pow(3) + (b + 3).reciprocal(), [(2, 3), (2, 3)]),
    "trig": (lambda lib, a, b: a.sin() * b.cos() + a.tanh() + b.sigmoid(), [(2, 3), (2, 3)]),
    "sum_mean": (lambda lib, a, b: a.sum(0) * b.mean(), [(3, 4), (3, 4)]),
    "prod_cumsum": (lambda lib, a, b: a.prod(1) + b.cumsum(1)[:, -1], [(3, 4), (3, 4)]),
    "matmul": (lambda lib, a, b: a @ b, [(3, 4), (4, 2)]),
    "batched_matmul": (lambda lib, a, b: a @ b, [(2, 3, 4), (2, 4, 2)]),
    "matvec": (lambda lib, a, b: lib.mv(a, b), [(3, 4), (4,)]),
    "views": (lambda lib, a, b: a.reshape(-1)[2:8].view(2, 3) * b.t().unsqueeze(0).squeeze(0)[1:3, :3],
              [(3, 4), (4, 3)]),
    "index_cat": (lambda lib, a, b: lib.cat([a[[0, 2]], b[1:]], 0).flip(0), [(3, 4), (3, 4)]),
    "where": (lambda lib, a, b: lib.where(a.real > 0, a, b), [(3, 4), (3, 4)]),
    "var_std": (lambda lib, a, b: a.var() + b.std(1) + lib.var_mean(a, 0)[0].sum(), [(3, 4), (3, 4)]),
    "norms": (lambda lib, a, b: lib.linalg.vector_norm(a) + lib.linalg.vector_norm(b, 3, dim=0).sum()
              + lib.linalg.vector_norm(a, 1) + lib.linalg.vector_norm(b, float("inf")), [(3, 4), (3, 4)]),
    "fft": (lambda lib, a, b: lib.fft.fft(a, dim=0) + lib.fft.ifft2(b), [(4, 4), (4, 4)]),
    "fftn_norm": (lambda lib, a, b: lib.fft.fftn(a, norm="ortho") * b, [(4, 3), (4, 3)]),
    "irfft": (lambda lib, a, b: lib.fft.irfft(a, n=6) + lib.fft.hfft(b, n=6), [(3, 4), (3, 4)]),
}

REAL_INPUT_CASES = {
    "real_times_complex": (lambda lib, x, z: x * z, [(3, 4), (3, 4)], (0,)),
    "complex_ctor": (lambda lib, x, y: lib.complex(x, y) * lib.complex(y, x), [(3, 4), (3, 4)], (0, 1)),
    "polar": (lambda lib, r, t: lib.polar(r.abs() + 0.5, t), [(3, 4), (3, 4)], (0, 1)),
    "python_complex_scalar": (lambda lib, x, y: x * (1 + 2j) + y, [(3, 4), (3, 4)], (0, 1)),
    "rfft": (lambda lib, x, y: lib.fft.rfft(x) * lib.fft.rfft(y), [(3, 8), (3, 8)], (0, 1)),
    "to_complex": (lambda lib, x, y: x.to(lib.complex128) * y, [(3, 4), (3, 4)], (0,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_complex_gradient_matches_torch(name):
    fn, shapes = CASES[name]
    arrays = _data(shapes, (), seed=len(name))
    expected = _grads(torch, fn, arrays)
    got = _grads(ember, fn, arrays)
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", sorted(REAL_INPUT_CASES))
def test_real_inputs_of_complex_calls(name):
    fn, shapes, real = REAL_INPUT_CASES[name]
    arrays = _data(shapes, real, seed=len(name))
    expected = _grads(torch, fn, arrays)
    got = _grads(ember, fn, arrays)
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", ["mul_broadcast", "div", "abs", "exp_log", "matmul", "fft"])
def test_gradient_is_the_conjugate_wirtinger_derivative(name):
    """Finite differences on ember alone: grad = dL/dRe(z) + i dL/dIm(z)."""
    fn, shapes = CASES[name]
    arrays = _data(shapes, (), seed=3)
    got = _grads(ember, fn, arrays)

    def loss(arrs):
        with ember.no_grad():
            return float(_loss(ember, fn(ember, *[ember.tensor(a) for a in arrs])))

    eps = 1e-6
    for k, a in enumerate(arrays):
        numeric = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            for unit in (1, 1j):
                hi = [x.copy() for x in arrays]
                lo = [x.copy() for x in arrays]
                hi[k][idx] += eps * unit
                lo[k][idx] -= eps * unit
                numeric[idx] += unit * (loss(hi) - loss(lo)) / (2 * eps)
        np.testing.assert_allclose(got[k], numeric, rtol=1e-5, atol=1e-5)


def test_inplace_on_complex():
    arrays = _data([(3, 4), (3, 4)], (), seed=1)

    def fn(lib, a, b):
        c = a * 1
        c.mul_(b)
        c[1:].add_(b[1:])
        return c

    for e, g in zip(_grads(torch, fn, arrays), _grads(ember, fn, arrays)):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-9)


def test_backward_of_a_complex_scalar_needs_a_gradient():
    z = ember.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    with pytest.raises(RuntimeError, match="real scalar outputs"):
        (z * z).sum().backward()
    out = (z * z).sum()
    out.backward(ember.tensor(1 + 0j, dtype=ember.complex128))
    t = torch.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    (t * t).sum().backward(torch.tensor(1 + 0j, dtype=torch.complex128))
    np.testing.assert_allclose(z.grad.numpy(), t.grad.numpy())


def test_op_without_a_complex_derivative_raises():
    z = ember.tensor([[1 + 2j, 3 - 1j], [0.5j, 2]], requires_grad=True)
    with pytest.raises(RuntimeError, match="for complex tensors is not implemented"):
        ember.softmax(z, 0)

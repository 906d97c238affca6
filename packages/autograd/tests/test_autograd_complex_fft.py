"""Backward formulas of the complex and FFT ops vs PyTorch's autograd.

The engine does not record complex outputs yet, so each formula is called directly on the
op's inputs and an upstream gradient and compared with the gradient PyTorch computes for
the same op (torch._fft_c2c, ...); angle/sgn of real inputs also run through the engine."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.autograd.formulas import FORMULAS, Inputs


def _complex(shape, seed, dtype=np.complex128):
    rng = np.random.default_rng(seed)
    return np.asarray(rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)


def _real(shape, seed):
    return np.random.default_rng(seed).normal(size=shape)


def _torch_grads(fn, arrays, grad):
    ts = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    out = fn(*ts)
    out.backward(torch.from_numpy(grad.copy()))
    return [t.grad for t in ts]


def _ember_grads(name, arrays, grad, extra=(), save_output=False):
    es = [ember.from_numpy(a.copy()) for a in arrays]
    args = tuple(es) + tuple(extra)
    outputs = (ember.ops[name](*args),) if save_output else ()
    result = FORMULAS[name].backward((ember.from_numpy(grad.copy()),), Inputs(args, {}), outputs)
    return [r for r in result if r is not None]


def _compare(e_grads, t_grads):
    assert len(e_grads) == len(t_grads)
    for e, t in zip(e_grads, t_grads):
        got = np.array(e.numpy(), copy=True)
        expected = t.detach().numpy()
        if not np.iscomplexobj(expected):
            got = got.real  # the engine keeps the real part for a real input
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("norm", [0, 1, 2])
@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("dim", [[0], [1], [0, 1]])
def test_c2c(norm, forward, dim):
    x, g = _complex((3, 5), 0), _complex((3, 5), 1)
    t = _torch_grads(lambda a: torch._fft_c2c(a, dim, norm, forward), [x], g)
    _compare(_ember_grads("_fft_c2c", [x], g, (dim, norm, forward)), t)


@pytest.mark.parametrize("norm", [0, 1, 2])
@pytest.mark.parametrize("shape,dim", [((4, 6), [1]), ((4, 7), [1]), ((5, 3), [0]), ((4, 6), [0, 1])])
def test_r2c(norm, shape, dim):
    x = _real(shape, 2)
    out_shape = list(shape)
    out_shape[dim[-1]] = shape[dim[-1]] // 2 + 1
    g = _complex(tuple(out_shape), 3)
    t = _torch_grads(lambda a: torch._fft_r2c(a, dim, norm, True), [x], g)
    _compare(_ember_grads("_fft_r2c", [x], g, (dim, norm, True)), t)


@pytest.mark.parametrize("norm", [0, 1, 2])
@pytest.mark.parametrize("n", [6, 7])
@pytest.mark.parametrize("dim", [[1], [0, 1]])
def test_c2r(norm, n, dim):
    x = _complex((3, n // 2 + 1), 4)
    g = _real((3, n), 5)
    t = _torch_grads(lambda a: torch._fft_c2r(a, dim, norm, n), [x], g)
    _compare(_ember_grads("_fft_c2r", [x], g, (dim, norm, n)), t)


@pytest.mark.parametrize("name,fn,save", [
    ("view_as_real", torch.view_as_real, False),
    ("conj_physical", torch.conj_physical, False),
    ("angle", torch.angle, False),
    ("sgn", torch.sgn, True),
])
def test_unary_complex(name, fn, save):
    x = _complex((2, 3), 6)
    x[0, 0] = 0  # angle and sgn: zero gradient at 0
    out = fn(torch.from_numpy(x.copy()))
    g = _complex(tuple(out.shape), 7) if out.is_complex() else _real(tuple(out.shape), 7)
    _compare(_ember_grads(name, [x], g, save_output=save), _torch_grads(fn, [x], g))


def test_view_as_complex():
    x, g = _real((3, 2), 8), _complex((3,), 9)
    _compare(_ember_grads("view_as_complex", [x], g), _torch_grads(torch.view_as_complex, [x], g))


@pytest.mark.parametrize("name,fn", [("complex", torch.complex), ("polar", torch.polar)])
def test_complex_and_polar(name, fn):
    a, b, g = np.abs(_real((4,), 10)), _real((4,), 11), _complex((4,), 12)
    _compare(_ember_grads(name, [a, b], g, save_output=name == "polar"), _torch_grads(fn, [a, b], g))


@pytest.mark.parametrize("fn", ["angle", "sgn"])
def test_real_inputs_through_the_engine(fn):
    x = _real((5,), 13)
    e = ember.from_numpy(x.copy()).requires_grad_(True)
    t = torch.from_numpy(x.copy()).requires_grad_(True)
    (getattr(ember, fn)(e) * 3).sum().backward()
    (getattr(torch, fn)(t) * 3).sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy(force=True))  # sgn: a ZeroTensor

"""Helpers of the layer tests: a torch layer and an ember layer with the same weights, run side by side."""

from __future__ import annotations

import numpy as np
import torch

import ember

_NP = {"float32": np.float32, "float64": np.float64}
TOL = {"float32": {"rtol": 1e-4, "atol": 1e-5}, "float64": {"rtol": 1e-9, "atol": 1e-10}}


def to_numpy(x) -> np.ndarray:
    return x.detach().numpy()


def from_torch(t: torch.Tensor) -> ember.Tensor:
    return ember.tensor(t.detach().numpy().copy())


def input_pair(shape, dtype: str = "float32", seed: int = 0, requires_grad: bool = True, low=-1.0, high=1.0):
    """The same random values as an ember leaf and a torch leaf."""
    data = np.random.default_rng(seed).uniform(low, high, shape).astype(_NP[dtype])
    return (ember.tensor(data.copy(), requires_grad=requires_grad),
            torch.tensor(data.copy(), requires_grad=requires_grad))


def assert_close(e, t, dtype: str | None = None, **tol) -> None:
    """An ember tensor equals a torch tensor: shape, dtype name and values."""
    assert e is not None and t is not None, (e, t)
    assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
    assert e.dtype.name == str(t.dtype).replace("torch.", ""), (e.dtype, t.dtype)
    tol = tol or TOL.get(dtype or e.dtype.name, {"rtol": 0, "atol": 0})
    np.testing.assert_allclose(to_numpy(e), to_numpy(t), **tol)


def copy_state(tm: torch.nn.Module, em) -> None:
    """Copies every parameter and buffer of the torch module into the ember one (same names)."""
    e_state = dict(em.named_parameters()) | dict(em.named_buffers())
    with ember.no_grad():
        for name, value in list(tm.named_parameters()) + list(tm.named_buffers()):
            e_state[name].copy_(from_torch(value).to(e_state[name].dtype))


def make_pair(tcls, ecls, *args, dtype: str = "float32", **kwargs):
    """The torch and ember layers built from the same arguments, the ember one with torch's weights."""
    tm = tcls(*args, **kwargs).to(getattr(torch, dtype))
    em = ecls(*args, **kwargs).to(getattr(ember, dtype))
    copy_state(tm, em)
    return tm, em


def check_layer(tm, em, shape, dtype: str = "float32", seed: int = 0, forward_kwargs=None, tol=None) -> None:
    """Forward output, input grad, parameter grads and buffers of the two layers agree."""
    tol = tol or TOL[dtype]
    xe, xt = input_pair(shape, dtype, seed)
    forward_kwargs = forward_kwargs or {}
    ye, yt = em(xe, **forward_kwargs), tm(xt, **forward_kwargs)
    assert_close(ye, yt, **tol)
    ge = np.random.default_rng(seed + 1).uniform(-1, 1, tuple(yt.shape)).astype(_NP[dtype])
    ye.backward(ember.tensor(ge.copy()))
    yt.backward(torch.tensor(ge.copy()))
    assert_close(xe.grad, xt.grad, **tol)
    check_grads(tm, em, tol)
    check_buffers(tm, em, tol)


def check_grads(tm, em, tol) -> None:
    e_params = dict(em.named_parameters())
    for name, p in tm.named_parameters():
        if p.grad is None:
            assert e_params[name].grad is None, name
        else:
            assert_close(e_params[name].grad, p.grad, **tol)


def check_buffers(tm, em, tol) -> None:
    e_buffers = dict(em.named_buffers())
    assert list(e_buffers) == [n for n, _ in tm.named_buffers()]
    for name, b in tm.named_buffers():
        if b.dtype.is_floating_point:
            assert_close(e_buffers[name], b, **tol)
        else:
            assert_close(e_buffers[name], b, rtol=0, atol=0)


def check_state_dict(tm, em) -> None:
    """Same keys in the same order, same shapes and dtypes."""
    te, tt = em.state_dict(), tm.state_dict()
    assert list(te) == list(tt)
    for k in tt:
        assert tuple(te[k].shape) == tuple(tt[k].shape), k
        assert te[k].dtype.name == str(tt[k].dtype).replace("torch.", ""), k

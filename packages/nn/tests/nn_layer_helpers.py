"""Helpers of the layer tests: the same inputs for ember and torch, and module checks against torch."""

from __future__ import annotations

import numpy as np
import torch

import ember

NP_DTYPES = {"float32": np.float32, "float64": np.float64}
TOL = {"float32": {"rtol": 2e-5, "atol": 2e-6}, "float64": {"rtol": 1e-10, "atol": 1e-12}}


def to_np(x) -> np.ndarray:
    return np.array(x.detach().numpy(), copy=True)


def arrays(shape, dtype="float32", seed=0, low=-3.0, high=3.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(NP_DTYPES[dtype])


def leaf_pair(shape, dtype="float32", seed=0, low=-3.0, high=3.0, layout="contiguous", requires_grad=True):
    """(ember view, torch view, ember leaf, torch leaf) of the same values.

    layout "transposed" swaps the last two dims in memory, "sliced" takes every other row of dim 0;
    gradients land on the leaves (the contiguous bases).
    """
    shape = tuple(shape)
    if layout == "transposed" and len(shape) >= 2:
        base = arrays(shape[:-2] + (shape[-1], shape[-2]), dtype, seed, low, high)
    elif layout == "sliced" and len(shape) >= 1:
        base = arrays((2 * shape[0],) + shape[1:], dtype, seed, low, high)
    else:
        layout = "contiguous"
        base = arrays(shape, dtype, seed, low, high)
    el = ember.tensor(base.copy(), requires_grad=requires_grad)
    tl = torch.tensor(base.copy(), requires_grad=requires_grad)
    if layout == "transposed":
        e, t = el.transpose(-1, -2), tl.transpose(-1, -2)
    elif layout == "sliced":
        e, t = el[::2], tl[::2]
    else:
        e, t = el, tl
    return e, t, el, tl


def assert_close(e, t, dtype=None, rtol=None, atol=None) -> None:
    """An ember tensor equals a torch tensor in shape, dtype and values."""
    assert isinstance(e, ember.Tensor), type(e)
    assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
    assert e.dtype.name == str(t.dtype).replace("torch.", ""), (e.dtype, t.dtype)
    tol = TOL.get(dtype or e.dtype.name, TOL["float32"])
    np.testing.assert_allclose(to_np(e), t.detach().numpy(), rtol=rtol if rtol is not None else tol["rtol"],
                               atol=atol if atol is not None else tol["atol"])


def copy_params(e_mod, t_mod) -> None:
    """Copies the torch module's parameters and buffers into the ember module."""
    t_state = t_mod.state_dict()
    e_state = {k: ember.tensor(v.detach().numpy().copy()) for k, v in t_state.items()}
    e_mod.load_state_dict(e_state)


def check_module(e_mod, t_mod, e_inputs, t_inputs, e_leaves=None, t_leaves=None, dtype="float32", seed=1,
                 rtol=None, atol=None) -> None:
    """Forward outputs, gradients of the leaves and of every parameter equal torch's."""
    e_out = e_mod(*e_inputs)
    t_out = t_mod(*t_inputs)
    assert_close(e_out, t_out, dtype, rtol, atol)
    e_leaves = list(e_inputs if e_leaves is None else e_leaves)
    t_leaves = list(t_inputs if t_leaves is None else t_leaves)
    e_params = [p for _, p in e_mod.named_parameters()]
    t_params = [p for _, p in t_mod.named_parameters()]
    e_wrt = [x for x in e_leaves if x.requires_grad] + e_params
    t_wrt = [x for x in t_leaves if x.requires_grad] + t_params
    if not t_out.requires_grad or not t_wrt:
        return
    w = arrays(tuple(t_out.shape), str(t_out.dtype).replace("torch.", ""), seed, -1.0, 1.0)
    e_grads = ember.autograd.grad((e_out * ember.tensor(w.copy())).sum(), e_wrt, allow_unused=True)
    t_grads = torch.autograd.grad((t_out * torch.tensor(w.copy())).sum(), t_wrt, allow_unused=True)
    for eg, tg in zip(e_grads, t_grads):
        if tg is None:
            assert eg is None or not bool((eg != 0).any())
            continue
        assert eg is not None
        assert_close(eg, tg, dtype, rtol, atol)


def check_state(e_mod, t_mod) -> None:
    """Same repr (dtype names aside), state_dict keys and shapes, parameter names."""
    assert repr(e_mod) == repr(t_mod).replace("torch.", "ember.")
    e_sd, t_sd = e_mod.state_dict(), t_mod.state_dict()
    assert list(e_sd) == list(t_sd)
    for k in t_sd:
        assert tuple(e_sd[k].shape) == tuple(t_sd[k].shape), k
    assert [n for n, _ in e_mod.named_parameters()] == [n for n, _ in t_mod.named_parameters()]
    assert [n for n, _ in e_mod.named_buffers()] == [n for n, _ in t_mod.named_buffers()]

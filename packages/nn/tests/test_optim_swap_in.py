"""optim.swap_in_optimizer_params_and_state against PyTorch: the step acts on the swapped-in
tensors, in-place state edits reach the caller's dict, and the live optimizer comes back."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _run(lib):
    lib.manual_seed(0)
    model = lib.nn.Linear(3, 2)
    with lib.no_grad():
        model.weight.copy_(lib.tensor(np.arange(6.0).reshape(2, 3) / 10, dtype=lib.float32))
        model.bias.fill_(0.5)
    opt = lib.optim.Adam(model.parameters(), lr=0.1)
    model(lib.ones(4, 3)).sum().backward()
    opt.step()
    live_w = model.weight.detach().clone()
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in params.values():
        p.grad = lib.ones_like(p)
    osd = opt.state_dict()
    osd = {"state": {k: {s: (v.clone() if isinstance(v, lib.Tensor) else v) for s, v in st.items()}
                     for k, st in osd["state"].items()},
           "param_groups": [dict(g) for g in osd["param_groups"]]}
    with lib.optim.swap_in_optimizer_params_and_state(opt, params, osd):
        assert opt.param_groups[0]["params"][0] is params["weight"]
        opt.step()
    assert opt.param_groups[0]["params"][0] is model.weight
    assert lib.equal(model.weight.detach(), live_w)
    return (params["weight"].numpy(), params["bias"].numpy(), osd["state"][0]["exp_avg"].numpy(),
            opt.state[model.weight]["exp_avg"].numpy())


def test_swap_in_matches_torch():
    for e, t in zip(_run(ember), _run(torch)):
        np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-7)


def test_swap_in_checks_the_parameter_count():
    p = ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError):
        with ember.optim.swap_in_optimizer_params_and_state(opt, {}, opt.state_dict()):
            pass
    assert opt.param_groups[0]["params"][0] is p


def test_autograd_names():
    assert ember.autograd.is_view_replay_enabled() is False
    assert ember.autograd.SavedTensor is type(ember.autograd.graph.SavedTensor.__new__(ember.autograd.SavedTensor))
    p = ember.zeros(2, 3).requires_grad_()
    with ember.autograd.enforce_grad_layout_policy(False):
        from ember.autograd.grad_mode import _grad_layout_enforced

        assert not _grad_layout_enforced()
        (p * 2).sum().backward()
    assert _grad_layout_enforced()
    np.testing.assert_allclose(p.grad.numpy(), 2.0)

"""Every optimizer against PyTorch: same model, same initial weights, 25 steps, same weights."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from optim_helpers import (
    assert_params_close,
    assert_same_trajectory,
    model_arrays,
    pair,
    to_ember,
    torch,
    train,
)

import ember
import ember.optim

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.02, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, maximize=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("Adam", dict(lr=0.01, betas=(0.3, 0.5))),  # lerp weight 1 - beta1 >= 0.5: PyTorch's other form
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.05, maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, centered=True, momentum=0.9, weight_decay=0.01)),
    ("RMSprop", dict(lr=0.005, centered=True, maximize=True)),
    ("RMSprop", dict(lr=0.005, momentum=0.5)),
    ("RMSprop", dict(lr=0.005, alpha=0.4, centered=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, weight_decay=0.01, eps=1e-8)),
    ("Adagrad", dict(lr=0.05, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.01, maximize=True)),
    ("Adamax", dict(lr=0.01)),
    ("Adamax", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.01, maximize=True)),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01, momentum_decay=0.01, weight_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.05, decoupled_weight_decay=True, maximize=True)),
    ("Rprop", dict(lr=0.01)),
    ("Rprop", dict(lr=0.005, etas=(0.3, 1.5), step_sizes=(1e-4, 0.02), maximize=True)),
    ("ASGD", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=5, weight_decay=0.01, maximize=True)),
    ("Adafactor", dict(lr=0.01)),
    (
        "Adafactor",
        dict(lr=0.05, beta2_decay=-0.5, eps=(1e-20, 1e-2), d=0.9 + 0.2, weight_decay=0.01, maximize=True),
    ),
    ("RAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01, weight_decay=0.01)),
    ("RAdam", dict(lr=0.01, betas=(0.9, 0.9), weight_decay=0.05, decoupled_weight_decay=True, maximize=True)),
]


def _ids(case):
    name, kwargs = case
    return name + "-" + "-".join(f"{k}={v}" for k, v in kwargs.items())


def run_both(name, kwargs, dtype="float64", steps=25, make_kwargs=None):
    ours, theirs = pair(dtype=dtype)
    ours_kwargs = make_kwargs(ember) if make_kwargs else kwargs
    theirs_kwargs = make_kwargs(torch) if make_kwargs else kwargs
    opt_ours = getattr(ember.optim, name)(ours.params, **ours_kwargs)
    opt_theirs = getattr(torch.optim, name)(theirs.params, **theirs_kwargs)
    return (ours, opt_ours, train(ours, opt_ours, steps)), (
        theirs,
        opt_theirs,
        train(theirs, opt_theirs, steps),
    )


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_trajectory_float64(case):
    (_, _, ours), (_, _, theirs) = run_both(*case)
    assert_same_trajectory(ours, theirs)


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
        ("Adam", dict(lr=0.01, amsgrad=True)),
        ("NAdam", dict(lr=0.01)),
        ("RMSprop", dict(lr=0.01, centered=True)),
    ],
)
def test_trajectory_float32(name, kwargs):
    (_, _, ours), (_, _, theirs) = run_both(name, kwargs, dtype="float32")
    assert_same_trajectory(ours, theirs, dtype="float32")


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad", "RAdam"])
def test_tensor_lr(name):
    # A float64 0-d tensor lr: the scalar arithmetic then agrees with PyTorch's to the bit.
    (_, opt, ours), (_, _, theirs) = run_both(
        name, None, make_kwargs=lambda lib: dict(lr=lib.tensor(0.01, dtype=lib.float64))
    )
    assert_same_trajectory(ours, theirs)
    assert isinstance(opt.param_groups[0]["lr"], ember.Tensor)


def test_tensor_betas():
    (_, _, ours), (_, _, theirs) = run_both(
        "Adam",
        None,
        make_kwargs=lambda lib: dict(
            lr=0.01, betas=(lib.tensor(0.8, dtype=lib.float64), lib.tensor(0.99, dtype=lib.float64))
        ),
    )
    assert_same_trajectory(ours, theirs)


@pytest.mark.parametrize("name", ["SGD", "Adam", "Adagrad", "NAdam"])
def test_param_groups_with_own_options(name):
    ours, theirs = pair()

    def groups(params):
        return [{"params": params[:2]}, {"params": params[2:], "lr": 0.003, "weight_decay": 0.1}]

    opt_ours = getattr(ember.optim, name)(groups(ours.params), lr=0.02)
    opt_theirs = getattr(torch.optim, name)(groups(theirs.params), lr=0.02)
    assert_same_trajectory(train(ours, opt_ours, 15), train(theirs, opt_theirs, 15))
    assert opt_ours.param_groups[1]["lr"] == 0.003 and opt_ours.param_groups[0]["weight_decay"] == 0


def test_params_without_grad_are_skipped():
    ours, theirs = pair()
    opt_ours = ember.optim.Adam(ours.params, lr=0.01)
    opt_theirs = torch.optim.Adam(theirs.params, lr=0.01)
    for model, opt in ((ours, opt_ours), (theirs, opt_theirs)):
        for _ in range(5):
            opt.zero_grad()
            model.loss().backward()
            model.params[3].grad = None  # b2 gets no update and no state
            opt.step()
    assert_params_close(ours, theirs)
    assert len(opt_ours.state) == 3 and ours.params[3] not in opt_ours.state


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("history_size", [100, 3])
def test_lbfgs(line_search_fn, history_size):
    ours, theirs = pair(model_arrays(seed=1))
    kwargs = dict(lr=1 if line_search_fn else 0.2, max_iter=8, history_size=history_size)
    opt_ours = ember.optim.LBFGS(ours.params, line_search_fn=line_search_fn, **kwargs)
    opt_theirs = torch.optim.LBFGS(theirs.params, line_search_fn=line_search_fn, **kwargs)
    for k in range(4):
        loss_ours = opt_ours.step(ours.closure(opt_ours))
        loss_theirs = opt_theirs.step(theirs.closure(opt_theirs))
        assert loss_ours.item() == pytest.approx(loss_theirs.item(), rel=1e-9)
        # Dozens of inner iterations per step and curvature products: rounding grows a little.
        assert_params_close(ours, theirs, where=f"after step {k}", rtol=1e-8, atol=1e-10)
    state_ours = opt_ours.state[ours.params[0]]
    state_theirs = opt_theirs.state[theirs.params[0]]
    assert state_ours["func_evals"] == state_theirs["func_evals"]
    assert state_ours["n_iter"] == state_theirs["n_iter"]
    assert len(state_ours["old_dirs"]) == len(state_theirs["old_dirs"])


def test_lbfgs_resumes_from_a_pytorch_state_dict():
    ours, theirs = pair(model_arrays(seed=1))
    kwargs = dict(max_iter=5, history_size=4, line_search_fn="strong_wolfe")
    opt_theirs = torch.optim.LBFGS(theirs.params, **kwargs)
    opt_theirs.step(theirs.closure(opt_theirs))
    with ember.no_grad():
        for p, a in zip(ours.params, theirs.arrays()):
            p.copy_(ember.tensor(a, dtype=p.dtype))
    opt_ours = ember.optim.LBFGS(ours.params, **kwargs)
    opt_ours.load_state_dict(to_ember(copy.deepcopy(opt_theirs.state_dict())))
    for k in range(2):
        opt_ours.step(ours.closure(opt_ours))
        opt_theirs.step(theirs.closure(opt_theirs))
        assert_params_close(ours, theirs, where=f"after step {k}", rtol=1e-8, atol=1e-10)


def test_lbfgs_stops_at_a_minimum():
    # A quadratic: the first evaluation already meets tolerance_grad once converged.
    w = ember.tensor([3.0, -1.0], dtype=ember.float64, requires_grad=True)
    opt = ember.optim.LBFGS([w], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((w - 1.0) ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    assert w.detach().numpy().tolist() == pytest.approx([1.0, 1.0], abs=1e-8)
    evals = opt.state[w]["func_evals"]
    opt.step(closure)
    assert opt.state[w]["func_evals"] == evals + 1


def test_closure_returns_loss_and_runs_with_grad():
    ours, _ = pair()
    opt = ember.optim.SGD(ours.params, lr=0.1)
    seen = []

    def closure():
        seen.append(ember.is_grad_enabled())
        opt.zero_grad()
        loss = ours.loss()
        loss.backward()
        return loss

    with ember.no_grad():
        loss = opt.step(closure)
    assert seen == [True] and loss.item() > 0
    assert ours.params[0].grad_fn is None and ours.params[0].is_leaf


def test_adafactor_factors_the_last_two_dims_of_a_3d_parameter():
    start = np.random.default_rng(3).standard_normal((2, 3, 4))
    results = []
    for lib in (ember, torch):
        w = lib.tensor(start, dtype=lib.float64).requires_grad_(True)
        opt = lib.optim.Adafactor([w], lr=0.05)
        for _ in range(6):
            opt.zero_grad()
            ((w**3).sum() + (w * w).mean()).backward()
            opt.step()
        results.append((w.detach().numpy().copy(), tuple(opt.state[w]["row_var"].shape)))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-10, atol=1e-12)
    assert results[0][1] == results[1][1] == (2, 3, 1)


@pytest.mark.parametrize(
    "kwargs",
    [dict(lr=0.02), dict(lr=0.01, nesterov=False, weight_decay=0.05, adjust_lr_fn="match_rms_adamw")],
)
def test_muon_on_the_weight_matrices(kwargs):
    # Muon orthogonalises in bfloat16; the matrices (not the biases) are optimised.
    ours, theirs = pair(dtype="float32")
    opt_ours = ember.optim.Muon([ours.params[0], ours.params[2]], **kwargs)
    opt_theirs = torch.optim.Muon([theirs.params[0], theirs.params[2]], **kwargs)
    assert_same_trajectory(train(ours, opt_ours, 15), train(theirs, opt_theirs, 15), dtype="float32")


def test_muon_rejects_what_pytorch_rejects():
    ours, _ = pair()
    with pytest.raises(
        ValueError, match=r"Muon only supports 2D parameters whereas we found a parameter with size"
    ):
        ember.optim.Muon(ours.params)
    with pytest.raises(ValueError, match="Adjust learning rate function bad is not supported"):
        ember.optim.Muon(ours.params[:1], adjust_lr_fn="bad")


def _sparse_grad_step(lib, name):
    emb = lib.nn.Embedding(4, 2, sparse=True)
    opt = getattr(lib.optim, name)(emb.parameters(), lr=0.1)
    emb(lib.tensor([1, 3])).sum().backward()
    try:
        opt.step()
        return "ok"
    except Exception as e:  # noqa: BLE001 - the outcome is compared
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop", "Adamax", "ASGD", "NAdam", "RAdam", "Rprop",
                                  "Adadelta", "SGD", "Adagrad"])
def test_sparse_gradients_refused_as_pytorch(name):
    # Adam reached a sparse kernel's NotImplementedError ("Could not run 'aten::lerp_' ..."), the
    # others their own failures; PyTorch names the optimizer (SGD and Adagrad take sparse grads).
    assert _sparse_grad_step(ember, name) == _sparse_grad_step(torch, name)


def test_adam_tensor_lr_with_foreach_refused():
    for lib in (torch, ember):
        with pytest.raises(ValueError, match="lr as a Tensor is not supported for capturable=False and foreach=True"):
            lib.optim.Adam([lib.nn.Parameter(lib.ones(1))], lr=lib.tensor(0.01), foreach=True)
    opt = ember.optim.Adam([ember.nn.Parameter(ember.ones(1))], lr=ember.tensor(0.01))
    opt.param_groups[0]["foreach"] = True
    with pytest.raises(RuntimeError, match="lr as a Tensor is not supported"):
        opt.step()

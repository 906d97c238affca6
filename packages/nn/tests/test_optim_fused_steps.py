"""The fused/foreach Adam, AdamW and SGD paths (one native pass over all params) against PyTorch's.

Whole trajectories of ember's optimizers are compared with torch's ``foreach=True`` and
``fused=True`` variants over the flags PyTorch accepts, and the ops themselves
(``ember._fused_adam_``/``_fused_adamw_``/``_fused_sgd_``) with ``torch._fused_*_`` on the same
lists, including the layouts the native pass does not take (its per-tensor fallback).
"""

from __future__ import annotations

import numpy as np
import pytest
from optim_helpers import TOLERANCES, assert_params_close, pair

import ember

torch = pytest.importorskip("torch")

ADAM_CASES = [
    dict(lr=0.01),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True, weight_decay=0.1),
    dict(lr=0.02, maximize=True),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, amsgrad=True, maximize=True, weight_decay=0.05),
    dict(lr=0.01, capturable=False),
]
SGD_CASES = [
    dict(lr=0.05),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    dict(lr=0.05, momentum=0.5, maximize=True),
]
CASES = ([("Adam", c) for c in ADAM_CASES] + [("AdamW", c) for c in ADAM_CASES]
         + [("SGD", c) for c in SGD_CASES])


def _trajectory(name, kwargs, flag, dtype, steps=6):
    ours, theirs = pair(dtype=dtype)
    opt_e = getattr(ember.optim, name)(ours.params, **kwargs, **{flag: True})
    opt_t = getattr(torch.optim, name)(theirs.params, **kwargs, **{flag: True})
    for k in range(steps):
        opt_e.step(ours.closure(opt_e))
        opt_t.step(theirs.closure(opt_t))
        assert_params_close(ours, theirs, dtype, where=f"after step {k}")
    return opt_e, opt_t


@pytest.mark.parametrize("flag", ["foreach", "fused"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_trajectory_matches_torch(name, kwargs, flag):
    opt_e, opt_t = _trajectory(name, kwargs, flag, "float64")
    # The state PyTorch keeps (step counters, moments, momentum buffers) matches too.
    for pe, pt in zip(opt_e.param_groups[0]["params"], opt_t.param_groups[0]["params"]):
        se, st = opt_e.state[pe], opt_t.state[pt]
        assert set(se) == set(st)
        for key in st:
            np.testing.assert_allclose(np.asarray(se[key]), st[key].numpy(), **TOLERANCES["float64"])


@pytest.mark.parametrize("name,kwargs", [("Adam", ADAM_CASES[2]), ("AdamW", ADAM_CASES[4]), ("SGD", SGD_CASES[3])])
def test_trajectory_float32(name, kwargs):
    _trajectory(name, kwargs, "fused", "float32")


def test_default_flags_match_the_for_loop():
    # foreach=None/fused=None (PyTorch's for-loop on the CPU) runs ember's native pass: same equations.
    ours, theirs = pair()
    opt_e = ember.optim.AdamW(ours.params, lr=0.01, amsgrad=True)
    opt_t = torch.optim.AdamW(theirs.params, lr=0.01, amsgrad=True)
    for _ in range(10):
        opt_e.step(ours.closure(opt_e))
        opt_t.step(theirs.closure(opt_t))
    assert_params_close(ours, theirs, where="after 10 steps")


@pytest.mark.parametrize("name", ["Adam", "AdamW", "SGD"])
def test_flag_errors_match_torch(name):
    p = ember.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="cannot be `True` together"):
        getattr(ember.optim, name)([p], lr=0.1, fused=True, foreach=True)
    with pytest.raises(RuntimeError, match="cannot be `True` together"):
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], lr=0.1, fused=True, foreach=True)


def test_sgd_param_group_added_later_gets_its_first_step():
    ours, theirs = pair()
    opt_e = ember.optim.SGD(ours.params[:2], lr=0.05, momentum=0.9, fused=True)
    opt_t = torch.optim.SGD(theirs.params[:2], lr=0.05, momentum=0.9, fused=True)
    for k in range(6):
        if k == 3:
            opt_e.add_param_group({"params": ours.params[2:]})
            opt_t.add_param_group({"params": theirs.params[2:]})
        opt_e.step(ours.closure(opt_e))
        opt_t.step(theirs.closure(opt_t))
    assert_params_close(ours, theirs, where="after 6 steps")


def _lists(lib, shapes, dtype, seed, make=None):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        a = rng.uniform(-1, 1, s)
        t = lib.tensor(a, dtype=getattr(lib, dtype))
        out.append(make(t) if make else t)
    return out


SHAPES = [(3, 5), (1,), (0,), (40000,), (7, 1, 3)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("op", ["_fused_adam_", "_fused_adamw_"])
@pytest.mark.parametrize("amsgrad,maximize,wd", [(False, False, 0.0), (True, True, 0.1), (False, True, 0.02)])
def test_fused_adam_op(op, dtype, amsgrad, maximize, wd):
    res = []
    for lib in (ember, torch):
        p, g = _lists(lib, SHAPES, dtype, 0), _lists(lib, SHAPES, dtype, 1)
        m, v = _lists(lib, SHAPES, dtype, 2), _lists(lib, SHAPES, dtype, 3, make=lambda t: t.abs())
        vmax = _lists(lib, SHAPES, dtype, 4, make=lambda t: t.abs()) if amsgrad else []
        steps = [lib.tensor(float(k + 1)) for k in range(len(SHAPES))]
        getattr(lib, op)(p, g, m, v, vmax, steps, lr=0.01, beta1=0.9, beta2=0.99, weight_decay=wd, eps=1e-8,
                         amsgrad=amsgrad, maximize=maximize)
        res.append([t.float().numpy() if lib is torch else t.float().numpy() for t in p + m + v + vmax])
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=1e-5, atol=1e-6)
    if dtype in ("bfloat16", "float16"):
        tol = dict(rtol=1e-2, atol=1e-2)
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, **tol)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("momentum,nesterov,first", [(0.0, False, False), (0.9, False, True), (0.9, True, False)])
def test_fused_sgd_op(dtype, momentum, nesterov, first):
    res = []
    for lib in (ember, torch):
        # The oracle for bfloat16 is torch's float32 update of the same bfloat16 values: torch's
        # own bfloat16 fused SGD is off by up to 0.1 on long tensors (its vector body, measured).
        cast = (lambda t: t.float()) if lib is torch and dtype == "bfloat16" else None
        p, g = _lists(lib, SHAPES, dtype, 0, cast), _lists(lib, SHAPES, dtype, 1, cast)
        b = _lists(lib, SHAPES, dtype, 2, cast) if momentum else []
        lib._fused_sgd_(p, g, b, weight_decay=0.01, momentum=momentum, lr=0.1, dampening=0.0, nesterov=nesterov,
                        maximize=False, is_first_step=first)
        res.append([t.float().numpy() for t in p + (b if momentum else [])])
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=1e-5, atol=1e-6)
    if dtype == "bfloat16":
        tol = dict(rtol=1e-2, atol=1e-2)
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, **tol)


def test_fused_ops_take_non_contiguous_tensors_and_grad_scaling():
    res = []
    for lib in (ember, torch):
        base = [lib.tensor(np.random.default_rng(k).uniform(-1, 1, (6, 4))) for k in range(4)]
        p, g = base[0].t(), base[1][:, ::1].t()
        # All of one layout: torch's fused kernel walks each tensor's memory in order.
        m, v = lib.zeros(6, 4, dtype=lib.float64).t(), lib.zeros(6, 4, dtype=lib.float64).t()
        scale, no_inf = lib.tensor(4.0), lib.tensor(0.0)
        lib._fused_adam_([p], [g], [m], [v], [], [lib.tensor(1.0)], lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0,
                         eps=1e-8, amsgrad=False, maximize=False, grad_scale=scale, found_inf=no_inf)
        before = p.clone()
        lib._fused_adam_([p], [g], [m], [v], [], [lib.tensor(2.0)], lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0,
                         eps=1e-8, amsgrad=False, maximize=False, found_inf=lib.tensor(1.0))
        assert bool((p == before).all())  # found_inf skips the update
        res.append([p.numpy().copy(), m.numpy().copy(), v.numpy().copy()])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_fused_op_list_errors():
    p = [ember.zeros(3)]
    with pytest.raises(RuntimeError, match="momentum_buffer_list"):
        ember._fused_sgd_(p, p, p, weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0, nesterov=False,
                          maximize=False, is_first_step=False)
    with pytest.raises(RuntimeError):
        ember._fused_sgd_(p, [], [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0, nesterov=False,
                          maximize=False, is_first_step=False)
    with pytest.raises(RuntimeError, match="max_exp_avg_sqs"):
        ember._fused_adam_(p, p, p, p, p, [ember.tensor(1.0)], lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0,
                           eps=1e-8, amsgrad=False, maximize=False)
    with pytest.raises(RuntimeError):
        ember._fused_adam_(p, [ember.zeros(4)], [ember.zeros(3)], [ember.zeros(3)], [], [ember.tensor(1.0)], lr=0.1,
                           beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)


def test_fused_step_bumps_no_version_as_torch():
    """PyTorch's fused kernels bump no version counter: a tensor saved for backward and then stepped
    in place by _fused_sgd_ is not caught (the backward reads the new values), in ember as in torch."""
    grads = []
    for lib in (torch, ember):
        p = lib.ones(3, requires_grad=True)
        y = p * 2
        z = (y * y).sum()  # saves y for backward
        lib._fused_sgd_([y.detach()], [lib.ones(3)], [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0,
                        nesterov=False, maximize=False, is_first_step=False)
        z.backward()
        grads.append(p.grad.tolist())
    assert grads[0] == pytest.approx(grads[1])


@pytest.mark.parametrize("flag", ["fused", "foreach", None])
def test_step_counters_and_versions_match_torch(flag):
    """The counters are bumped in one native call (_C._cpu_scalars) for plain float CPU counters: values,
    dtypes and version counters as torch's after a few steps, with one counter left behind; under a dispatch
    mode the adds are visible as ops."""
    from ember.dispatch import DispatchMode

    ours, theirs = pair(dtype="float32")
    kw = {flag: True} if flag else {}
    opt_e = ember.optim.AdamW(ours.params, lr=0.01, **kw)
    opt_t = torch.optim.AdamW(theirs.params, lr=0.01, **kw)
    for step in range(3):
        opt_e.step(ours.closure(opt_e))
        opt_t.step(theirs.closure(opt_t))
        if step == 0:
            opt_e.state[ours.params[0]]["step"].sub_(1)
            opt_t.state[theirs.params[0]]["step"].sub_(1)
    for pe, pt in zip(ours.params, theirs.params):
        se, st = opt_e.state[pe]["step"], opt_t.state[pt]["step"]
        assert se.item() == st.item() and str(se.dtype) == str(st.dtype).replace("torch", "ember")
        assert se._version == st._version
    assert_params_close(ours, theirs, "float32")

    seen = []

    class Log(DispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Log():
        opt_e.step()
    assert sum("add_" in name for name in seen) >= len(ours.params)

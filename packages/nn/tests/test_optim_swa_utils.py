"""ember.optim.swa_utils against torch.optim.swa_utils: averaged parameters (SWA and EMA), buffers,
SWALR's learning rates and update_bn's recomputed statistics."""

import numpy as np
import pytest
import torch
import torch.optim.swa_utils as tswa

import ember
import ember.optim.swa_utils as eswa


def _pair_models(seed):
    r = np.random.default_rng(seed)
    w, b = r.normal(size=(3, 4)).astype(np.float32), r.normal(size=3).astype(np.float32)
    em = ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.BatchNorm1d(3))
    tm = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    for m, lib in ((em, ember), (tm, torch)):
        with lib.no_grad():
            m[0].weight.copy_(lib.tensor(w))
            m[0].bias.copy_(lib.tensor(b))
            m[1].running_mean.copy_(lib.tensor(b))
    return em, tm


def _same(e, t, rtol=1e-6):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=1e-7)


@pytest.mark.parametrize("mode", ["swa", "ema_multi", "ema", "swa_buffers"])
def test_averaged_model_matches_torch(mode):
    kw_e, kw_t = {}, {}
    if mode == "ema_multi":
        kw_e, kw_t = {"multi_avg_fn": eswa.get_ema_multi_avg_fn(0.9)}, {"multi_avg_fn": tswa.get_ema_multi_avg_fn(0.9)}
    elif mode == "ema":
        kw_e, kw_t = {"avg_fn": eswa.get_ema_avg_fn(0.8)}, {"avg_fn": tswa.get_ema_avg_fn(0.8)}
    elif mode == "swa_buffers":
        kw_e, kw_t = {"use_buffers": True}, {"use_buffers": True}
    em, tm = _pair_models(0)
    ea, ta = eswa.AveragedModel(em, **kw_e), tswa.AveragedModel(tm, **kw_t)
    for step in range(4):
        em2, tm2 = _pair_models(step + 1)
        ea.update_parameters(em2)
        ta.update_parameters(tm2)
    assert int(ea.n_averaged) == int(ta.n_averaged) == 4
    for (ne, pe), (nt, pt) in zip(ea.named_parameters(), ta.named_parameters()):
        assert ne == nt
        _same(pe, pt)
    for (ne, be), (nt, bt) in zip(ea.named_buffers(), ta.named_buffers()):
        assert ne == nt
        _same(be, bt)
    x = np.random.default_rng(9).normal(size=(5, 4)).astype(np.float32)
    ea.eval()
    ta.eval()
    _same(ea(ember.tensor(x)), ta(torch.tensor(x)), rtol=1e-5)


def test_avg_fn_arguments_are_checked():
    with pytest.raises(ValueError, match="Invalid decay"):
        eswa.get_ema_avg_fn(1.5)
    with pytest.raises(AssertionError):
        eswa.AveragedModel(ember.nn.Linear(2, 2), avg_fn=eswa.get_swa_avg_fn(),
                           multi_avg_fn=eswa.get_swa_multi_avg_fn())


@pytest.mark.parametrize("strategy,anneal", [("cos", 3), ("linear", 4), ("cos", 0)])
def test_swalr_matches_torch(strategy, anneal):
    pe = [ember.nn.Parameter(ember.zeros(2)), ember.nn.Parameter(ember.zeros(2))]
    pt = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))]
    oe = ember.optim.SGD([{"params": [pe[0]]}, {"params": [pe[1]], "lr": 0.5}], lr=1.0)
    ot = torch.optim.SGD([{"params": [pt[0]]}, {"params": [pt[1]], "lr": 0.5}], lr=1.0)
    se = eswa.SWALR(oe, swa_lr=[0.05, 0.1], anneal_epochs=anneal, anneal_strategy=strategy)
    st = tswa.SWALR(ot, swa_lr=[0.05, 0.1], anneal_epochs=anneal, anneal_strategy=strategy)
    for _ in range(7):
        np.testing.assert_allclose(se.get_last_lr(), st.get_last_lr(), rtol=1e-12)
        oe.step()
        ot.step()
        se.step()
        st.step()
    with pytest.raises(ValueError, match="anneal_strategy"):
        eswa.SWALR(oe, 0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match="same length"):
        eswa.SWALR(oe, [0.1])


def test_update_bn_matches_torch():
    em, tm = _pair_models(3)
    data = [np.random.default_rng(i).normal(size=(6, 4)).astype(np.float32) for i in range(3)]
    eswa.update_bn([(ember.tensor(d), 0) for d in data], em)
    tswa.update_bn([(torch.tensor(d), 0) for d in data], tm)
    _same(em[1].running_mean, tm[1].running_mean, rtol=1e-5)
    _same(em[1].running_var, tm[1].running_var, rtol=1e-5)
    assert em[1].momentum == tm[1].momentum == 0.1 and em.training

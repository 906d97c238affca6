"""Version counters after an optimizer step, against PyTorch: the foreach and for-loop steps bump
each tensor once per in-place op they run, the fused kernels (fused=True) bump none."""
import pytest
import torch

import ember

CASES = [("Adam", {}), ("Adam", {"amsgrad": True, "weight_decay": 0.1}), ("AdamW", {}), ("AdamW", {"amsgrad": True}),
         ("SGD", {"momentum": 0.9}), ("SGD", {}), ("SGD", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
         ("Adagrad", {}), ("Adagrad", {"weight_decay": 0.1, "lr_decay": 0.01})]


def _versions(lib, name, kw, mode):
    lib.manual_seed(0)
    p = lib.nn.Parameter(lib.randn(4))
    p.grad = lib.randn(4)
    opt = getattr(lib.optim, name)([p], lr=0.1, **kw, **mode)
    seen = []
    for _ in range(2):
        opt.step()
        seen.append((p._version, p.grad._version,
                     {k: v._version for k, v in opt.state[p].items() if isinstance(v, lib.Tensor)}))
    return seen


@pytest.mark.parametrize("mode", [{"fused": True}, {"foreach": True}, {"foreach": False}], ids=str)
@pytest.mark.parametrize(("name", "kw"), CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_step_versions_match_torch(name, kw, mode):
    assert _versions(ember, name, kw, mode) == _versions(torch, name, kw, mode)


def test_fused_ops_bump_nothing():
    for lib in (torch, ember):
        p, g, m, v, s = lib.randn(3), lib.randn(3), lib.zeros(3), lib.zeros(3), lib.tensor(1.0)
        lib._fused_adamw_([p], [g], [m], [v], [], [s], lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8,
                          amsgrad=False, maximize=False)
        b = lib.zeros(3)
        lib._fused_sgd_([p], [g], [b], weight_decay=0.0, momentum=0.9, lr=0.1, dampening=0.0, nesterov=False,
                        maximize=False, is_first_step=True)
        assert (p._version, m._version, v._version, s._version, b._version) == (0, 0, 0, 0, 0), lib.__name__
    # the per-tensor fallback (a non-contiguous param) bumps nothing either
    p = ember.randn(3, 2).t()
    ember._fused_adam_([p], [ember.randn(2, 3)], [ember.zeros(2, 3)], [ember.zeros(2, 3)], [], [ember.tensor(1.0)],
                       lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    assert p._version == 0

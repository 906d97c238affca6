"""``nn.utils.prune`` against PyTorch: the deterministic methods' masks, the parameters and buffers
they leave, methods combined on one tensor, global pruning, ``remove`` and the errors."""

from __future__ import annotations

import importlib

import pytest
import torch
from layer_helpers import assert_close, from_torch

import ember


def _prune(lib):
    return importlib.import_module(lib.__name__ + ".nn.utils.prune")


def _pair(build):
    t = build(torch)
    e = build(ember)
    e.load_state_dict({k: from_torch(v) for k, v in t.state_dict().items()})
    return t, e


def _net(lib):
    return lib.nn.Sequential(lib.nn.Conv2d(1, 4, 3), lib.nn.ReLU(), lib.nn.Flatten(), lib.nn.Linear(4 * 4 * 4, 5))


def _names(module):
    return [n for n, _ in module.named_parameters()], [n for n, _ in module.named_buffers()]


def _same_state(t_module, e_module):
    assert _names(e_module) == _names(t_module)
    t_state, e_state = t_module.state_dict(), e_module.state_dict()
    assert list(e_state) == list(t_state)
    for key in t_state:
        assert_close(e_state[key], t_state[key])


STEPS = {
    "l1_count": lambda P, net: P.l1_unstructured(net[0], "bias", amount=2),
    "l1_fraction": lambda P, net: P.l1_unstructured(net[3], "weight", amount=0.35),
    "ln_structured": lambda P, net: P.ln_structured(net[0], "weight", amount=0.5, n=2, dim=0),
    "ln_structured_inf": lambda P, net: P.ln_structured(net[3], "weight", amount=2, n=float("inf"), dim=1),
    "structured_then_l1": lambda P, net: (P.ln_structured(net[0], "weight", amount=1, n=1, dim=0),
                                          P.l1_unstructured(net[0], "weight", amount=0.3)),
    "l1_twice": lambda P, net: (P.l1_unstructured(net[3], "bias", amount=1),
                                P.l1_unstructured(net[3], "bias", amount=0.5)),
    "identity": lambda P, net: P.identity(net[3], "bias"),
    "custom_mask": lambda P, net: P.custom_from_mask(net[0], "bias", net[0].bias.detach() > 0),
    "global": lambda P, net: P.global_unstructured(((net[0], "weight"), (net[3], "weight")),
                                                   pruning_method=P.L1Unstructured, amount=0.4),
    "global_after_l1": lambda P, net: (P.l1_unstructured(net[0], "weight", amount=3),
                                       P.global_unstructured([(net[0], "weight"), (net[3], "bias")],
                                                             pruning_method=P.L1Unstructured, amount=5)),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_pruning_matches_torch(step):
    t_net, e_net = _pair(_net)
    STEPS[step](_prune(torch), t_net)
    STEPS[step](_prune(ember), e_net)
    _same_state(t_net, e_net)
    x = torch.rand(2, 1, 6, 6)
    t_out, e_out = t_net(x), e_net(from_torch(x))
    assert_close(e_out, t_out, rtol=1e-5, atol=1e-6)
    t_out.sum().backward()
    e_out.sum().backward()
    for (_, t_param), (_, e_param) in zip(t_net.named_parameters(), e_net.named_parameters()):
        assert_close(e_param.grad, t_param.grad, rtol=1e-5, atol=1e-6)
    assert _prune(ember).is_pruned(e_net) is _prune(torch).is_pruned(t_net) is True


def test_remove_makes_pruning_permanent():
    t_net, e_net = _pair(_net)
    for lib, net in ((torch, t_net), (ember, e_net)):
        P = _prune(lib)
        P.l1_unstructured(net[3], "weight", amount=0.5)
        P.ln_structured(net[3], "weight", amount=1, n=2, dim=0)
        P.remove(net[3], "weight")
    _same_state(t_net, e_net)
    assert not _prune(ember).is_pruned(e_net)
    assert isinstance(e_net[3].weight, ember.nn.Parameter)


def test_custom_method_and_prune_of_a_tensor():
    def custom(lib):
        P = _prune(lib)

        class EveryOther(P.BasePruningMethod):
            PRUNING_TYPE = "unstructured"

            def compute_mask(self, t, default_mask):
                mask = default_mask.clone()
                mask.view(-1)[::2] = 0
                return mask

        layer = lib.nn.Linear(3, 4)
        EveryOther.apply(layer, "bias")
        return layer.bias_mask, P.L1Unstructured(amount=2).prune(lib.tensor([3.0, -1.0, 0.5, 2.0]))

    for e, t in zip(custom(ember), custom(torch)):
        assert_close(e, t)


@pytest.mark.parametrize("call", [
    lambda P, lib: P.remove(lib.nn.Linear(2, 2), "weight"),
    lambda P, lib: P.l1_unstructured(lib.nn.Linear(2, 2), "weight", amount=1.5),
    lambda P, lib: P.l1_unstructured(lib.nn.Linear(2, 2), "weight", amount=-1),
    lambda P, lib: P.l1_unstructured(lib.nn.Linear(2, 2), "weight", amount="a"),
    lambda P, lib: P.l1_unstructured(lib.nn.Linear(2, 2), "bias", amount=3),
    lambda P, lib: P.ln_structured(lib.nn.Linear(2, 2), "bias", amount=1, n=2, dim=0),
    lambda P, lib: P.global_unstructured(3, pruning_method=P.L1Unstructured, amount=1),
    lambda P, lib: P.global_unstructured([], pruning_method=P.RandomStructured, amount=1),
])
def test_pruning_errors_match_torch(call):
    def outcome(lib):
        try:
            call(_prune(lib), lib)
        except Exception as exc:  # noqa: BLE001 - the exception type is what is compared
            return type(exc).__name__
        return "ok"

    assert outcome(ember) == outcome(torch)


def test_random_methods_prune_the_requested_amount():
    ember.manual_seed(0)
    P = _prune(ember)
    layer = ember.nn.Linear(10, 6)
    P.random_unstructured(layer, "weight", amount=0.25)
    assert int((layer.weight_mask == 0).sum()) == 15
    P.random_structured(layer, "weight", amount=2, dim=0)
    rows_pruned = (layer.weight_mask.sum(dim=1) == 0).sum()
    assert int(rows_pruned) == 2
    assert int((layer.weight == 0).sum()) >= 15 + 2 * 10 - 15

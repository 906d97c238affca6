"""``ember.nn.utils.parametrize`` against ``torch.nn.utils.parametrize``: values, gradients,
state-dict keys, class swapping, caching, removal and errors."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from layer_helpers import assert_close, copy_state, input_pair

import ember
from ember.nn.utils import parametrize as EP

TP = torch.nn.utils.parametrize


def _param_classes(lib):
    nn = lib.nn

    class Symmetric(nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)

        def right_inverse(self, a):
            return a.triu()

    class Scale(nn.Module):
        def __init__(self, factor=2.0):
            super().__init__()
            self.factor = factor

        def forward(self, x):
            return x * self.factor

        def right_inverse(self, y):
            return y / self.factor

    class RankOne(nn.Module):  # two originals: original0, original1
        def forward(self, x, y):
            return x.unsqueeze(-1) @ y.unsqueeze(-2)

        def right_inverse(self, z):
            return z[:, 0].clone(), z[0, :].clone()

    class NoInverse(nn.Module):
        def forward(self, x):
            return x.tanh()

    class Flatten(nn.Module):
        def forward(self, x):
            return x.flatten()

    class ToDouble(nn.Module):
        def forward(self, x):
            return x.double()

    return {"sym": Symmetric, "scale": Scale, "rank1": RankOne, "noinv": NoInverse, "flatten": Flatten,
            "double": ToDouble}


E_CLS, T_CLS = _param_classes(ember), _param_classes(torch)


def _pair(names, tensor_name="weight", features=3, bias=True):
    tm = torch.nn.Linear(features, features, bias=bias)
    em = ember.nn.Linear(features, features, bias=bias)
    copy_state(tm, em)
    for name in names:
        TP.register_parametrization(tm, tensor_name, T_CLS[name]())
        EP.register_parametrization(em, tensor_name, E_CLS[name]())
    return tm, em


def _check_forward_backward(tm, em, tensor_name="weight", in_features=3):
    xe, xt = input_pair((2, in_features))
    ye, yt = em(xe), tm(xt)
    assert_close(ye, yt)
    ye.square().sum().backward()
    yt.square().sum().backward()
    assert_close(xe.grad, xt.grad)
    tparams = dict(tm.named_parameters())
    for name, p in em.named_parameters():
        assert_close(p.grad, tparams[name].grad)
    assert_close(getattr(em, tensor_name), getattr(tm, tensor_name))


@pytest.mark.parametrize("names", [["sym"], ["scale"], ["sym", "scale"], ["noinv"], ["rank1"], ["scale", "noinv"]])
def test_register_matches_torch(names):
    tm, em = _pair(names)
    assert list(em.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert repr(em) == repr(tm)
    assert type(em).__name__ == type(tm).__name__ == "ParametrizedLinear"
    assert isinstance(em, ember.nn.Linear)
    assert EP.type_before_parametrizations(em) is ember.nn.Linear
    for key, value in em.state_dict().items():
        assert_close(value, tm.state_dict()[key])
    _check_forward_backward(tm, em)


def test_original_is_the_same_parameter_object():
    em = ember.nn.Linear(3, 3)
    weight = em.weight
    EP.register_parametrization(em, "weight", E_CLS["sym"]())
    assert em.parametrizations.weight.original is weight
    EP.remove_parametrizations(em, "weight")
    assert em.weight is weight and type(em) is ember.nn.Linear


def test_buffer_parametrization():
    tm, em = torch.nn.BatchNorm1d(3), ember.nn.BatchNorm1d(3)
    TP.register_parametrization(tm, "running_var", T_CLS["scale"]())
    EP.register_parametrization(em, "running_var", E_CLS["scale"]())
    assert list(em.state_dict()) == list(tm.state_dict())
    assert "parametrizations.running_var.original" in dict(em.named_buffers())
    assert_close(em.running_var, tm.running_var)


@pytest.mark.parametrize("leave", [True, False])
@pytest.mark.parametrize("names", [["sym"], ["sym", "scale"], ["rank1"]])
def test_remove_parametrizations(names, leave):
    tm, em = _pair(names)
    if names == ["rank1"] and not leave:
        with pytest.raises(ValueError, match="Cannot leave unparametrized"):
            EP.remove_parametrizations(em, "weight", leave_parametrized=False)
        return
    TP.remove_parametrizations(tm, "weight", leave_parametrized=leave)
    EP.remove_parametrizations(em, "weight", leave_parametrized=leave)
    assert type(em) is ember.nn.Linear and not hasattr(em, "parametrizations")
    assert not EP.is_parametrized(em)
    assert list(em.state_dict()) == list(tm.state_dict())
    assert isinstance(em.weight, ember.nn.Parameter) == isinstance(tm.weight, torch.nn.Parameter)
    assert_close(em.weight, tm.weight)
    _check_forward_backward(tm, em)


def test_two_tensors_parametrized_keep_class_until_last_removed():
    tm, em = _pair(["scale"])
    TP.register_parametrization(tm, "bias", T_CLS["scale"]())
    EP.register_parametrization(em, "bias", E_CLS["scale"]())
    assert list(em.state_dict()) == list(tm.state_dict())
    assert EP.is_parametrized(em, "bias") and EP.is_parametrized(em, "weight")
    EP.remove_parametrizations(em, "weight")
    assert type(em).__name__ == "ParametrizedLinear" and not EP.is_parametrized(em, "weight")
    EP.remove_parametrizations(em, "bias")
    assert type(em) is ember.nn.Linear


def test_assign_calls_right_inverse():
    tm, em = _pair(["sym"])
    value = torch.arange(9.0).reshape(3, 3)
    sym = value.triu() + value.triu(1).T
    tm.weight = sym
    em.weight = ember.tensor(sym.numpy())
    assert_close(em.parametrizations.weight.original, tm.parametrizations.weight.original)
    assert_close(em.weight, tm.weight)
    _, em2 = _pair(["noinv"])
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        em2.weight = ember.zeros(3, 3)


def test_cached():
    _, em = _pair(["sym"])
    assert em.weight is not em.weight
    with EP.cached():
        first = em.weight
        assert em.weight is first
        with EP.cached():
            assert em.weight is first
        assert em.weight is first
    assert em.weight is not first


def test_load_state_dict_round_trip_with_torch():
    tm, em = _pair(["sym", "scale"])
    with torch.no_grad():
        tm.parametrizations.weight.original.add_(1.0)
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    _check_forward_backward(tm, em)


def test_train_mode_propagates_and_deepcopy():
    em = ember.nn.Linear(3, 3).eval()
    param = E_CLS["scale"]()
    EP.register_parametrization(em, "weight", param)
    assert not param.training
    em.train()
    assert param.training
    clone = copy.deepcopy(em)
    assert type(clone) is type(em) and clone.weight.tolist() == em.weight.tolist()
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(em)


def test_unsafe_allows_shape_and_dtype_change():
    tm, em = torch.nn.Linear(3, 3), ember.nn.Linear(3, 3)
    copy_state(tm, em)
    for lib, mod, cls in ((TP, tm, T_CLS), (EP, em, E_CLS)):
        lib.register_parametrization(mod, "weight", cls["flatten"](), unsafe=True)
        lib.register_parametrization(mod, "weight", cls["double"](), unsafe=True)
    assert em.parametrizations.weight.unsafe
    assert_close(em.weight, tm.weight)


@pytest.mark.parametrize("name", ["flatten", "double"])
def test_errors_match_torch(name):
    for lib, mod, cls in ((TP, torch.nn.Linear(3, 3), T_CLS), (EP, ember.nn.Linear(3, 3), E_CLS)):
        with pytest.raises(ValueError, match="may not change the"):
            lib.register_parametrization(mod, "weight", cls[name]())
        lib.register_parametrization(mod, "weight", cls["scale"]())
        with pytest.raises(ValueError, match="may not change the"):
            lib.register_parametrization(mod, "weight", cls[name]())


def test_missing_tensor_errors():
    em = ember.nn.Linear(3, 3)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element"):
        EP.register_parametrization(em, "nope", E_CLS["scale"]())
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        EP.remove_parametrizations(em, "weight")
    with pytest.raises(ValueError, match="requires one or more modules"):
        EP.ParametrizationList([], em.weight)


def test_transfer_parametrizations_and_params():
    _, em = _pair(["sym"])
    target = ember.nn.Linear(3, 3)
    EP.transfer_parametrizations_and_params(em, target)
    assert EP.is_parametrized(target, "weight")
    assert target.parametrizations.weight.original is em.parametrizations.weight.original
    assert target.weight.tolist() == em.weight.tolist()


_ORTH = torch.nn.utils.parametrizations.orthogonal


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
@pytest.mark.parametrize("orth_map", [None, "matrix_exp", "cayley", "householder"])
def test_orthogonal_matches_torch(orth_map, shape):
    torch.manual_seed(shape[0] * 10 + shape[1])
    tm, em = torch.nn.Linear(shape[1], shape[0]), ember.nn.Linear(shape[1], shape[0])
    copy_state(tm, em)
    _ORTH(tm, orthogonal_map=orth_map)
    ember.nn.utils.parametrizations.orthogonal(em, orthogonal_map=orth_map)
    assert list(em.state_dict()) == list(tm.state_dict())
    assert em.parametrizations.weight[0].orthogonal_map == tm.parametrizations.weight[0].orthogonal_map.name
    if shape[0] == shape[1]:  # deterministic base: the QR of the initial weight
        # float32 QR: the two LAPACK-style factorizations differ by ~cond(W) * eps.
        assert_close(em.parametrizations.weight[0].base, tm.parametrizations.weight[0].base, atol=2e-4, rtol=1e-3)
    # Move away from the identity so that the map itself is exercised: below the diagonal of the
    # tall orientation (householder truncates the diagonal to ints).
    noise = torch.randn(shape)
    noise = noise.tril(-1) if shape[0] >= shape[1] else noise.triu(1)
    with torch.no_grad():
        tm.parametrizations.weight.original.add_(0.3 * noise)
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    _check_forward_backward(tm, em, in_features=shape[1])
    w = em.weight.detach()
    gram = w.mT @ w if shape[0] >= shape[1] else w @ w.mT
    ember.testing.assert_close(gram, ember.eye(min(shape)), atol=1e-5, rtol=0)


def test_orthogonal_assign_and_errors():
    tm, em = torch.nn.Linear(3, 3), ember.nn.Linear(3, 3)
    _ORTH(tm)
    ember.nn.utils.parametrizations.orthogonal(em)
    q = torch.linalg.qr(torch.randn(3, 3))[0]
    tm.weight = q
    em.weight = ember.tensor(q.numpy())
    assert_close(em.weight, tm.weight, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices of shape"):
        em.weight = ember.zeros(2, 2)
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1 dimensions"):
        ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3), "bias")
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3), orthogonal_map="svd")
    tm = _ORTH(torch.nn.Linear(3, 3), orthogonal_map="cayley", use_trivialization=False)
    em = ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3), orthogonal_map="cayley",
                                                   use_trivialization=False)
    assert list(em.state_dict()) == list(tm.state_dict())
    with pytest.raises(RuntimeError, match="needs torch.geqrf"):
        ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(2, 3), use_trivialization=False)

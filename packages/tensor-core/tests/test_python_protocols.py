"""Tensor's Python number protocols (bool, float, int, complex) and varargs methods, against torch:
the exception types and messages PyTorch programs see."""

import warnings

import pytest
import torch

import ember


def _outcome(fn):
    try:
        return "ok", repr(fn())
    except Exception as exc:  # noqa: BLE001 - the exception is what is compared
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("call", [
    lambda L: int(L.arange(6.0)),
    lambda L: float(L.ones(2, 3)),
    lambda L: complex(L.ones(2)),
    lambda L: int(L.empty(0)),
    lambda L: bool(L.empty(0)),
    lambda L: bool(L.ones(3)),
    lambda L: L.is_nonzero(L.ones(2)),
    lambda L: float(L.tensor([2.5])),
    lambda L: int(L.tensor([[7]])),
])
def test_scalar_conversions_fail_as_torch(call):
    # float()/int() of several elements is ValueError in PyTorch (item() is a RuntimeError).
    assert _outcome(lambda: call(ember)) == _outcome(lambda: call(torch))


@pytest.mark.parametrize("call", [
    lambda L, x: x.flip(0, 1),
    lambda L, x: x.flip(1),
    lambda L, x: x.flip([0, 1]),
    lambda L, x: x.flip(dims=(0,)),
    lambda L, x: x.flip(-1, 0),
    lambda L, x: x.flip(),
])
def test_flip_method_takes_dims_as_varargs(call):
    def flipped(lib):
        return _outcome(lambda: call(lib, lib.arange(6.0).view(2, 3)).tolist())

    assert flipped(ember) == flipped(torch)


def test_scalar_of_a_tensor_that_requires_grad_warns():
    x = ember.ones(1, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember._src.tensor._SCALAR_GRAD_WARNED[0] = False
        with ember.no_grad():  # an optimizer's step reads its loss so: no warning (as PyTorch)
            assert float(x) == 1.0
        assert float(x) == 1.0 and int(x * 2) == 2
        x.item()
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and messages[0].startswith("Converting a tensor with requires_grad=True to a scalar")


def _deepcopy_facts(lib):
    import copy

    leaf = lib.ones(2, 3, requires_grad=True)
    (leaf * 2).sum().backward()
    leaf.note = [1, 2]
    copied = copy.deepcopy(leaf)
    shared = copy.deepcopy({"a": leaf, "b": leaf})
    strided = copy.deepcopy(lib.arange(6.0).reshape(2, 3).t())
    return (
        copied.is_leaf, copied.requires_grad, copied.grad_fn is None,
        copied.grad.tolist(), copied.grad is not leaf.grad, copied.note, copied.note is not leaf.note,
        shared["a"] is shared["b"], strided.stride(), strided.tolist(),
    )


def test_deepcopy_of_a_leaf_is_a_leaf_with_its_grad_and_attributes():
    assert _deepcopy_facts(ember) == _deepcopy_facts(torch)


def test_deepcopy_of_a_non_leaf_raises_as_torch():
    import copy

    def attempt(lib):
        return _outcome(lambda: copy.deepcopy(lib.ones(2, requires_grad=True) * 2))

    assert attempt(ember) == attempt(torch)


@pytest.mark.parametrize("call", [
    lambda L: 2 in L.tensor([[1, 2], [3, 4]]),
    lambda L: 5 in L.tensor([[1, 2], [3, 4]]),
    lambda L: L.tensor([3, 4]) in L.tensor([[1, 2], [3, 4]]),
    lambda L: 2.0 in L.tensor([1.0, 2.0]),
    lambda L: "a" in L.tensor([1, 2]),
    lambda L: None in L.tensor([1, 2]),
    lambda L: list(reversed(L.arange(4))),
    lambda L: reversed(L.tensor(3)).tolist(),
    lambda L: reversed(L.arange(6).view(3, 2)).tolist(),
])
def test_contains_and_reversed_match_torch(call):
    assert _outcome(lambda: call(ember)) == _outcome(lambda: call(torch))


@pytest.mark.parametrize("call", [
    lambda L, np: L.tensor([1.0, 2.0]) + np.array([1.0, 2.0]),
    lambda L, np: L.tensor([1.0, 2.0]) + np.array([1, 2]),
    lambda L, np: np.exp(L.tensor([1.0, 2.0])),
    lambda L, np: np.isnan(L.tensor([1.0, float("nan")])),
    lambda L, np: np.reshape(L.tensor([1.0, 2.0]), (2, 1)),
    lambda L, np: np.cumsum(L.tensor([1.0, 2.0])),
])
def test_numpy_ufuncs_over_tensors_give_tensors_as_torch(call):
    import numpy

    expected, got = call(torch, numpy), call(ember, numpy)
    assert isinstance(got, ember.Tensor), type(got)
    assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize("grad", [
    lambda L: L.ones(2),
    lambda L: L.ones(1, 3),
    lambda L: L.ones(3, dtype=L.float64),
    lambda L: L.ones(3, dtype=L.int64),
    lambda L: L.ones(3, device="meta"),
    lambda L: [1.0, 2.0, 3.0],
    lambda L: L.zeros(3),
    lambda L: L.ones(3).to_sparse(),
    lambda L: None,
])
def test_grad_assignment_is_checked_as_torch(grad):
    """tensor.grad = g needs a tensor of the tensor's dtype, device type and size (a sparse one of
    any layout size rule it keeps); PyTorch's errors otherwise, in its order."""
    def attempt(lib):
        t = lib.ones(3, requires_grad=True)
        try:
            t.grad = grad(lib)
        except (RuntimeError, TypeError) as exc:
            return type(exc).__name__, str(exc)
        return "ok", None if t.grad is None else t.grad.to_dense().tolist()

    assert attempt(ember) == attempt(torch)


def test_public_functions_pickle_by_reference_like_torch():
    # Functions made by a factory (unary/binary pointwise, special's shifted polynomials, sparse
    # factories, addmv_) are found again by name, as torch's builtins are: pickling a graph or a
    # partial that holds ember.sigmoid must not fail on "local object", and fx tables print names.
    import pickle
    import types

    import torch

    import ember.nn.functional
    import ember.special

    checked = 0
    pairs = ((ember, torch), (ember.special, torch.special), (ember.nn.functional, torch.nn.functional))
    for module, reference in pairs:
        for name in dir(module):
            fn = getattr(module, name, None)
            if not isinstance(fn, types.FunctionType) or name.startswith("_") or not hasattr(reference, name):
                continue
            assert "<locals>" not in fn.__qualname__, f"{module.__name__}.{name}: {fn.__qualname__}"
            assert pickle.loads(pickle.dumps(fn)) is fn
            checked += 1
    assert checked > 300
    assert pickle.loads(pickle.dumps(torch.sigmoid)) is torch.sigmoid

"""AccumulateGrad's gradient layout contract and ``enforce_grad_layout_policy`` against PyTorch: a
leaf's first ``.grad`` has the leaf's strides when the leaf is non-overlapping and dense (permuted,
transposed, channels-last), row-major otherwise; with the policy off a gradient nobody else holds is
kept whatever its strides. The native engine loop and the Python one (``inputs=``) both apply it."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

LEAVES = {
    "contiguous": lambda lib: lib.arange(24.0).reshape(2, 3, 4),
    "permuted": lambda lib: lib.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1),
    "transposed": lambda lib: lib.arange(12.0).reshape(3, 4).t(),
    "channels_last": lambda lib: lib.arange(120.0).reshape(2, 3, 4, 5).to(memory_format=lib.channels_last),
    "expanded": lambda lib: lib.arange(3.0).reshape(3, 1).expand(3, 4),
    "strided_slice": lambda lib: lib.arange(24.0).reshape(4, 6)[:, ::2],
}

GRAPHS = {
    "mul": lambda lib, p: p * 2,
    "contiguous_mul": lambda lib, p: p.contiguous() * 2,
    "transposed_back": lambda lib, p: (p * 2).transpose(0, -1).contiguous(),
    "broadcast": lambda lib, p: p.unsqueeze(0).expand(2, *p.shape) * 3,
    # The gradient arrives as a transposed view of a fresh tensor, whatever the layout rules of the
    # elementwise kernels (ember's outputs are row-major where PyTorch's may follow an input's).
    "transpose_mul": lambda lib, p: p.transpose(0, -1) * lib.full(tuple(p.transpose(0, -1).shape), 3.0),
}


def _grad(lib, leaf, graph, enforce, create_graph, use_inputs):
    p = LEAVES[leaf](lib).requires_grad_()
    with lib.autograd.enforce_grad_layout_policy(enforce):
        y = GRAPHS[graph](lib, p).sum()
        y.backward(create_graph=create_graph, inputs=[p] if use_inputs else None)
    return p.grad


def _cases():
    for leaf in LEAVES:
        for graph in GRAPHS:
            yield leaf, graph, True  # the contract, whatever gradient arrives
        yield leaf, "transpose_mul", False  # the policy off: a gradient nobody holds is kept as it is


@pytest.mark.parametrize(("leaf", "graph", "enforce"), list(_cases()))
@pytest.mark.parametrize("create_graph", [False, True])
def test_first_gradient_layout_matches_torch(leaf, graph, enforce, create_graph):
    ours = _grad(ember, leaf, graph, enforce, create_graph, use_inputs=False)
    theirs = _grad(torch, leaf, graph, enforce, create_graph, use_inputs=False)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert tuple(ours.stride()) == tuple(theirs.stride())
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy())
    assert (ours.grad_fn is not None) == (theirs.grad_fn is not None)


@pytest.mark.parametrize("leaf", ["permuted", "channels_last", "strided_slice"])
def test_python_engine_applies_the_contract_too(leaf):
    ours = _grad(ember, leaf, "transposed_back", True, False, use_inputs=True)
    theirs = _grad(torch, leaf, "transposed_back", True, False, use_inputs=True)
    assert tuple(ours.stride()) == tuple(theirs.stride())
    np.testing.assert_allclose(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("lib", [ember, torch], ids=["ember", "torch"])
def test_later_gradients_accumulate_into_the_first(lib):
    p = LEAVES["permuted"](lib).requires_grad_()
    (p * 2).sum().backward()
    first = p.grad
    (p * 3).sum().backward()
    assert p.grad is first
    assert tuple(p.grad.stride()) == tuple(p.stride())
    np.testing.assert_allclose(p.grad.numpy(), np.full(tuple(p.shape), 5.0))


def test_conv_weight_gradient_keeps_channels_last():
    results = []
    for lib in (ember, torch):
        lib.manual_seed(0)
        w = lib.tensor(np.arange(108.0, dtype=np.float32).reshape(4, 3, 3, 3) / 100)
        w = w.to(memory_format=lib.channels_last).requires_grad_()
        x = lib.tensor(np.linspace(-1, 1, 192, dtype=np.float32).reshape(1, 3, 8, 8))
        lib.nn.functional.conv2d(x, w).square().sum().backward()
        results.append(w.grad)
    ours, theirs = results
    assert tuple(ours.stride()) == tuple(theirs.stride())
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lib", [ember, torch], ids=["ember", "torch"])
def test_policy_as_decorator_applies_inside_calls_only(lib):
    def enforced():
        p = LEAVES["contiguous"](lib).requires_grad_()
        GRAPHS["transpose_mul"](lib, p).sum().backward()
        return tuple(p.grad.stride()) == tuple(p.stride())

    relaxed = lib.autograd.enforce_grad_layout_policy(False)(enforced)
    assert enforced()
    assert not relaxed()
    assert enforced()

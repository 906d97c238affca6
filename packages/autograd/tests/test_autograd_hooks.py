"""Tensor hooks, post-accumulate-grad hooks and Node hooks."""

from __future__ import annotations

import pytest
import torch
from ag_helpers import assert_close, leaf_pair

import ember


def test_tensor_hook_on_leaf_and_nonleaf_can_replace_grad():
    ex, tx = leaf_pair((3,), seed=1)
    seen = []
    for x, acc in ((ex, seen), (tx, [])):
        y = x * 2
        y.register_hook(lambda g: g * 10)
        x.register_hook(lambda g, acc=acc: acc.append(g.sum().item()))
        (y * y).sum().backward()
    assert_close(ex.grad, tx.grad)
    assert len(seen) == 1


def test_hook_removal_and_errors():
    x = ember.ones(2, requires_grad=True)
    handle = x.register_hook(lambda g: g * 100)
    handle.remove()
    (x * 1).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        ember.ones(2).register_hook(lambda g: g)


def test_hooks_run_in_order_and_retain_grad_sees_final_grad():
    x = ember.ones(2, requires_grad=True)
    y = x * 1
    order = []
    y.register_hook(lambda g: order.append(1) or g + 1)
    y.retain_grad()
    y.register_hook(lambda g: order.append(2) or g * 3)
    y.sum().backward()
    assert order == [1, 2]
    assert y.grad.tolist() == [6.0, 6.0] and x.grad.tolist() == [6.0, 6.0]


def test_hook_in_grad_call():
    x = ember.ones(2, requires_grad=True)
    x.register_hook(lambda g: g * 5)
    g, = ember.autograd.grad((x * 2).sum(), x)
    assert g.tolist() == [10.0, 10.0] and x.grad is None


def test_post_accumulate_grad_hook():
    x = ember.ones(2, requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (x * 3).sum().backward()
    assert seen == [[3.0, 3.0]]
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf tensors"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_node_hooks_see_and_replace_grads():
    x = ember.ones(3, requires_grad=True)
    y = x * 2
    z = y * 1
    seen = {}

    def prehook(grad_outputs):
        seen["pre"] = grad_outputs[0].tolist()
        return (grad_outputs[0] * 2,)

    def posthook(grad_inputs, grad_outputs):
        seen["post"] = (grad_inputs[0].tolist(), grad_outputs[0].tolist())
        return (grad_inputs[0] + 1,) + tuple(grad_inputs[1:])

    h1 = y.grad_fn.register_prehook(prehook)
    y.grad_fn.register_hook(posthook)
    z.sum().backward(retain_graph=True)
    assert seen["pre"] == [1.0, 1.0, 1.0]
    assert seen["post"] == ([4.0, 4.0, 4.0], [2.0, 2.0, 2.0])
    assert x.grad.tolist() == [5.0, 5.0, 5.0]
    h1.remove()
    x.grad = None
    z.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


def test_node_metadata_and_name():
    y = ember.ones(2, requires_grad=True) * 2
    y.grad_fn.metadata["tag"] = 1
    assert y.grad_fn.metadata == {"tag": 1} and y.grad_fn.name() == "MulBackward0"
    assert isinstance(y.grad_fn, ember.autograd.graph.Node)


def test_saved_tensors_hooks_pack_and_unpack():
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t.clone()

    ex, tx = leaf_pair((4,), seed=3)
    with ember.autograd.graph.saved_tensors_hooks(pack, lambda p: p * 1):
        ey = (ex * ex).exp()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda p: p * 1):
        ty = (tx * tx).exp()
    assert packed
    ey.sum().backward()
    ty.sum().backward()
    assert_close(ex.grad, tx.grad)


def test_gradient_edge():
    x = ember.ones(2, requires_grad=True)
    y = x * 2
    edge = ember.autograd.graph.get_gradient_edge(y)
    assert edge.node is y.grad_fn and edge.output_nr == 0
    assert ember.autograd.graph.get_gradient_edge(x).node.variable is x


def _named_hook(g):
    return g.new_ones(2)


@pytest.mark.parametrize("hook", [
    _named_hook,
    lambda g: g.double(),
    lambda g: [1.0],
    lambda g: g.long(),
    lambda g: g.view(3, 1),
    lambda g: g * 2,
])
@pytest.mark.parametrize("on_leaf", [True, False])
def test_hook_results_are_checked_as_torch(hook, on_leaf):
    """A tensor hook's replacement must keep the gradient's type and size: PyTorch raises at the hook
    (naming it) where a wrong one would otherwise flow on silently."""
    def outcome(lib):
        z = lib.ones(3, requires_grad=True)
        hooked = z if on_leaf else z * 2
        hooked.register_hook(hook)
        try:
            (hooked * 2).sum().backward()
        except (RuntimeError, TypeError) as exc:
            return type(exc).__name__, str(exc)
        return "ok", z.grad.tolist()

    assert outcome(ember) == outcome(torch)


@pytest.mark.parametrize("grad_dtype", ["int64", "bool", "float64", "complex64"])
def test_backward_grad_output_of_another_dtype_as_torch(grad_dtype):
    """An integer, bool or wider real grad_output is cast to the output's dtype; a complex one for a
    real output raises PyTorch's RuntimeError."""
    def outcome(lib):
        x = lib.ones(3, requires_grad=True)
        try:
            (x * 2).backward(lib.ones(3, dtype=getattr(lib, grad_dtype)))
        except RuntimeError as exc:
            return "RuntimeError", str(exc)
        return str(x.grad.dtype).split(".")[-1], x.grad.tolist()

    assert outcome(ember) == outcome(torch)


@pytest.mark.parametrize("pin_memory", [False, True])
def test_save_on_cpu_keeps_gradients_as_torch(pin_memory):
    """autograd.graph.save_on_cpu (the saved-tensors tutorial's offloading) was missing."""
    def grads(lib):
        a = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
        with lib.autograd.graph.save_on_cpu(pin_memory=pin_memory):
            y = (a.exp() * a).sin().sum()
        y.backward()
        return [round(v, 5) for v in a.grad.tolist()]

    assert grads(ember) == grads(torch)


def test_saved_attributes_of_a_node_as_torch():
    # autograd_saved_tensors_hooks tutorial: y.grad_fn._saved_self / _saved_other / _saved_result,
    # the identity of a saved leaf, an unpack hook running on every read, and AttributeError for
    # what the node does not keep. ember's nodes had no _saved_* attributes (AttributeError).
    results = []
    for lib in (torch, ember):
        a = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        b = lib.tensor([0.5, 4.0, 2.0], requires_grad=True)
        y = a * b
        e = lib.exp(a)
        p = a.pow(3)
        unpacked = []

        def unpack(t, unpacked=unpacked):
            unpacked.append(1)
            return t

        with lib.autograd.graph.saved_tensors_hooks(lambda t: t * 1, unpack):
            h = a * b
        first, second = h.grad_fn._saved_self, h.grad_fn._saved_self
        with pytest.raises(AttributeError):
            _ = e.grad_fn._saved_self  # exp keeps its result only
        with pytest.raises(AttributeError):
            _ = y.grad_fn._saved_no_such_argument
        results.append((y.grad_fn._saved_self is a, y.grad_fn._saved_other is b, y.grad_fn._saved_other.tolist(),
                        e.grad_fn._saved_result.equal(e), e.grad_fn._saved_result is e,
                        p.grad_fn._saved_self is a, len(unpacked), first.tolist(),
                        second.tolist()))
        y.sum().backward()
        with pytest.raises(RuntimeError):
            _ = y.grad_fn._saved_self  # freed by backward
    assert results[0] == results[1]


@pytest.mark.parametrize("when", ["before_graph", "after_graph"])
def test_leaf_hook_registered_before_or_after_its_graph_as_torch(when):
    # A leaf's AccumulateGrad looks the leaf's hooks up only once the leaf has one (it is told when the
    # first is registered): a hook added after the graph was recorded still runs for it, as in PyTorch.
    results = []
    for fw in (ember, torch):
        x = fw.tensor([1.0, 2.0], requires_grad=True)
        w = fw.tensor([3.0, 4.0], requires_grad=True)
        seen = []
        if when == "before_graph":
            x.register_hook(lambda g, seen=seen: seen.append(g.tolist()) or g * 10)
        y = (x * w).sum() + (w * 2).sum()
        if when == "after_graph":
            x.register_hook(lambda g, seen=seen: seen.append(g.tolist()) or g * 10)
        y.backward()
        results.append((x.grad.tolist(), w.grad.tolist(), seen))
    assert results[0] == results[1]
    assert results[0][2] == [[3.0, 4.0]]


def _inplace_after_linear_grads(lib, ctx_name):
    import contextlib

    lib.manual_seed(0)
    lin = lib.nn.Linear(4, 4)
    x = lib.randn(3, 4, requires_grad=True)
    ctx = {"anomaly": lambda: lib.autograd.set_detect_anomaly(True),
           "saved hooks": lambda: lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t),
           "plain": contextlib.nullcontext}[ctx_name]
    out = []
    for make in (lin, lambda t: lib.addmm(lin.bias, t, lin.weight.t()), lambda t: lin(t.unsqueeze(0))):
        x.grad = None
        with ctx():
            h = make(x)
            h.relu_()
            y = (h * 2).sum()
        y.backward()
        out.append(None if x.grad is None else x.grad.numpy().round(5).tolist())
    return out


@pytest.mark.parametrize("ctx_name", ["plain", "anomaly", "saved hooks"])
def test_inplace_op_after_linear_keeps_gradients(ctx_name):
    # Under anomaly mode and saved-tensor hooks (the Python recording) addmm's result was a view of
    # the kernel's own scratch, so Linear followed by ReLU(inplace=True) lost x's gradient (None).
    import torch

    assert _inplace_after_linear_grads(ember, ctx_name) == _inplace_after_linear_grads(torch, ctx_name)

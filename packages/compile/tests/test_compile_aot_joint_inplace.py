"""AOT autograd over what attention blocks record: ``masked_fill`` (``clone`` + ``masked_fill_``,
an in-place op on a tensor the graph made) and ``split`` (narrows, whose backward writes into
a view of zeros). Both used to send the whole graph to eager autograd; now the joint graph is
traced (the in-place op on a copy, the narrow's gradient as a ``cat``), compiled, and the
gradients match eager ember and PyTorch. The backward graph is compiled once, at its first call.
"""

from __future__ import annotations

import numpy as np
import torch

import ember
from ember.compiler import _aot_joint, make_fx
from ember.compiler.inductor import _compile_fx


def _program(fw, x, w, mask):
    q, k, v = (x @ w).split(4, dim=-1)
    att = (q @ k.transpose(-2, -1)).masked_fill(mask, float("-inf"))
    y = fw.softmax(att, -1) @ v
    return (y * y).sum() + x[:, 1:3].sum() * 0.5  # a slice's backward too


def _inputs():
    g = np.random.default_rng(0)
    x, w = g.standard_normal((6, 5)).astype(np.float32), g.standard_normal((5, 12)).astype(np.float32)
    mask = np.triu(np.ones((6, 6), dtype=bool), 1)
    return x, w, mask


def test_masked_fill_and_split_trace_a_joint_graph():
    x, w, mask = _inputs()
    ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    gm = make_fx(lambda a, b, m: _program(ember, a, b, m))(ex, ew, ember.tensor(mask))
    assert _aot_joint._supported(gm)
    traced = _aot_joint.trace_joint(gm, [ex, ew, ember.tensor(mask)])
    assert traced is not None, "the graph went to eager autograd"
    joint = traced[0]
    targets = [getattr(n.target, "name", None) for n in joint.graph.nodes if n.op == "call_function"]
    assert "cat" in targets  # the narrows' gradients, no copy_ into a view of zeros
    assert "copy_" not in targets


def test_compiled_training_matches_eager_and_torch(monkeypatch):
    builds = []
    original = _compile_fx.CompiledGraph._build

    def counting(self, inputs):
        builds.append(self)
        return original(self, inputs)

    monkeypatch.setattr(_compile_fx.CompiledGraph, "_build", counting)
    x, w, mask = _inputs()
    grads = {}
    for name in ("eager", "compiled"):
        ex, ew = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
        fn = (lambda a, b, m: _program(ember, a, b, m))
        if name == "compiled":
            fn = ember.compile(fn)
        loss = fn(ex, ew, ember.tensor(mask))
        loss.backward()
        grads[name] = (loss.item(), ex.grad.numpy(), ew.grad.numpy())
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tloss = _program(torch, tx, tw, torch.tensor(mask))
    tloss.backward()
    want = (tloss.item(), tx.grad.numpy(), tw.grad.numpy())
    for got in (grads["eager"], grads["compiled"]):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-5)
    # a forward and a backward graph, each built once (no second backward for saved views' strides)
    assert len(builds) == 2
    assert all(b.artifact is not None for b in builds), "a graph ran eagerly"

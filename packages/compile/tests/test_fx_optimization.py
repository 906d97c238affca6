"""ember.fx.experimental.optimization (fuse, remove_dropout, extract_subgraph) against
torch.fx.experimental.optimization on the same models."""

from __future__ import annotations

import numpy as np
import torch
import torch.fx
import torch.fx.experimental.optimization as torch_optimization
from fx_test_helpers import assert_close, copy_weights, full_structure, to_ember, to_torch

import ember
import ember.fx
import ember.fx.experimental.optimization as ember_optimization


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _model(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.Conv2d(3, 4, 3, padding=1)
            self.bn = lib.nn.BatchNorm2d(4)
            self.shared = lib.nn.Conv1d(4, 4, 1)  # its output feeds the BN and more: not fused
            self.bn1 = lib.nn.BatchNorm1d(4)
            self.lin = lib.nn.Linear(4, 5)
            self.bn_lin = lib.nn.BatchNorm1d(5)
            self.drop = lib.nn.Dropout(0.3)

        def forward(self, x):
            h = self.bn(self.conv(x)).mean(3)
            s = self.shared(h)
            h = (self.bn1(s) + s).mean(2)
            return self.drop(self.bn_lin(self.lin(h)))

    return Net()


def _both_models():
    torch_model, model = _model(torch), _model(ember)
    torch_model(to_torch(_rand(6, 3, 5, 5, seed=4)))  # running statistics worth folding
    copy_weights(torch_model, model)
    return torch_model.eval(), model.eval()


def test_fuse_matches_torch():
    torch_model, model = _both_models()
    tfused, efused = torch_optimization.fuse(torch_model), ember_optimization.fuse(model)
    assert full_structure(efused) == full_structure(tfused)
    assert [n.target for n in efused.graph.nodes if n.op == "call_module"] == [
        "conv", "shared", "bn1", "lin", "drop"]
    x = _rand(2, 3, 5, 5)
    with torch.no_grad(), ember.no_grad():
        assert_close(efused(to_ember(x)), tfused(to_torch(x)), atol=1e-4)
        assert_close(efused(to_ember(x)), model(to_ember(x)), atol=1e-4)
    assert isinstance(model.bn, ember.nn.BatchNorm2d)  # not inplace: the model is untouched


def test_remove_dropout_matches_torch():
    torch_model, model = _both_models()
    tgm, egm = torch_optimization.remove_dropout(torch_model), ember_optimization.remove_dropout(model)
    assert full_structure(egm) == full_structure(tgm)
    assert "drop" not in [n.target for n in egm.graph.nodes]
    x = _rand(2, 3, 5, 5)
    with torch.no_grad(), ember.no_grad():
        assert_close(egm(to_ember(x)), tgm(to_torch(x)), atol=1e-5)


def _relu_mul_sigmoid(lib):
    def fn(x, y):
        a = lib.relu(x)
        b = a * y
        return lib.sigmoid(b) + 1

    return fn


def test_extract_subgraph_matches_torch():
    results = []
    for lib, fx, optimization, convert in ((torch, torch.fx, torch_optimization, to_torch),
                                           (ember, ember.fx, ember_optimization, to_ember)):
        gm = fx.symbolic_trace(_relu_mul_sigmoid(lib))
        nodes = list(gm.graph.nodes)
        x_node, y_node, relu, mul = nodes[:4]
        sub = optimization.extract_subgraph(gm, [relu, mul], [x_node, y_node], [mul])
        results.append((sub, sub(convert(_rand(3)), convert(_rand(3, seed=1)))))
    (tsub, tout), (esub, eout) = results
    assert full_structure(esub) == full_structure(tsub)
    assert_close(eout, tout)

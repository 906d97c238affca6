"""Whole models traced by ember.fx and torch.fx from one source: a CNN, an embedding + LSTM
classifier and a transformer block, checked for graph structure and outputs, and run through
Interpreter, Transformer and deepcopy."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.fx
from fx_test_helpers import assert_close, copy_weights, full_structure, to_ember, to_torch

import ember
import ember.fx


def _cnn(lib):
    F = lib.nn.functional

    class CNN(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.features = lib.nn.Sequential(
                lib.nn.Conv2d(1, 4, 3, padding=1), lib.nn.BatchNorm2d(4), lib.nn.ReLU(),
                lib.nn.MaxPool2d(2), lib.nn.Conv2d(4, 8, 3), lib.nn.GELU())
            self.pool = lib.nn.AdaptiveAvgPool2d((1, 1))
            self.head = lib.nn.Linear(8, 3)
            self.drop = lib.nn.Dropout(0.5)

        def forward(self, x):
            h = self.pool(self.features(x))
            h = lib.flatten(h, 1)
            return F.log_softmax(self.head(self.drop(h)), dim=-1)

    return CNN()


def _lstm_classifier(lib):
    class Classifier(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = lib.nn.Embedding(20, 6)
            self.lstm = lib.nn.LSTM(6, 5, batch_first=True)
            self.norm = lib.nn.LayerNorm(5)
            self.out = lib.nn.Linear(5, 2)

        def forward(self, tokens):
            seq, (h, c) = self.lstm(self.embed(tokens))
            last = seq[:, -1]
            return self.out(self.norm(last + h[0])), c.shape[-1]

    return Classifier()


def _transformer_block(lib):
    class Block(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = lib.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                                        batch_first=True)
            self.proj = lib.nn.Linear(8, 8)

        def forward(self, x):
            y = self.layer(x)
            scores = lib.matmul(y, y.transpose(1, 2)) / (y.size(-1) ** 0.5)
            return lib.softmax(scores, dim=-1) @ self.proj(y)

    return Block()


def _input(kind):
    rng = np.random.default_rng(0)
    if kind == "tokens":
        return rng.integers(0, 20, size=(3, 7)).astype(np.int64)
    if kind == "image":
        return rng.standard_normal((2, 1, 8, 8)).astype(np.float32)
    return rng.standard_normal((2, 5, 8)).astype(np.float32)


@pytest.mark.parametrize("make,kind", [(_cnn, "image"), (_lstm_classifier, "tokens"),
                                       (_transformer_block, "seq")], ids=["cnn", "lstm", "transformer"])
def test_model_traces_like_torch(make, kind):
    torch_model, model = make(torch), make(ember)
    copy_weights(torch_model, model)
    torch_model.eval()
    model.eval()
    x = _input(kind)
    tgm, egm = torch.fx.symbolic_trace(torch_model), ember.fx.symbolic_trace(model)
    assert full_structure(egm, kwargs=False) == full_structure(tgm, kwargs=False)
    with torch.no_grad(), ember.no_grad():
        expected = tgm(to_torch(x))
        assert_close(egm(to_ember(x)), expected, atol=1e-4)
        assert_close(model(to_ember(x)), expected, atol=1e-4)
        assert_close(ember.fx.Interpreter(egm).run(to_ember(x)), expected, atol=1e-4)
        assert_close(ember.fx.Transformer(egm).transform()(to_ember(x)), expected, atol=1e-4)
        assert_close(copy.deepcopy(egm)(to_ember(x)), expected, atol=1e-4)
    assert sorted(egm.state_dict()) == sorted(tgm.state_dict())

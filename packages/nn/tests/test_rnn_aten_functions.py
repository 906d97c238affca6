"""ember.rnn_tanh / rnn_relu / lstm / gru (ATen's flat-parameter forms) against PyTorch with the
weights of torch.nn.RNN/LSTM/GRU: outputs, final states and gradients, batch_first,
bidirectional, several layers, no biases, unbatched input; and the refused packed form."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

MODULES = {"lstm": "LSTM", "gru": "GRU", "rnn_tanh": "RNN", "rnn_relu": "RNN"}


@pytest.mark.parametrize("kind", sorted(MODULES))
@pytest.mark.parametrize("bidirectional, batch_first, layers, bias", [(False, False, 1, True), (True, True, 2, False)])
def test_matches_torch(kind, bidirectional, batch_first, layers, bias):
    rng = np.random.default_rng(len(kind) + layers)
    extra = {"nonlinearity": "relu" if kind == "rnn_relu" else "tanh"} if MODULES[kind] == "RNN" else {}
    module = getattr(torch.nn, MODULES[kind])(3, 4, layers, bias=bias, batch_first=batch_first,
                                              bidirectional=bidirectional, **extra).double()
    x = rng.standard_normal((2, 5, 3) if batch_first else (5, 2, 3))
    h = rng.standard_normal((layers * (2 if bidirectional else 1), 2, 4))
    c = rng.standard_normal(h.shape)
    res = []
    for lib in (torch, ember):
        params = [lib.tensor(p.detach().numpy(), requires_grad=True) for p in module._flat_weights]
        leaf = lib.tensor(x, requires_grad=True)
        hx = [lib.tensor(h), lib.tensor(c)] if kind == "lstm" else lib.tensor(h)
        outs = getattr(lib, kind)(leaf, hx, params, bias, layers, 0.0, False, bidirectional, batch_first)
        sum((o * o).sum() for o in outs).backward()
        res.append([o.detach().numpy() for o in outs] + [leaf.grad.numpy()] + [p.grad.numpy() for p in params])
    for e, t in zip(res[1], res[0]):
        np.testing.assert_allclose(e, t, rtol=1e-10, atol=1e-12)


def test_unbatched_and_errors():
    module = torch.nn.GRU(3, 4).double()
    x = np.random.default_rng(0).standard_normal((5, 3))
    h = np.zeros((1, 4))
    ps = [p.detach() for p in module._flat_weights]
    # PyTorch's gru takes batches only: its result on a batch of one, squeezed
    t = torch.gru(torch.tensor(x)[:, None], torch.tensor(h)[:, None], ps, True, 1, 0.0, False, False, False)
    e = ember.gru(ember.tensor(x), ember.tensor(h), [ember.tensor(p.numpy()) for p in ps], True, 1, 0.0, False,
                  False, False)
    for a, b in zip(e, t):
        np.testing.assert_allclose(a.numpy(), b.squeeze(1).numpy(), atol=1e-12)
    with pytest.raises(RuntimeError):
        ember.gru(ember.tensor(x), ember.tensor(h), [ember.tensor(p.numpy()) for p in ps[:2]], True, 1, 0.0, False,
                  False, False)
    with pytest.raises(RuntimeError):
        ember.lstm(ember.zeros(4, 3), ember.tensor([2, 2]), [ember.zeros(4, 4)], [], True, 1, 0.0, False, False)

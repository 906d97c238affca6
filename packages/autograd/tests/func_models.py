"""Small networks written once for both libraries: ``lib`` is ``ember`` or ``torch``.

Each model is a pure function of a parameter dict and one sample (the way ``torch.func`` users
write per-sample code), built from ops both libraries have at top level, so the autograd package
tests need nothing from ``ember.nn``.
"""

from __future__ import annotations

import numpy as np
import torch

import ember


def to_ember(tree):
    if isinstance(tree, dict):
        return {k: to_ember(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(to_ember(v) for v in tree)
    if isinstance(tree, torch.Tensor):
        return ember.tensor(tree.detach().numpy())
    return tree


def to_numpy(tree):
    if isinstance(tree, dict):
        return {k: to_numpy(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(to_numpy(v) for v in tree)
    if isinstance(tree, (torch.Tensor, ember.Tensor)):
        return np.asarray(tree.detach().numpy() if isinstance(tree, torch.Tensor) else tree.detach().numpy())
    return tree


def assert_trees_close(actual, expected, rtol=1e-4, atol=1e-5):
    a, e = to_numpy(actual), to_numpy(expected)
    if isinstance(e, dict):
        assert set(a) == set(e)
        for k in e:
            assert_trees_close(a[k], e[k], rtol, atol)
    elif isinstance(e, (tuple, list)):
        assert len(a) == len(e)
        for x, y in zip(a, e):
            assert_trees_close(x, y, rtol, atol)
    else:
        assert a.shape == e.shape, (a.shape, e.shape)
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def _nll(lib, logits, y):
    logp = lib.log_softmax(logits, -1)
    return -lib.gather(logp, -1, y.reshape(1)).sum()


# -- an MLP ------------------------------------------------------------------------------------------

def mlp_params(seed=0, sizes=(10, 16, 16, 4)):
    g = torch.Generator().manual_seed(seed)
    p = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        p[f"w{i}"] = torch.randn(b, a, generator=g) / a ** 0.5
        p[f"b{i}"] = torch.randn(b, generator=g) * 0.1
    return p


def mlp(lib, p, x):
    n = len(p) // 2
    h = x
    for i in range(n):
        h = h @ p[f"w{i}"].T + p[f"b{i}"]
        if i < n - 1:
            h = lib.tanh(h)
    return h


def mlp_loss(lib, p, x, y):
    return _nll(lib, mlp(lib, p, x), y)


# -- a CNN ---------------------------------------------------------------------------------------------

def cnn_params(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "c1": torch.randn(4, 1, 3, 3, generator=g) / 3, "cb1": torch.randn(4, generator=g) * 0.1,
        "c2": torch.randn(6, 4, 3, 3, generator=g) / 6, "cb2": torch.randn(6, generator=g) * 0.1,
        "fc": torch.randn(3, 6 * 2 * 2, generator=g) / 5, "fb": torch.randn(3, generator=g) * 0.1,
    }


def cnn(lib, p, x):
    """x: (1, 8, 8) one image."""
    h = lib.relu(lib.conv2d(x.unsqueeze(0), p["c1"], p["cb1"], padding=1))
    h = lib.max_pool2d(h, 2)
    h = lib.relu(lib.conv2d(h, p["c2"], p["cb2"], padding=1))
    h = lib.max_pool2d(h, 2)
    return h.flatten(1) @ p["fc"].T + p["fb"]


def cnn_loss(lib, p, x, y):
    return _nll(lib, cnn(lib, p, x)[0], y)


# -- a small transformer block -------------------------------------------------------------------------

def transformer_params(seed=0, d=8, vocab=11, ff=16):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g) / s[-1] ** 0.5  # noqa: E731
    return {
        "emb": torch.randn(vocab, d, generator=g) * 0.5,
        "wq": r(d, d), "wk": r(d, d), "wv": r(d, d), "wo": r(d, d),
        "ln1w": 1 + 0.1 * torch.randn(d, generator=g), "ln1b": 0.1 * torch.randn(d, generator=g),
        "ff1": r(ff, d), "ff1b": 0.1 * torch.randn(ff, generator=g), "ff2": r(d, ff),
        "ln2w": 1 + 0.1 * torch.randn(d, generator=g), "ln2b": 0.1 * torch.randn(d, generator=g),
        "head": r(vocab, d),
    }


def transformer(lib, p, tokens):
    """tokens: (T,) integer ids of one sequence -> (T, vocab) logits (one causal attention block)."""
    d = p["wq"].shape[0]
    x = lib.embedding(p["emb"], tokens)
    q, k, v = x @ p["wq"].T, x @ p["wk"].T, x @ p["wv"].T
    scores = (q @ k.transpose(0, 1)) / d ** 0.5
    t = tokens.shape[0]
    mask = lib.triu(lib.ones(t, t), diagonal=1) * -1e9
    attn = lib.softmax(scores + mask, -1) @ v
    x = lib.layer_norm(x + attn @ p["wo"].T, (d,), p["ln1w"], p["ln1b"])
    gelu = torch.nn.functional.gelu if lib is torch else lib.gelu
    h = gelu(x @ p["ff1"].T + p["ff1b"]) @ p["ff2"].T
    x = lib.layer_norm(x + h, (d,), p["ln2w"], p["ln2b"])
    return x @ p["head"].T


def transformer_loss(lib, p, tokens, targets):
    logp = lib.log_softmax(transformer(lib, p, tokens), -1)
    return -lib.gather(logp, -1, targets.unsqueeze(-1)).mean()

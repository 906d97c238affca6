"""GCN and GAT node classification on a synthetic graph, written as pytorch/examples' gcn/ and
gat/ programs are (sparse adjacency built with ``sparse_coo_tensor``, normalized with sparse
diagonal matrices, ``spmm`` in the GCN layer), run once with ``torch`` and once with ``ember``
from the same initial weights: the losses must agree.

    PYTHONPATH=$(python ci/dev_env.py) python examples/sparse_graph_training.py [--epochs N]

``run(mod, ...)`` takes the framework module (``torch`` or ``ember``); nothing else differs.
Dropout is 0 so that both runs see the same computation (their random streams differ).
"""

from __future__ import annotations

import argparse

import numpy as np


def synthetic_graph(nodes: int = 300, features: int = 40, classes: int = 4, edges: int = 1200, seed: int = 0):
    """Node features (sparse bag-of-words-like counts), labels and a directed edge list."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, nodes)
    centers = rng.random((classes, features)) < 0.2
    feats = ((rng.random((nodes, features)) < 0.05) | (centers[labels] & (rng.random((nodes, features)) < 0.6)))
    # Edges mostly within a class, so that the graph carries the labels.
    src = rng.integers(0, nodes, edges)
    same = rng.random(edges) < 0.8
    pool = [np.flatnonzero(labels == c) for c in range(classes)]
    dst = np.where(same, [rng.choice(pool[labels[s]]) for s in src], rng.integers(0, nodes, edges))
    return feats.astype(np.int32), labels, np.stack([src, dst]).astype(np.int32)


def prepare(mod, feats, labels, edges):
    """The data pipeline of the examples' load_cora: row-normalized features via a sparse diagonal
    matrix, an adjacency with self loops, the GCN's D^-1/2 (A + I) D^-1/2 with sparse products."""
    features = mod.tensor(feats, dtype=mod.float32)
    scale = 1 / mod.sum(features, dim=1)
    scale[scale == float("inf")] = 0
    features = mod.diag(scale).to_sparse() @ features
    n, e = feats.shape[0], edges.shape[1]
    adj = mod.sparse_coo_tensor(mod.tensor(edges, dtype=mod.int64), mod.ones(e), (n, n), dtype=mod.int64)
    adj = mod.eye(n) + adj  # dense: the GAT's mask
    degree = mod.sqrt(1 / mod.sum(adj, dim=1))
    degree[degree == float("inf")] = 0
    degree = mod.diag(degree).to_sparse()
    normalized = (degree @ adj @ degree).to_sparse()
    return features.to_sparse(), mod.tensor(labels, dtype=mod.int64), normalized, adj


def gcn_model(mod, in_dim, hidden, classes, weights):
    nn, F = mod.nn, mod.nn.functional

    class GraphConv(nn.Module):
        def __init__(self, kernel, bias):
            super().__init__()
            self.kernel = nn.Parameter(mod.tensor(kernel))
            self.bias = nn.Parameter(mod.tensor(bias))

        def forward(self, x, adj):
            support = mod.mm(x, self.kernel)  # x is sparse in the first layer
            return mod.spmm(adj, support) + self.bias

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.gc1 = GraphConv(weights["w1"], weights["b1"])
            self.gc2 = GraphConv(weights["w2"], weights["b2"])

        def forward(self, x, adj):
            x = F.relu(self.gc1(x, adj))
            return F.log_softmax(self.gc2(x, adj), dim=1)

    return GCN()


def gat_model(mod, in_dim, hidden, heads, classes, weights):
    nn, F = mod.nn, mod.nn.functional

    class Attention(nn.Module):
        def __init__(self, w, a, heads, hidden):
            super().__init__()
            self.heads, self.hidden = heads, hidden
            self.W = nn.Parameter(mod.tensor(w))
            self.a = nn.Parameter(mod.tensor(a))

        def forward(self, h, adj):
            n = h.shape[0]
            wh = mod.mm(h, self.W).view(n, self.heads, self.hidden).permute(1, 0, 2)
            e = mod.matmul(wh, self.a[:, : self.hidden, :]) + mod.matmul(wh, self.a[:, self.hidden:, :]).mT
            e = F.leaky_relu(e, 0.2)
            e = mod.where(adj > 0, e, -9e16 * mod.ones_like(e))
            return mod.matmul(F.softmax(e, dim=-1), wh).mean(dim=0)

    class GAT(nn.Module):
        def __init__(self):
            super().__init__()
            self.gat1 = Attention(weights["W1"], weights["a1"], heads, hidden)
            self.gat2 = Attention(weights["W2"], weights["a2"], 1, classes)

        def forward(self, x, adj):
            return F.log_softmax(self.gat2(F.elu(self.gat1(x, adj)), adj), dim=1)

    return GAT()


def initial_weights(in_dim, hidden, heads, classes, seed=1):
    rng = np.random.default_rng(seed)

    def xavier(*shape):
        fan_in, fan_out = shape[-2], shape[-1]
        return (rng.standard_normal(shape) * np.sqrt(2.0 / (fan_in + fan_out))).astype(np.float32)

    return {
        "gcn": {"w1": xavier(in_dim, hidden), "b1": np.zeros(hidden, np.float32), "w2": xavier(hidden, classes),
                "b2": np.zeros(classes, np.float32)},
        "gat": {"W1": xavier(in_dim, hidden * heads), "a1": xavier(heads, 2 * hidden, 1),
                "W2": xavier(hidden, classes), "a2": xavier(1, 2 * classes, 1)},
    }


def run(mod, which: str, epochs: int = 30, hidden: int = 16, heads: int = 4, seed: int = 0, nodes: int = 300,
        edges: int = 1200) -> list[float]:
    """Training losses of ``which`` ("gcn" or "gat") for ``epochs`` Adam steps on the synthetic graph."""
    feats, labels_np, edges = synthetic_graph(nodes=nodes, edges=edges, seed=seed)
    features, labels, normalized, adj = prepare(mod, feats, labels_np, edges)
    classes = int(labels_np.max()) + 1
    weights = initial_weights(feats.shape[1], hidden, heads, classes)
    if which == "gcn":
        model, inputs = gcn_model(mod, feats.shape[1], hidden, classes, weights["gcn"]), (features, normalized)
    else:
        model, inputs = gat_model(mod, feats.shape[1], hidden, heads, classes, weights["gat"]), (features.to_dense(),
                                                                                              adj)
    optimizer = mod.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    criterion = mod.nn.NLLLoss()
    train = mod.arange(0, feats.shape[0], 2)
    losses = []
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = criterion(model(*inputs)[train], labels[train])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=50)
    args = parser.parse_args()
    import torch

    import ember

    for which in ("gcn", "gat"):
        ours, theirs = run(ember, which, args.epochs), run(torch, which, args.epochs)
        worst = max(abs(a - b) for a, b in zip(ours, theirs))
        print(f"{which}: loss {ours[0]:.4f} -> {ours[-1]:.4f} (torch {theirs[0]:.4f} -> {theirs[-1]:.4f}), "
              f"largest difference {worst:.2e}")


if __name__ == "__main__":
    main()

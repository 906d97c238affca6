"""cross_entropy/nll_loss on (N, C, d1, ...) scores read in place (issue 18): ``_class_nll`` takes
the classes on dim 1 and the CPU kernels read them with a stride, by column blocks of positions
(a chunked max and log-sum-exp, then the target's pick; the backward writes the gradient by
the same blocks). Against torch: values and gradients over dtypes, reductions, weights,
ignore_index, label smoothing, log-probability inputs; class counts past one L2 chunk and
position counts past one block (vector tails too); extreme scores; non-contiguous layouts
(classes contiguous, both strided); empty dims; vmap and double backward of the spatial case."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {"float32": dict(rtol=2e-5, atol=3e-6), "float64": dict(rtol=1e-10, atol=1e-12),
       "bfloat16": dict(rtol=3e-2, atol=2e-2)}

CASES = [
    dict(shape=(4, 7, 33, 5)),  # positions 165: whole vectors and a scalar tail
    dict(shape=(3, 5, 1500), weight=True),  # two column blocks of positions
    dict(shape=(2, 3000, 48), ignore_index=3),  # classes span two L2 chunks; the backward's two-read path
    dict(shape=(2, 3000, 16), weight=True),  # two L2 chunks in the forward; the backward's stored path (float32)
    dict(shape=(3, 6, 17), ignore_index=-100, label_smoothing=0.2, weight=True),
    dict(shape=(2, 9, 4, 3), label_smoothing=0.1, ignore_index=0),
    dict(shape=(2, 1, 20)),
]


def _inputs(case, seed=0):
    shape = case["shape"]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    y = rng.integers(0, shape[1], (shape[0],) + shape[2:])
    if "ignore_index" in case and y.size:
        y.reshape(-1)[::3] = case["ignore_index"]
    w = rng.uniform(0.2, 2.0, shape[1]) if case.get("weight") else None
    return x, y, w


def _kwargs(lib, case, w, dtype, reduction):
    kw = dict(reduction=reduction, label_smoothing=case.get("label_smoothing", 0.0))
    if "ignore_index" in case:
        kw["ignore_index"] = case["ignore_index"]
    if w is not None:
        kw["weight"] = lib.tensor(w, dtype=getattr(lib, dtype))
    return kw


def _run(lib, F, x, y, kw, dtype, layout=None, nll=False):
    leaf = lib.tensor(x, dtype=getattr(lib, dtype)).requires_grad_()
    scores = leaf if layout is None else layout(leaf)
    if nll:
        kw = {k: v for k, v in kw.items() if k != "label_smoothing"}
        loss = F.nll_loss(F.log_softmax(scores, 1), lib.tensor(y), **kw)
    else:
        loss = F.cross_entropy(scores, lib.tensor(y), **kw)
    g = np.random.default_rng(1).standard_normal(tuple(loss.shape))
    loss.backward(lib.tensor(g, dtype=loss.dtype))
    return loss.detach().float().numpy(), leaf.grad.float().numpy()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_cross_entropy_classes_on_dim1(case, dtype, reduction):
    x, y, w = _inputs(case)
    out = [_run(lib, F, x, y, _kwargs(lib, case, w, dtype, reduction), dtype) for lib, F in ((ember, EF), (torch, TF))]
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, **TOL[dtype])


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("case", CASES[:5], ids=str)
def test_nll_loss_log_probs_on_dim1(case, reduction):
    x, y, w = _inputs(case, seed=5)
    out = [_run(lib, F, x, y, _kwargs(lib, case, w, "float32", reduction), "float32", nll=True)
           for lib, F in ((ember, EF), (torch, TF))]
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, **TOL["float32"])


LAYOUTS = {
    # classes contiguous (channels last): the row kernels, the gradient scattered by rows
    "channels_last": (lambda a: a.transpose(0, 2, 3, 1), lambda t: t.permute(0, 3, 1, 2)),
    # positions strided by 2, classes strided: rows gathered
    "every_other_position": (lambda a: np.concatenate([a, a], axis=3), lambda t: t[:, :, :, ::2]),
    # a sliced batch: the column kernels with an outer stride
    "sliced_batch": (lambda a: np.concatenate([a, a], axis=0), lambda t: t[::2]),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_non_contiguous_scores(layout, dtype):
    case = dict(shape=(3, 6, 5, 19), ignore_index=1, label_smoothing=0.1, weight=True)
    x, y, w = _inputs(case, seed=2)
    store, view = LAYOUTS[layout]
    base = np.ascontiguousarray(store(x))
    out = []
    for lib, F in ((ember, EF), (torch, TF)):
        kw = _kwargs(lib, case, w, dtype, "none")
        leaf = lib.tensor(base, dtype=getattr(lib, dtype)).requires_grad_()
        scores = view(leaf)
        assert tuple(scores.shape) == case["shape"] and not scores.is_contiguous()
        loss = F.cross_entropy(scores, lib.tensor(y), **kw)
        loss.backward(lib.tensor(np.random.default_rng(1).standard_normal(tuple(loss.shape)), dtype=loss.dtype))
        out.append((loss.detach().numpy(), leaf.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, **TOL[dtype])


@pytest.mark.parametrize("s", [24, 60])  # the backward stores the exponentials (24) or reads x twice (60)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_dim1_extreme_scores(dtype, s):
    # Over two L2 chunks of classes: a max that grows in the second chunk, -inf scores (a
    # target among them gives inf), a whole position of -inf (NaN), NaN and +inf scores, huge spreads.
    n, c = 2, 2500
    x = np.random.default_rng(4).standard_normal((n, c, s)) * 3
    x[:, 2000:, 0] += 60.0
    x[:, :1500, 1] = -np.inf
    x[0, :, 2] = -np.inf
    x[1, 2100, 3] = np.nan
    x[1, 2200, 4] = np.inf
    x[:, ::2, 5] = 1e4
    x[:, 1::2, 5] = -1e4
    y = np.random.default_rng(5).integers(1500, c, (n, s))
    y[0, 6] = 0
    x[0, 0, 6] = -np.inf
    out = []
    for lib, F in ((ember, EF), (torch, TF)):
        leaf = lib.tensor(x, dtype=getattr(lib, dtype)).requires_grad_()
        loss = F.cross_entropy(leaf, lib.tensor(y), reduction="none")
        loss.backward(lib.ones(tuple(loss.shape), dtype=loss.dtype))
        out.append((loss.detach().numpy(), leaf.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, equal_nan=True, **TOL[dtype])


@pytest.mark.parametrize("shape", [(0, 5, 4), (2, 5, 0), (3, 4, 0, 2)], ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_dim1_empty(shape, reduction):
    x = np.zeros(shape)
    y = np.zeros((shape[0],) + shape[2:], dtype=np.int64)
    out = [_run(lib, F, x, y, dict(reduction=reduction), "float32") for lib, F in ((ember, EF), (torch, TF))]
    for a, b in zip(*out):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, equal_nan=True)


def test_cross_entropy_dim1_target_out_of_range():
    x = ember.zeros((2, 4, 3))
    y = ember.tensor(np.array([[0, 1, 4], [0, 0, 0]]))
    with pytest.raises(IndexError, match="out of bounds"):
        EF.cross_entropy(x, y)


def test_cross_entropy_dim1_double_backward_and_vmap():
    rng = np.random.default_rng(6)
    x, y, w = rng.standard_normal((3, 5, 4, 2)), rng.integers(0, 5, (3, 4, 2)), rng.uniform(0.5, 2, 5)
    y[0, 0, 0] = -100
    grads = []
    for lib, F in ((ember, EF), (torch, TF)):
        leaf = lib.tensor(x, dtype=lib.float64).requires_grad_()
        loss = F.cross_entropy(leaf, lib.tensor(y), weight=lib.tensor(w), label_smoothing=0.1)
        (g,) = lib.autograd.grad(loss, leaf, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), leaf)
        grads.append((g.detach().numpy(), gg.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    # vmap over a leading batch of (N, C, d) problems: each one's loss and gradient.
    ex, ey = ember.tensor(x, dtype=ember.float64), ember.tensor(y)

    def per(xb, yb):
        return EF.cross_entropy(xb, yb, reduction="sum", label_smoothing=0.1)

    got = ember.func.vmap(per)(ex.unsqueeze(0).expand(2, *x.shape) * ember.tensor([[[[[1.0]]]], [[[[2.0]]]]],
                                                                              dtype=ember.float64),
                               ey.unsqueeze(0).expand(2, *y.shape))
    tx = torch.tensor(x)
    want = [TF.cross_entropy(tx * k, torch.tensor(y), reduction="sum", label_smoothing=0.1).item() for k in (1.0, 2.0)]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)
    got_grad = ember.func.vmap(ember.func.grad(per))(ex.unsqueeze(0).expand(2, *x.shape).contiguous(),
                                                     ey.unsqueeze(0).expand(2, *y.shape))
    txl = torch.tensor(x, requires_grad=True)
    TF.cross_entropy(txl, torch.tensor(y), reduction="sum", label_smoothing=0.1).backward()
    np.testing.assert_allclose(got_grad.numpy()[1], txl.grad.numpy(), rtol=1e-9, atol=1e-12)

"""cross_entropy's forward saves each row's log-sum-exp and its backward reads it (issue 13/16):
loss and input gradient against torch over float32/float64/bfloat16/float16, the reductions,
weights, ignore_index, label smoothing, classes on dim 1 of N-d scores, empty batches and
infinite/NaN scores; the lse handed to the one-pass backward kernel (its dtype and shape), the
op's lse output itself, and double backward (the composite) unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF
from ember._src.dispatch import OPS

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-10, atol=1e-12),
       "bfloat16": dict(rtol=3e-2, atol=2e-2), "float16": dict(rtol=4e-3, atol=2e-3)}

CASES = [
    dict(shape=(6, 11), weight=True, ignore_index=3),
    dict(shape=(5, 9), label_smoothing=0.15, ignore_index=-100),
    dict(shape=(3, 8, 2, 3), weight=True, label_smoothing=0.1),  # classes on dim 1, N-d targets
    dict(shape=(0, 5)),
    dict(shape=(0, 4, 3)),
    dict(shape=(7, 6), specials=True),
    dict(shape=(4, 6, 5), specials=True, ignore_index=0),
]


def _data(case):
    shape = case["shape"]
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape) * 3
    c = shape[1]
    y = rng.integers(0, c, (shape[0],) + shape[2:])
    if case.get("specials") and x.size:
        rows = x.reshape(shape[0], c, -1)
        rows[0, 2, 0] = np.inf  # a +inf score: the row's loss and gradient are NaN
        rows[1, :, 0] = -np.inf  # every score -inf: NaN as well
        rows[2, 1, 0] = np.nan
        rows[3, 0, 0] = -np.inf  # one -inf score among finite ones: an ordinary row
    if "ignore_index" in case and y.size:
        y.reshape(-1)[1::3] = case["ignore_index"]
    w = rng.uniform(0.3, 2.0, c) if case.get("weight") else None
    return x, y, w


def _run(lib, F, x, y, w, dtype, reduction, case):
    xt = lib.tensor(x, dtype=getattr(lib, dtype)).requires_grad_()
    kw = dict(reduction=reduction, label_smoothing=case.get("label_smoothing", 0.0))
    if "ignore_index" in case:
        kw["ignore_index"] = case["ignore_index"]
    if w is not None:
        kw["weight"] = lib.tensor(w, dtype=getattr(lib, dtype))
    loss = F.cross_entropy(xt, lib.tensor(y), **kw)
    g = np.random.default_rng(1).uniform(0.5, 1.5, tuple(loss.shape))
    loss.backward(lib.tensor(g, dtype=loss.dtype))
    return loss.detach().to(lib.float64).numpy(), xt.grad.to(lib.float64).numpy()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_matches_torch(case, dtype, reduction):
    x, y, w = _data(case)
    got = _run(ember, EF, x, y, w, dtype, reduction, case)
    want = _run(torch, TF, x, y, w, dtype, reduction, case)
    for g, r, what in zip(got, want, ("loss", "grad")):
        np.testing.assert_allclose(g, r, equal_nan=True, err_msg=what, **TOL[dtype])


@pytest.fixture
def saved_lse(monkeypatch):
    """The lse argument of every CPU ``_class_nll_backward`` call."""
    op = OPS["_class_nll_backward"]
    kernel, seen = op.kernels["cpu"], []

    def spy(*args):
        seen.append(args[7] if len(args) > 7 else None)
        return kernel(*args)

    monkeypatch.setitem(op.kernels, "cpu", spy)
    return seen


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_backward_kernel_gets_the_forward_lse(saved_lse, dtype):
    x = ember.randn(4, 7, 3, dtype=getattr(ember, dtype), requires_grad=True)
    y = ember.tensor([[0, 1, 2], [3, 4, 5], [6, 0, 1], [2, 3, 4]])
    EF.cross_entropy(x, y, label_smoothing=0.1).backward()
    (lse,) = saved_lse
    assert lse.dtype is (ember.float64 if dtype == "float64" else ember.float32)
    assert tuple(lse.shape) == (4, 3)
    want = torch.logsumexp(torch.tensor(x.detach().to(ember.float64).numpy()), 1)
    np.testing.assert_allclose(lse.detach().to(ember.float64).numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_nll_loss_on_log_probabilities_has_no_lse(saved_lse):
    x = ember.randn(5, 4).log_softmax(1).requires_grad_()
    EF.nll_loss(x, ember.tensor([0, 1, 2, 3, 0])).backward()
    assert saved_lse == [None]
    nll, sm, wt, lse = ember.ops._class_nll(x.detach(), ember.tensor([0, 1, 2, 3, 0]), None, -100, True, False)
    assert tuple(lse.shape) == (0,) and tuple(sm.shape) == (0,)


@pytest.mark.parametrize("spatial", [False, True])
def test_lse_output_is_logsumexp_nan_for_an_infinite_max(spatial):
    """Every row's, ignored ones included (an ignored row's gradient is NaN where its lse is, as
    PyTorch's); NaN where the row's max is infinite (PyTorch's logsumexp says inf, its
    log_softmax NaN); no gradient of its own."""
    x = np.random.default_rng(4).standard_normal((5, 6, 3) if spatial else (5, 6)).astype(np.float32)
    x[1, 2], x[3, :], x[2, 4] = np.inf, -np.inf, np.nan
    y = np.array([0, 1, 2, 3, 4])
    if spatial:
        y = np.stack([y, y, y], 1)
    lse = ember.ops._class_nll(ember.tensor(x, requires_grad=True), ember.tensor(y), None, 2, False, False)[3]
    assert not lse.requires_grad
    want = torch.logsumexp(torch.tensor(x), 1).numpy()
    want[1], want[3] = np.nan, np.nan
    np.testing.assert_allclose(lse.numpy(), want, rtol=1e-6, equal_nan=True)


def test_columns_layout_reads_the_saved_lse():
    """(N, C, H, W) scores (positions contiguous, classes strided): the column-block backward."""
    x = np.random.default_rng(5).standard_normal((2, 5, 40, 30))
    y = np.random.default_rng(6).integers(0, 5, (2, 40, 30))
    y[0, 0, :7] = -100
    got = _run(ember, EF, x, y, None, "float32", "mean", {})
    want = _run(torch, TF, x, y, None, "float32", "mean", {})
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=2e-5, atol=2e-7)


def test_double_backward_unchanged():
    x = np.random.default_rng(7).standard_normal((4, 6))
    y = np.array([0, 5, 2, 3])
    out = []
    for lib, F in ((ember, EF), (torch, TF)):
        xt = lib.tensor(x, requires_grad=True)
        (g,) = lib.autograd.grad(F.cross_entropy(xt, lib.tensor(y), label_smoothing=0.1), xt, create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), xt)
        out.append((g.detach().numpy(), gg.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("shape", [(2, 5), (3, 300), (2, 5, 3), (2, 5, 40)])
@pytest.mark.parametrize("scale", [1e30, -1e30, 3e38, 1e6, 1e4])
def test_cross_entropy_of_huge_scores_keeps_the_loss_and_gradient(dtype, shape, scale):
    # Scores so large that lse = max + log(sum) rounds to the max: the loss must not be formed as
    # lse - x[t] (it came out 0 where torch gives log(C)), and the backward must not read
    # exp(x - lse) from the rounded lse (every class got probability 1).
    rng = np.random.default_rng(0)
    # spread: 1e-6 of the scale (the lse rounding) or 1e-3 (score differences of 1e27: a term of
    # the one-pass exp sum came out -inf and the loss NaN)
    spread = 1e-3 if scale in (1e30, 1e4) else 1e-6
    x = (np.full(shape, scale) * (1 + rng.random(shape) * spread)).astype(np.float32)
    t = rng.integers(0, shape[1], size=(shape[0],) + shape[2:])
    xt = torch.tensor(x).to(getattr(torch, dtype)).requires_grad_()
    xe = ember.tensor(x).to(getattr(ember, dtype)).requires_grad_()
    lt, le = TF.cross_entropy(xt, torch.tensor(t)), EF.cross_entropy(xe, ember.tensor(t))
    lt.backward()
    le.backward()
    np.testing.assert_allclose(le.float().item(), lt.float().item(), rtol=2e-2)
    np.testing.assert_allclose(np.array(xe.grad.float().tolist()), xt.grad.float().numpy(), rtol=2e-2, atol=2e-3)

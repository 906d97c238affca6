"""cross_entropy and nll_loss compiled by the C++ backend: ``_class_nll`` (forward) and
``_class_nll_backward`` (the AOT backward's one node, fed the forward's saved log-sum-exp) are
decomposed into one kernel each (a row kernel forward, a pointwise pass backward), never run as
extern calls; loss and input gradient checked against eager ember and PyTorch
over ignore_index, the three reductions, label smoothing, class weights, (N, C, d) inputs and
float64. Needs no GPU (the Triton twins are in ``inductor_triton_cases.py``)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from inductor_test_helpers import spy_on_builds

import ember
from ember.compiler.inductor import config

ROWS, CLASSES = 37, 50


@pytest.fixture
def built(monkeypatch):
    """Every artifact ``lower_and_build`` makes in the test (forward and backward graphs)."""
    out = spy_on_builds(monkeypatch)
    monkeypatch.setattr(config, "fallback_on_error", False)
    return out


def _data(shape, classes, dtype, seed=0, ignore=-100):
    g = np.random.default_rng(seed)
    x = g.standard_normal(shape) * 3
    target_shape = (shape[0],) + tuple(shape[2:])
    y = g.integers(0, classes, target_shape)
    y.reshape(-1)[::5] = ignore  # some rows ignored
    w = g.uniform(0.2, 2.0, classes)
    return x.astype(dtype), y, w.astype(dtype)


def _run(fw, fn, x, y, w, **kw):
    x = fw.tensor(x, requires_grad=True)
    y = fw.tensor(y)
    w = None if w is None else fw.tensor(w)
    loss = fn(fw, x, y, w, **kw)
    loss.sum().backward()
    return loss.detach().numpy(), x.grad.numpy()


def _is_backward(artifact) -> bool:
    """A build of cross-entropy's backward (a training graph's is ``_class_nll_split_backward``)."""
    return "_class_nll_backward" in artifact.cpp_source or "_class_nll_split_backward" in artifact.cpp_source


def _cross_entropy(fw, x, y, w, **kw):
    return fw.nn.functional.cross_entropy(x, y, weight=w, **kw)


def _nll(fw, x, y, w, **kw):
    return fw.nn.functional.nll_loss(fw.log_softmax(x, 1), y, weight=w, **kw)


def _check(built, fn, shape, dtype=np.float32, weighted=False, ignore=-100, **kw):
    x, y, w = _data(shape, shape[1], dtype, ignore=ignore)
    w = w if weighted else None
    compiled = ember.compile(lambda m, *a, **k: fn(m, *a, **k))

    def run_compiled(fw, x, y, w, **k):
        return compiled(fw, x, y, w, **k)

    got = _run(ember, run_compiled, x, y, w, ignore_index=ignore, **kw)
    eager = _run(ember, fn, x, y, w, ignore_index=ignore, **kw)
    ref = _run(torch, fn, x, y, w, ignore_index=ignore, **kw)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    for g, e, r, what in zip(got, eager, ref, ("loss", "grad")):
        np.testing.assert_allclose(g, e, err_msg=f"{what} vs eager", **tol)
        np.testing.assert_allclose(g, r, err_msg=f"{what} vs torch", **tol)
    externs = [line for a in built for line in a.wrapper_source.splitlines() if "# _class_nll" in line]
    assert built and not externs, "\n".join(externs)
    return built


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_forward_and_backward(built, reduction, smoothing, weighted):
    _check(built, _cross_entropy, (ROWS, CLASSES), weighted=weighted, reduction=reduction,
           label_smoothing=smoothing)


def test_one_row_kernel_each_way(built):
    """The logits are read by one kernel forward and one backward (softmax stats, the target's
    logit and the gradient all in one row loop nest)."""
    _check(built, _cross_entropy, (ROWS, CLASSES))
    for art in built:
        full = [line for line in art.cpp_source.splitlines() if line.startswith("// kernel")]
        rowwise = [k for k in full if "_class_nll" in k]
        assert len(rowwise) == 1, art.cpp_source


def test_spatial_targets_and_custom_ignore_index(built):
    _check(built, _cross_entropy, (6, 7, 5, 3), ignore=3, label_smoothing=0.2)


def test_float64(built):
    _check(built, _cross_entropy, (ROWS, CLASSES), dtype=np.float64, weighted=True, label_smoothing=0.05)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_nll_loss_on_log_probabilities(built, reduction):
    _check(built, _nll, (ROWS, CLASSES), weighted=True, reduction=reduction)


def test_every_row_ignored_gives_nan_mean_as_eager(built):
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    y = np.full((4,), -100)
    compiled = ember.compile(lambda a, b: ember.nn.functional.cross_entropy(a, b))
    got = compiled(ember.tensor(x), ember.tensor(y)).item()
    want = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(y)).item()
    assert np.isnan(got) and np.isnan(want)


def test_out_of_range_target_gives_nan_not_a_plausible_loss(built):
    """Eager raises before computing; a compiled kernel cannot, so the row's loss is NaN
    (docs/deviations.md)."""
    x = np.zeros((3, 4), np.float32)
    compiled = ember.compile(lambda a, b: ember.nn.functional.cross_entropy(a, b, reduction="none"))
    got = compiled(ember.tensor(x), ember.tensor(np.array([1, 4, 2]))).numpy()
    assert np.isnan(got[1]) and np.isfinite(got[[0, 2]]).all()


def test_infinite_logits_follow_eager(built):
    x = np.array([[0.0, np.inf, 1.0], [-np.inf, -np.inf, -np.inf], [np.nan, 0.0, 1.0], [1.0, 2.0, -np.inf]],
                 np.float32)
    y = np.array([0, 1, 2, 2])
    compiled = ember.compile(lambda a, b: ember.nn.functional.cross_entropy(a, b, reduction="none"))
    got = compiled(ember.tensor(x), ember.tensor(y)).numpy()
    want = ember.nn.functional.cross_entropy(ember.tensor(x), ember.tensor(y), reduction="none").numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("scale", [1e30, -1e30, 1e6])
def test_huge_logits_loss_follows_eager_and_torch(built, scale):
    # lse = max + log(sum) rounds to the max at these scales: the loss is (x[t] - max) - log(sum),
    # not x[t] - lse (which gave 0 where torch gives log(C)). (The backward reads the saved lse;
    # with |lse| this large its gradient is not exact: see packages/compile/NOTES.md, session 17.)
    g = np.random.default_rng(1)
    x = (scale * (1 + g.random((6, 9)) * 1e-7)).astype(np.float32)
    y = g.integers(0, 9, 6)
    x[0] = scale  # a row of equal scores: its loss is log(9) exactly
    compiled = ember.compile(lambda a, b: ember.nn.functional.cross_entropy(a, b, reduction="none"))
    got = compiled(ember.tensor(x), ember.tensor(y)).numpy()
    want = ember.nn.functional.cross_entropy(ember.tensor(x), ember.tensor(y), reduction="none").numpy()
    ref = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(y), reduction="none").numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(got, ref, rtol=1e-5)


@pytest.mark.parametrize("weighted", [False, True])
def test_backward_reads_the_saved_logsumexp(built, weighted):
    """The forward's fourth output (each row's log-sum-exp) is a saved activation of the AOT
    backward, whose kernel is then exp(x - lse) pointwise: no row max, no sum of exponentials
    (one exp an element, written straight out); unweighted, no reduction at all (an accumulator
    would be one; with weights the target's weight is picked by a reduction over the weights)."""
    _check(built, _cross_entropy, (ROWS, CLASSES), weighted=weighted)
    backward = [a for a in built if _is_backward(a)]
    assert len(backward) == 1, [a.cpp_source for a in built]
    source = backward[0].cpp_source
    kernels = source[source.index("// kernel"):]
    assert "EMBER_MAX(" not in kernels and "fmax" not in kernels, kernels
    assert weighted or "acc_" not in kernels, kernels
    # one exp an element: inline, or (a pointwise kernel of rows) the prelude's row exp in place
    assert "ember_expf(" in kernels or "ember_exp_row_f32(" in kernels, kernels
    # every reduction loop (from its accumulator to its result) computes no exponential
    for start in re.finditer(r"float (acc_\w+) = ", kernels):
        body = kernels[start.start():kernels.index(f"= {start.group(1)};", start.end())]
        assert "ember_expf(" not in body, body
    forward = [a for a in built if a is not backward[0]]
    assert all(not _is_backward(a) for a in forward)


@pytest.mark.parametrize("weighted", [False, True])
def test_forward_gathers_the_target_logit(built, weighted):
    """The forward's target logit (and weight) is one load at the target's column, not a masked
    sum over the row: the row kernel has no reduction loop left but the max and the exp-sum (the
    prelude's row helpers), and gives the masked sum's values: a -0.0 target logit, targets out
    of range (NaN), ignored rows, NaN and inf logits."""
    g = np.random.default_rng(3)
    x = g.standard_normal((6, 40)).astype(np.float32)
    y = g.integers(0, 40, 6)
    x[0, y[0]] = -0.0
    x[1, (y[1] + 1) % 40] = np.nan  # another column's NaN: NaN loss (the log-sum-exp)
    x[2, y[2]] = np.inf
    y[3] = -100
    y[4] = 40  # out of range
    w = g.uniform(0.2, 2.0, 40).astype(np.float32) if weighted else None
    ew = None if w is None else ember.tensor(w)
    tw = None if w is None else torch.tensor(w)
    for fn, tfn in ((lambda a, b, c: ember.nn.functional.cross_entropy(a, b, weight=c, reduction="none"),
                     lambda a, b, c: torch.nn.functional.cross_entropy(a, b, weight=c, reduction="none")),
                    (lambda a, b, c: ember.nn.functional.nll_loss(a, b, weight=c, reduction="none"),
                     lambda a, b, c: torch.nn.functional.nll_loss(a, b, weight=c, reduction="none"))):
        got = ember.compile(fn)(ember.tensor(x), ember.tensor(y), ew).numpy()
        keep = np.arange(6) != 4  # eager (both) raises on the out-of-range target
        want = tfn(torch.tensor(x[keep]), torch.tensor(y[keep]), tw).numpy()
        np.testing.assert_allclose(got[keep], want, rtol=1e-6, atol=0)
        assert np.isnan(got[4])
    forward = [a for a in built if "_class_nll" in a.cpp_source and not _is_backward(a)]
    kernel = forward[0].cpp_source.split("EMBER_KERNEL void ")[1]
    assert "pick_" in kernel and "== " not in kernel, kernel
    loops = re.findall(r"for \(int64_t (\w+) = ", kernel)
    assert len(loops) == 1, kernel  # the rows; the row's passes are the helpers


def test_forward_reads_each_row_once(built):
    """The forward's row max and sum of exponentials come from one pass over the row
    (``ember_row_max_exp_sum_f32``, shifted by the target's logit as eager's one-pass log-sum-exp),
    with the next row prefetched; rows whose target logit is far below their max (past the one
    pass's range: the two passes then), rows of every scale, NaN and inf logits, ignored rows and
    rows shorter than its blocks give PyTorch's loss and gradient (the backward reads the saved
    log-sum-exp)."""
    g = np.random.default_rng(5)
    for classes in (20, 300):
        x = g.standard_normal((14, classes)).astype(np.float32)
        x *= np.array([0.01, 0.1, 1, 3, 10, 30, 60, 100, 1, 1, 1, 1, 1, 1], np.float32)[:, None]
        y = g.integers(0, classes, 14)
        x[8, y[8]] -= 50.0  # the target 50 below the others: one pass
        x[9, y[9]] -= 90.0  # 90 below: the two passes
        x[10, (y[10] + 1) % classes] = np.inf
        x[11, (y[11] + 1) % classes] = np.nan
        x[12, y[12]] = np.inf
        y[13] = -100
        ok = np.array([r not in (10, 11, 12) for r in range(14)])
        fn = ember.compile(lambda a, b: ember.nn.functional.cross_entropy(a, b, reduction="none"))
        ex = ember.tensor(x, requires_grad=True)
        got = fn(ex, ember.tensor(y))
        got.sum().backward()
        tx = torch.tensor(x, requires_grad=True)
        want = torch.nn.functional.cross_entropy(tx, torch.tensor(y), reduction="none")
        want.sum().backward()
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(ex.grad.numpy()[ok], tx.grad.numpy()[ok], rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(np.isnan(ex.grad.numpy()), np.isnan(tx.grad.numpy()))
    forward = [a for a in built if "_class_nll" in a.cpp_source and not _is_backward(a)]
    assert forward
    for artifact in forward:
        kernel = artifact.cpp_source.split("EMBER_KERNEL void ")[1]
        assert "ember_row_max_exp_sum_f32(" in kernel, kernel
        assert "ember_row_max_f32(" not in kernel and "ember_exp_shift_sum_f32(" not in kernel, kernel
        assert re.search(r"ember_row_max_exp_sum_f32\([^;]*\? &", kernel), kernel  # the next row prefetched


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("scale", [1e5, -1e5, 1e30])
@pytest.mark.parametrize("kw", [{}, {"weighted": True, "label_smoothing": 0.1}])
def test_huge_logits_gradient_follows_eager_and_torch(scale, dtype, kw):
    """A training graph's backward undoes the rounding of the saved lse (``_class_nll_split``): with
    |lse| ~ 1e5 its float32 rounding (~4e-3) was the softmax's relative error, at 1e30 every
    probability came out 1. Now the loss and gradient are eager's and PyTorch's."""
    kw = dict(kw)
    g = np.random.default_rng(7)
    spread = 1e-5 if abs(scale) < 1e10 else 1e-7  # a few units apart: several classes share the softmax
    x = (scale * (1 + g.random((24, 10)) * spread)).astype(np.float32)
    x[0] = scale  # equal scores
    y = g.integers(0, 10, 24)
    y[3] = -100
    w = g.uniform(0.5, 2.0, 10).astype(np.float32) if kw.pop("weighted", False) else None
    results = []
    for fw, compiled in ((ember, True), (ember, False), (torch, False)):
        xt = fw.tensor(x).to(getattr(fw, dtype)).requires_grad_()
        wt = None if w is None else fw.tensor(w).to(getattr(fw, dtype))

        def loss_of(a, b, wt=wt, fw=fw):
            return fw.nn.functional.cross_entropy(a, b, weight=wt, **kw)

        fn = ember.compile(loss_of) if compiled else loss_of
        loss = fn(xt, fw.tensor(y))
        loss.backward()
        results.append((loss.detach().float().numpy(), xt.grad.float().numpy()))
    (loss_c, grad_c), (loss_e, grad_e), (loss_t, grad_t) = results
    tol = 2e-5 if dtype == "float32" else 1e-2
    if not kw:  # (eager's label-smoothing term is -(sum(w x) - sum(w) lse), which cancels at these scales)
        np.testing.assert_allclose(loss_c, loss_e, rtol=tol)
    np.testing.assert_allclose(loss_c, loss_t, rtol=tol)
    scale_g = np.abs(grad_t).max()
    np.testing.assert_allclose(grad_c, grad_e, rtol=tol, atol=tol * scale_g)
    np.testing.assert_allclose(grad_c, grad_t, rtol=tol, atol=tol * scale_g)

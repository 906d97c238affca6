"""cross_entropy's one-pass backward (``_class_nll_backward``) and the norm kernels at the
machine's vector width, against torch: values and gradients over dtypes, weights,
ignore_index, label smoothing, reductions, spatial targets and odd sizes; and the composite
backward that double backward still takes."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-10, atol=1e-12),
       "bfloat16": dict(rtol=3e-2, atol=2e-2)}


def _leaf(lib, a, dtype):
    return lib.tensor(a, dtype=getattr(lib, dtype)).requires_grad_()


CE_CASES = [
    dict(shape=(5, 7)),
    dict(shape=(33, 1000), weight=True),
    dict(shape=(6, 9), ignore_index=2),
    dict(shape=(6, 9), ignore_index=-100, label_smoothing=0.2, weight=True),
    dict(shape=(4, 5, 3, 2), label_smoothing=0.1),
    dict(shape=(1, 1)),
    dict(shape=(0, 4)),
    dict(shape=(7,)),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("case", CE_CASES, ids=str)
def test_cross_entropy_forward_backward(case, dtype, reduction):
    shape = case["shape"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 3
    c = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    y = rng.integers(0, c, tshape)
    if "ignore_index" in case and y.size:
        y.reshape(-1)[::3] = case["ignore_index"]
    w = rng.uniform(0.2, 2.0, c) if case.get("weight") else None
    out = []
    for lib, F in ((ember, EF), (torch, TF)):
        xt = _leaf(lib, x, dtype)
        kw = dict(reduction=reduction, label_smoothing=case.get("label_smoothing", 0.0))
        if "ignore_index" in case:
            kw["ignore_index"] = case["ignore_index"]
        if w is not None:
            kw["weight"] = lib.tensor(w, dtype=getattr(lib, dtype))
        loss = F.cross_entropy(xt, lib.tensor(y), **kw)
        g = np.random.default_rng(1).standard_normal(tuple(loss.shape))
        loss.backward(lib.tensor(g, dtype=loss.dtype))
        out.append((loss.detach().float().numpy(), xt.grad.float().numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, **TOL[dtype])


def test_cross_entropy_non_contiguous_logits_and_double_backward():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((10, 6)), rng.integers(0, 10, 6)
    grads = []
    for lib, F in ((ember, EF), (torch, TF)):
        leaf = _leaf(lib, x, "float64")
        loss = F.cross_entropy(leaf.t(), lib.tensor(y), label_smoothing=0.1)
        (g,) = (ember if lib is ember else torch).autograd.grad(loss, leaf, create_graph=True)
        (gg,) = (ember if lib is ember else torch).autograd.grad((g * g).sum(), leaf)
        grads.append((g.detach().numpy(), gg.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("shape,norm", [((4, 1000), (1000,)), ((3, 5, 37), (5, 37)), ((1, 1), (1,)), ((0, 8), (8,)),
                                        ((2, 17), (17,))], ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_and_rms_norm(shape, norm, dtype, affine):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape) * 2 + 1
    w, b = rng.standard_normal(norm), rng.standard_normal(norm)
    res = []
    for lib, F in ((ember, EF), (torch, TF)):
        xt = _leaf(lib, x, dtype)
        wt, bt = (_leaf(lib, w, dtype), _leaf(lib, b, dtype)) if affine else (None, None)
        y1 = F.layer_norm(xt, norm, wt, bt)
        y2 = F.rms_norm(xt, norm, wt)
        (y1.sum() + (y2 * y2).sum()).backward()
        res.append([y1.detach().float().numpy(), y2.detach().float().numpy(), xt.grad.float().numpy()]
                   + ([wt.grad.float().numpy(), bt.grad.float().numpy()] if affine else []))
    tol = dict(TOL[dtype])
    if dtype == "float32":
        tol = dict(rtol=1e-4, atol=1e-4)  # column sums over up to 1000 rows
    if dtype == "bfloat16":
        tol = dict(rtol=3e-2, atol=0.1)  # gradients rounded to bfloat16 at other points than torch's
    for a, b2 in zip(*res):
        np.testing.assert_allclose(a, b2, **tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows,n", [(200, 96), (64, 33), (1, 5), (130, 1), (3, 40000)], ids=str)
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("transposed", [False, True])
def test_layer_norm_backward_row_pass_sums(rows, n, dtype, affine, transposed):
    # dweight/dbias are summed in dx's row pass, in parts of 64 rows (rows past one part, a ragged
    # last part, one row, one column; 40000-wide rows keep the column pass), against torch with a
    # random upstream gradient, for a transposed (non-contiguous) input too.
    rng = np.random.default_rng(rows * 7 + n)
    x = rng.standard_normal((n, rows) if transposed else (rows, n)) * 2 + 0.5
    w, b = rng.standard_normal(n), rng.standard_normal(n)
    g = rng.standard_normal((rows, n))
    res = []
    for lib, F in ((ember, EF), (torch, TF)):
        leaf = _leaf(lib, x, dtype)
        xt = leaf.t() if transposed else leaf
        wt = _leaf(lib, w, dtype) if affine in ("both", "weight") else None
        bt = _leaf(lib, b, dtype) if affine in ("both", "bias") else None
        F.layer_norm(xt, (n,), wt, bt).backward(lib.tensor(g, dtype=getattr(lib, dtype)))
        res.append([leaf.grad.numpy()] + [p.grad.numpy() for p in (wt, bt) if p is not None])
    tol = dict(rtol=1e-9, atol=1e-10) if dtype == "float64" else dict(rtol=2e-4, atol=2e-4)
    for a, b2 in zip(*res, strict=True):
        np.testing.assert_allclose(a, b2, **tol)


def test_layer_norm_backward_sums_do_not_depend_on_threads():
    rng = np.random.default_rng(9)
    x = ember.tensor(rng.standard_normal((300, 64)), dtype=ember.float32).requires_grad_()
    w = ember.tensor(rng.standard_normal(64), dtype=ember.float32).requires_grad_()
    b = ember.tensor(rng.standard_normal(64), dtype=ember.float32).requires_grad_()
    g = ember.tensor(rng.standard_normal((300, 64)), dtype=ember.float32)
    threads = ember.get_num_threads()
    grads = []
    try:
        for count in (1, 2):
            ember.set_num_threads(count)
            x.grad = w.grad = b.grad = None
            EF.layer_norm(x, (64,), w, b).backward(g)
            grads.append([t.grad.numpy().copy() for t in (x, w, b)])
    finally:
        ember.set_num_threads(threads)
    for a, b2 in zip(*grads, strict=True):
        np.testing.assert_array_equal(a, b2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_row_kernels_over_many_rows(dtype):
    # The row kernels (layer_norm and rms_norm prefetch the next row while computing one; softmax,
    # log_softmax and cross_entropy beside them): many short rows and a ragged width, against torch.
    rng = np.random.default_rng(11)
    x = rng.standard_normal((257, 37)) * 3
    g = rng.standard_normal((257, 37))
    y = rng.integers(0, 37, 257)
    res = []
    for lib, F in ((ember, EF), (torch, TF)):
        leaf = _leaf(lib, x, dtype)
        gt = lib.tensor(g, dtype=getattr(lib, dtype))
        outs = [F.softmax(leaf, -1), F.log_softmax(leaf, -1), F.layer_norm(leaf, (37,)), F.rms_norm(leaf, (37,))]
        loss = sum((o * gt).sum() for o in outs) + F.cross_entropy(leaf, lib.tensor(y))
        loss.backward()
        res.append([o.detach().numpy() for o in outs] + [leaf.grad.numpy()])
    tol = dict(rtol=1e-9, atol=1e-10) if dtype == "float64" else dict(rtol=1e-4, atol=1e-4)
    for a, b2 in zip(*res, strict=True):
        np.testing.assert_allclose(a, b2, **tol)


@pytest.mark.parametrize("shape", [(2048, 1024), (2100, 1001)], ids=str)
def test_large_outputs_written_with_streaming_stores(shape):
    # Outputs of 8 MiB and more are written with streaming stores (common/stream_store.h):
    # layer_norm forward and backward (dx; dweight/dbias summed in the same pass), rms_norm, and
    # softmax/log_softmax over dim 0 with their gradients; rows of 1024 floats start on a vector
    # boundary, rows of 1001 floats mostly not (scalar head, vector body, tail), against torch.
    rng = np.random.default_rng(21)
    x = rng.standard_normal(shape).astype(np.float32) * 2 + 0.5
    g = rng.standard_normal(shape).astype(np.float32)
    n = shape[1]
    w, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    res = []
    for lib, F in ((ember, EF), (torch, TF)):
        leaf = lib.tensor(x).requires_grad_()
        wt, bt = lib.tensor(w).requires_grad_(), lib.tensor(b).requires_grad_()
        gt = lib.tensor(g)
        outs = [F.layer_norm(leaf, (n,), wt, bt), F.rms_norm(leaf, (n,), wt), F.softmax(leaf, 0),
                F.log_softmax(leaf, 0)]
        sum((o * gt).sum() for o in outs).backward()
        res.append([o.detach().numpy() for o in outs] + [leaf.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()])
    for a, b2 in zip(*res, strict=True):
        np.testing.assert_allclose(a, b2, rtol=2e-4, atol=5e-4)


@pytest.mark.parametrize("offset", [0, 16, 48, 8], ids=str)
def test_large_row_passes_on_numpy_inputs_at_any_offset(offset):
    # An input from from_numpy shares NumPy's buffer, which may start at any 4-byte offset from a
    # line; where the output lies less than 640 bytes after it modulo 4 KiB the row passes store
    # plainly instead of streaming (stream_store.h stream_clear_of). Either way the same values:
    # layer_norm (and its input gradient), rms_norm and softmax over dim 0 on the NumPy-backed
    # input equal, bit for bit, those on an ember-allocated copy, and torch's.
    rng = np.random.default_rng(22)
    rows, n = 2048, 1024
    base = np.zeros(rows * n + 32, np.float32)
    start = ((offset - base.ctypes.data % 64) % 64) // 4
    a = base[start:start + rows * n].reshape(rows, n)
    a[...] = rng.standard_normal((rows, n)).astype(np.float32) * 2 + 0.5
    assert a.ctypes.data % 64 == offset
    g = rng.standard_normal((rows, n)).astype(np.float32)
    w, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)

    def run(lib, F, x):
        leaf = x.requires_grad_()
        wt, bt = lib.tensor(w), lib.tensor(b)
        outs = [F.layer_norm(leaf, (n,), wt, bt), F.rms_norm(leaf, (n,), wt), F.softmax(leaf, 0)]
        (outs[0] * lib.tensor(g)).sum().backward()
        return [o.detach().numpy().copy() for o in outs] + [leaf.grad.numpy().copy()]

    shared = ember.from_numpy(a)
    assert shared.data_ptr() == a.ctypes.data
    got = run(ember, EF, shared)
    fresh = run(ember, EF, ember.tensor(a.copy()))
    want = run(torch, TF, torch.tensor(a.copy()))
    for x, y, z in zip(got, fresh, want, strict=True):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_allclose(x, z, rtol=2e-4, atol=5e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("c", [1003, 1024, 17], ids=str)
def test_row_kernels_prefetching_the_next_row(c, dtype):
    # softmax/log_softmax over the last dim and cross_entropy (weights, ignore_index, label
    # smoothing) prefetch the next row during a row's exp pass: many rows of odd and vector widths,
    # with an all -inf row, a row holding NaN, a row holding +inf and ignored rows between finite
    # ones, against torch; and every row of the batch bit-equal to that row computed alone (the
    # last row of a call prefetches nothing).
    rng = np.random.default_rng(c)
    rows = 41
    x = rng.standard_normal((rows, c)) * 3
    x[5] = -np.inf
    x[6, c // 2] = np.nan
    x[7, 1] = np.inf
    x[8, :-1] = -np.inf
    y = rng.integers(0, c, rows)
    y[[3, 9, 40]] = -100
    w = rng.uniform(0.2, 2.0, c)
    gr = rng.standard_normal(rows)
    res = []
    for lib, F in ((ember, EF), (torch, TF)):
        leaf = _leaf(lib, x, dtype)
        yt = lib.tensor(y)
        loss = F.cross_entropy(leaf, yt, weight=lib.tensor(w, dtype=getattr(lib, dtype)), label_smoothing=0.1,
                               reduction="none")
        g = lib.tensor(gr, dtype=getattr(lib, dtype))
        loss[10:].backward(g[10:])
        res.append([F.softmax(leaf.detach(), -1).numpy(), F.log_softmax(leaf.detach(), -1).numpy(),
                    loss.detach()[10:].numpy(), leaf.grad[10:].numpy()])
    for a, b in zip(*res, strict=True):
        np.testing.assert_allclose(a, b, **TOL[dtype], equal_nan=True)
    xe = ember.tensor(x, dtype=getattr(ember, dtype))
    whole = [EF.softmax(xe, -1), EF.log_softmax(xe, -1), EF.cross_entropy(xe, ember.tensor(y), reduction="none")]
    for r in (0, 4, 5, 6, 7, 8, 11, rows - 1):
        one = xe[r:r + 1].clone()
        single = [EF.softmax(one, -1), EF.log_softmax(one, -1),
                  EF.cross_entropy(one, ember.tensor(y[r:r + 1]), reduction="none")]
        for a, b in zip(whole, single, strict=True):
            np.testing.assert_array_equal(a[r:r + 1].numpy(), b.numpy())


@pytest.mark.parametrize("c", [1, 15, 16, 17, 33, 1000], ids=str)
def test_cross_entropy_rows_shifted_by_the_target_score(c):
    # float32 rows take their log-sum-exp in one pass shifted by the target's score (row_lse_shifted,
    # loss.cpp) and fall back to max + exp sum where that sum is not finite: a loss beyond exp's
    # range (target far below the rest), around its edge (~88), a -inf target (loss inf), a +inf
    # or NaN score (NaN), scores offset by 1e4. Against torch in float32 and, for the finite losses,
    # within a few ulp of torch in float64 on the same inputs; the same bits for one or two threads.
    rng = np.random.default_rng(c)
    rows = 24
    x = rng.standard_normal((rows, c)).astype(np.float32) * 2
    y = rng.integers(0, c, rows)
    if c > 1:
        y[:8] = (np.arange(8) * 7) % c
        x[0, y[0]] = -120.0
        x[1, y[1]] = -86.5
        x[2, y[2]] = -88.9
        x[3, y[3]] = -np.inf
        x[4, (y[4] + 1) % c] = np.inf
        x[5, (y[5] + 1) % c] = np.nan
        x[6] += 1e4
        x[7, y[7]] = 30.0
    xe, ye = ember.tensor(x), ember.tensor(y)
    leaf = xe.clone().requires_grad_()
    loss = EF.cross_entropy(leaf, ye, reduction="none")
    tleaf = torch.tensor(x).requires_grad_()
    tloss = TF.cross_entropy(tleaf, torch.tensor(y), reduction="none")
    # (Row 6 loses ~ulp(1e4) of its loss and gradient to rounding the lse in float32 on both
    # sides: its loss is checked against float64 below.)
    keep = np.arange(rows) != 6
    np.testing.assert_allclose(loss.detach().numpy()[keep], tloss.detach().numpy()[keep], **TOL["float32"],
                               equal_nan=True)
    g = rng.standard_normal(rows).astype(np.float32)
    loss.backward(ember.tensor(g))
    tloss.backward(torch.tensor(g))
    np.testing.assert_allclose(leaf.grad.numpy()[keep], tleaf.grad.numpy()[keep], **TOL["float32"], equal_nan=True)
    ref = TF.cross_entropy(torch.tensor(x, dtype=torch.float64), torch.tensor(y), reduction="none").numpy()
    got = loss.detach().numpy()
    fin = np.isfinite(ref)
    # A few ulp of the loss, plus half an ulp of the lse (of the scores' size), rounded to float32.
    scale = np.where(np.isfinite(x), np.abs(x), 0).max(axis=1)[fin]
    ulp = np.spacing(np.abs(ref[fin]).astype(np.float32)).astype(np.float64)
    np.testing.assert_array_less(np.abs(got[fin] - ref[fin]), 4 * ulp + np.spacing(scale) + 1e-7)
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(2)
        two = EF.cross_entropy(xe, ye, reduction="none").numpy()
    finally:
        ember.set_num_threads(before)
    np.testing.assert_array_equal(two, EF.cross_entropy(xe, ye, reduction="none").numpy())


@pytest.mark.parametrize("shape", [(2, 7, 5, 9), (3, 40, 33), (2, 100, 1040)], ids=str)
def test_cross_entropy_columns_shifted_by_the_target_score(shape):
    # float32 scores with the classes on dim 1 take each position's log-sum-exp in one pass shifted
    # by its target's score (the first class's where the position is ignored), and the two-pass
    # column_lse for a whole block where a sum is not finite: a loss beyond exp's range, a -inf
    # target, a +inf or NaN score, ignored positions; against torch, loss and gradient.
    rng = np.random.default_rng(shape[-1])
    x = rng.standard_normal(shape).astype(np.float32) * 2
    y = rng.integers(0, shape[1], (shape[0],) + shape[2:])
    xf, yf = x.reshape(shape[0], shape[1], -1), y.reshape(shape[0], -1)
    yf[0, :4] = 3
    xf[0, 3, 0] = -120.0
    xf[0, 3, 1] = -np.inf
    xf[0, 3, 2] = -87.0
    yf[1, :5] = -100
    xf[1, 0, 1] = -200.0
    if shape[-1] > 20:
        xf[1, 1, 20] = np.inf
        xf[1, 2, 21] = np.nan
    for reduction in ("none", "mean"):
        res = []
        for lib, F in ((ember, EF), (torch, TF)):
            leaf = lib.tensor(x).requires_grad_()
            loss = F.cross_entropy(leaf, lib.tensor(y), reduction=reduction)
            (loss.sum() if reduction == "none" else loss).backward()
            res.append((loss.detach().numpy(), leaf.grad.numpy()))
        for a, b in zip(*res, strict=True):
            np.testing.assert_allclose(a, b, **TOL["float32"], equal_nan=True)


def test_cross_entropy_columns_loss_within_ulps_of_float64():
    # The dim-1 forward's lse = g + log(s) per 16 positions (log_ge1_m512, common/vecmath.h): tiny
    # losses (s just above 1), moderate and large ones (up to ~80), scores offset by 1e4, and a
    # tail of positions beyond the last 16 (1040 = 65 x 16: none; 1045: 5); within a few ulp of
    # the loss (plus half an ulp of the scores' size) of torch in float64 on the same inputs.
    for npos in (1040, 1045):
        rng = np.random.default_rng(npos)
        x = rng.standard_normal((2, 30, npos)).astype(np.float32)
        y = rng.integers(0, 30, (2, npos))
        xt = np.take_along_axis(x, y[:, None], 1)[:, 0]
        margin = np.concatenate([np.full(npos // 4, 25.0), np.full(npos // 4, -10.0),
                                 np.full(npos // 4, -78.0), np.zeros(npos - 3 * (npos // 4))])
        np.put_along_axis(x, y[:, None], (xt + margin)[:, None].astype(np.float32), 1)
        x[1, :, : npos // 8] += 1e4
        loss = EF.cross_entropy(ember.tensor(x), ember.tensor(y), reduction="none").numpy()
        ref = TF.cross_entropy(torch.tensor(x, dtype=torch.float64), torch.tensor(y), reduction="none").numpy()
        scale = np.abs(x).max(axis=1)
        ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
        np.testing.assert_array_less(np.abs(loss - ref), 4 * ulp + np.spacing(scale) + 1e-7)

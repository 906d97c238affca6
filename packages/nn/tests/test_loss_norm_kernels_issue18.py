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

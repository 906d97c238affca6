"""CUDA kernels of var/std/var_mean/std_mean, batch norm (training and eval, forward and backward),
max/avg pooling (forward and backward) and cummax/cummin, each compared with the CPU result
(GPU only; the core's tests compare the CPU kernels with PyTorch)."""

from __future__ import annotations

import pytest
from cuda_helpers import assert_same, needs_gpu, rand

import ember

nn = pytest.importorskip("ember.nn")
F = pytest.importorskip("ember.nn.functional")

pytestmark = [pytest.mark.gpu, needs_gpu]


@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.bfloat16])
@pytest.mark.parametrize("dim,keepdim,correction", [(None, False, 1), (1, True, 0), ((0, 2), False, 1), (-1, False, 2)])
def test_variance_family_matches_cpu(name, dtype, dim, keepdim, correction):
    x = rand((6, 7, 9), seed=1).to(dtype) * 3 + 1
    fn = getattr(ember, name)
    got = fn(x.cuda(), dim, correction=correction, keepdim=keepdim)
    want = fn(x, dim, correction=correction, keepdim=keepdim)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        assert_same(g, w, dtype, rtol=1e-4 if dtype is ember.float32 else None)


def test_variance_of_a_non_contiguous_view_and_its_gradient():
    x = rand((8, 10), seed=2).t()
    xs = []
    for device in ("cuda", "cpu"):
        xd = x.detach().to(device).requires_grad_()
        ember.std(xd, 0).sum().backward()
        xs.append((ember.var(x.to(device), 1), xd.grad))
    for g, w in zip(*xs):
        assert_same(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (8, 5), (2, 4, 7)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_and_eval_match_cpu(shape, affine):
    x = rand(shape, seed=3) * 2 + 0.5
    results = []
    for device in ("cuda", "cpu"):
        ember.manual_seed(0)
        bn = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d}[len(shape)](shape[1], affine=affine)
        bn = bn.to(device)
        if affine:
            with ember.no_grad():
                bn.weight.copy_(rand((shape[1],), seed=4).to(device))
                bn.bias.copy_(rand((shape[1],), seed=5).to(device))
        xd = x.clone().to(device).requires_grad_()  # a fresh leaf per run (x.to("cpu") is x itself)
        g = rand(shape, seed=6).to(device)
        out = bn(xd)
        out.backward(g)
        row = [out, xd.grad, bn.running_mean, bn.running_var]
        if affine:
            row += [bn.weight.grad, bn.bias.grad]
        bn.eval()
        xe = x.clone().to(device).requires_grad_()
        oe = bn(xe)
        oe.backward(g)
        results.append(row + [oe, xe.grad])
    names = ["out", "x.grad", "running_mean", "running_var"] + (["weight.grad", "bias.grad"] if affine else [])
    for name, g, w in zip(names + ["eval out", "eval x.grad"], *results):
        assert tuple(g.shape) == tuple(w.shape), name
        assert_same(g, w, rtol=1e-4, atol=1e-4)


def test_batch_norm_bfloat16_matches_cpu():
    x = (rand((4, 3, 5, 5), seed=7) * 2).to(ember.bfloat16)
    outs = []
    for device in ("cuda", "cpu"):
        outs.append(F.batch_norm(x.to(device), None, None, training=True))
    assert_same(outs[0], outs[1], ember.bfloat16)


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil", [(2, 2, 0, 1, False), (3, 2, 1, 1, True),
                                                                 ((3, 2), (1, 2), (1, 0), (2, 1), False)])
@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
def test_max_pool2d_forward_backward_match_cpu(kernel, stride, padding, dilation, ceil, dtype):
    x = rand((2, 3, 11, 9), seed=8).to(dtype)
    res = []
    for device in ("cuda", "cpu"):
        xd = x.clone().to(device).requires_grad_()
        out, idx = F.max_pool2d(xd, kernel, stride, padding, dilation, ceil_mode=ceil, return_indices=True)
        out.backward(rand(tuple(out.shape), seed=9).to(dtype).to(device))
        res.append((out, idx, xd.grad))
    for g, w in zip(*res):
        assert_same(g, w, dtype)


@pytest.mark.parametrize("kernel,stride,padding,ceil,include_pad,divisor", [
    (2, 2, 0, False, True, None), (3, 2, 1, True, True, None), (3, 2, 1, False, False, None),
    ((3, 2), (1, 2), (1, 0), True, False, 5)])
def test_avg_pool2d_forward_backward_match_cpu(kernel, stride, padding, ceil, include_pad, divisor):
    x = rand((2, 3, 10, 9), seed=10)
    res = []
    for device in ("cuda", "cpu"):
        xd = x.clone().to(device).requires_grad_()
        out = F.avg_pool2d(xd, kernel, stride, padding, ceil_mode=ceil, count_include_pad=include_pad,
                           divisor_override=divisor)
        out.backward(rand(tuple(out.shape), seed=11).to(device))
        res.append((out, xd.grad))
    for g, w in zip(*res):
        assert_same(g, w, rtol=1e-5, atol=1e-6)


def test_pooling_layers_in_a_small_cnn_match_cpu():
    x = rand((4, 1, 12, 12), seed=12)
    res = []
    for device in ("cuda", "cpu"):
        ember.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(4, 4, 3), nn.AvgPool2d(2), nn.Flatten()).to(device)
        out = model(x.to(device))
        out.sum().backward()
        res.append([out] + [p.grad for p in model.parameters()])
    for g, w in zip(*res):
        assert_same(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", [ember.float32, ember.int64, ember.bfloat16])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin_match_cpu(name, dtype, dim):
    x = rand((5, 300, 3), seed=13).to(dtype)
    if dtype is ember.float32:
        x[1, 7, 0] = float("nan")
        x[2, 3:9, 1] = 1.0  # ties: the last index of the running extreme, as PyTorch
    fn = getattr(ember, name)
    got, want = fn(x.cuda(), dim), fn(x, dim)
    assert_same(got.values, want.values, dtype)
    assert_same(got.indices, want.indices)


@pytest.mark.parametrize("p", [2, 1, 3, 0.5, 0, float("inf"), float("-inf"), "fro"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, True), ((0, 2), False)])
def test_norm_matches_cpu(p, dim, keepdim):
    x = rand((4, 5, 6), seed=15)
    x[0, 0, 0] = 0.0
    assert_same(ember.norm(x.cuda(), p, dim, keepdim), ember.norm(x, p, dim, keepdim), rtol=1e-5, atol=1e-6)


def test_norm_dtype_and_clip_grad_norm_match_cpu():
    x = rand((7, 9), seed=16).to(ember.bfloat16)
    assert_same(ember.norm(x.cuda(), 2, dtype=ember.float32), ember.norm(x, 2, dtype=ember.float32), rtol=1e-5)
    grads = []
    for device in ("cuda", "cpu"):
        ember.manual_seed(0)
        model = nn.Linear(6, 3).to(device)
        model(rand((4, 6), seed=17).to(device)).sum().backward()
        total = nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        grads.append([total] + [p.grad for p in model.parameters()])
    for g, w in zip(*grads):
        assert_same(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dim,keepdim", [((1,), False), ((0, 2), True), ((2,), False)])
def test_logsumexp_matches_cpu(dim, keepdim):
    x = rand((3, 4, 50), seed=18) * 30
    x[0, 0, :] = float("-inf")
    x[1, 1, 3] = float("inf")
    assert_same(ember.logsumexp(x.cuda(), dim, keepdim), ember.logsumexp(x, dim, keepdim), rtol=1e-5, atol=1e-5)
    xi = ember.tensor([[1, 2, 3], [4, 5, 6]])
    assert_same(ember.logsumexp(xi.cuda(), 1), ember.logsumexp(xi, 1), rtol=1e-6)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm_forward_backward_match_cpu(dtype, affine):
    x = rand((4, 6, 16), seed=19).to(dtype)
    res = []
    for device in ("cuda", "cpu"):
        xd = x.clone().to(device).requires_grad_()
        w = rand((16,), seed=20).to(dtype).to(device).requires_grad_() if affine else None
        out = F.rms_norm(xd, (16,), w)
        out.backward(rand(tuple(out.shape), seed=21).to(dtype).to(device))
        res.append([out, xd.grad] + ([w.grad] if affine else []))
    for g, w in zip(*res):
        assert_same(g, w, dtype, rtol=1e-4 if dtype is ember.float32 else None, atol=1e-4 if dtype is ember.float32
                    else None)


@pytest.mark.parametrize("pad,value", [((1, 2), 0.0), ((1, 1, 2, 0), -3.5), ((-1, 2, 0, -2), 1.0),
                                       ((0, 0, 1, 1, 2, 2), 7.0)])
def test_constant_pad_matches_cpu(pad, value):
    x = rand((2, 3, 5, 4), seed=22)
    xt = x.transpose(2, 3)  # a strided input
    for t in (x, xt):
        assert_same(F.pad(t.cuda(), pad, value=value), F.pad(t, pad, value=value))
    xd = x.clone().cuda().requires_grad_()
    F.pad(xd, pad, value=value).sum().backward()
    xc = x.clone().requires_grad_()
    F.pad(xc, pad, value=value).sum().backward()
    assert_same(xd.grad, xc.grad)

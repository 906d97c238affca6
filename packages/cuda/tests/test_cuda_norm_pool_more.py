"""group_norm (forward and backward), adaptive average/max pooling (forward and backward) and flip
on CUDA against the CPU kernels (GPU only)."""

from __future__ import annotations

import pytest
from cuda_helpers import assert_same, needs_gpu, rand

import ember

F = pytest.importorskip("ember.nn.functional")

pytestmark = [pytest.mark.gpu, needs_gpu]


def _grads(fn, *inputs):
    """fn's output and the gradients of its inputs, on the CPU and on CUDA."""
    results = []
    for dev in ("cpu", "cuda"):
        # Leaves of their own per device (a CPU leaf moved by .to() would be one graph's input).
        xs = [t.detach().to(dev).clone().requires_grad_() if t.is_floating_point() else t.to(dev) for t in inputs]
        out = fn(*xs)
        g = rand(tuple(out.shape), seed=9).to(out.dtype).to(dev)
        out.backward(g)
        results.append([out] + [x.grad for x in xs if x.requires_grad])
    return results


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16], ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(dtype, affine):
    x = rand((3, 6, 5, 4), dtype)
    w, b = rand((6,), dtype, seed=1), rand((6,), dtype, seed=2)
    args = (x, w, b) if affine else (x,)
    cpu, gpu = _grads(lambda x, *wb: F.group_norm(x, 3, *wb, eps=1e-5), *args)
    for got, want in zip(gpu, cpu):
        assert_same(got, want, dtype, rtol=1e-4 if dtype is ember.float32 else None,
                    atol=1e-4 if dtype is ember.float32 else None)


@pytest.mark.parametrize("size", [(4, 3), (1, 1), (7, 6), (2, 4)])
@pytest.mark.parametrize("kind", ["avg", "max"])
def test_adaptive_pool2d(kind, size):
    x = rand((2, 3, 9, 7))
    x[1, 2, 0, 0] = float("nan") if kind == "max" and size == (4, 3) else x[1, 2, 0, 0]
    fn = F.adaptive_avg_pool2d if kind == "avg" else F.adaptive_max_pool2d
    cpu, gpu = _grads(lambda t: fn(t, size), x)
    for got, want in zip(gpu, cpu):
        assert_same(got, want, rtol=1e-5, atol=1e-5)
    if kind == "max":
        _, i_gpu = fn(x.cuda(), size, return_indices=True)
        _, i_cpu = fn(x, size, return_indices=True)
        assert_same(i_gpu, i_cpu)
    assert_same(fn(x[0].cuda().half(), size), fn(x[0].half(), size), ember.float16)


def test_flip():
    x = rand((3, 4, 5), ember.int64)
    for dims in ((0,), (-1,), (0, 2), (0, 1, 2), ()):
        assert_same(ember.flip(x.cuda(), dims), ember.flip(x, dims))
    assert_same(ember.flip(x.cuda().transpose(0, 2), (1,)), ember.flip(x.transpose(0, 2), (1,)))


def test_composite_reductions_and_pointwise():
    x = rand((4, 6), seed=3)
    x[1, 2] = float("nan")
    ints = rand((4, 6), ember.int64, seed=4)
    for args in ((), (1,), ((0, 1),)):
        assert_same(ember.count_nonzero(ints.cuda(), *args), ember.count_nonzero(ints, *args))
    for kwargs in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        assert_same(ember.nanmean(x.cuda(), **kwargs), ember.nanmean(x, **kwargs))
    assert_same(ember.nanmean(x.cuda().half(), 1), ember.nanmean(x.half(), 1), ember.float16)
    for t in (x, ints, ints.to(ember.int32)):
        assert_same(ember.angle(t.cuda()), ember.angle(t))
        assert_same(ember.sgn(t.cuda()), ember.sgn(t))
        for mode in ("trunc", "floor"):
            d = ember.where(t == 0, ember.ones_like(t), t)
            assert_same(ember.div(t.cuda(), d.cuda(), rounding_mode=mode), ember.div(t, d, rounding_mode=mode))
            assert_same(ember.div(t.cuda(), -3, rounding_mode=mode), ember.div(t, -3, rounding_mode=mode))
    g, c = x.cuda(), x.clone()
    g.cumsum_(1), c.cumsum_(1)
    g.sgn_(), c.sgn_()
    assert_same(g, c)
    b = ints > 0
    assert_same(b.cuda() != False, b != False)  # noqa: E712 - a Python bool operand of a bool kernel
    assert_same(b.cuda() & True, b & True)


@pytest.mark.parametrize("name", ["i0", "special.i1", "special.modified_bessel_i0", "special.modified_bessel_i1",
                                  "special.erfcx", "special.bessel_j0", "special.bessel_j1", "special.bessel_y0",
                                  "special.bessel_y1", "special.log_ndtr", "logit"])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64], ids=str)
def test_special_functions(name, dtype):
    fn = ember
    for part in name.split("."):
        fn = getattr(fn, part)
    x = rand((64,), dtype, low=0.01, high=0.99) if name == "logit" else rand((64,), dtype, low=-6.0, high=6.0)
    tol = (1e-5, 1e-6) if dtype is ember.float32 else (1e-9, 1e-12)
    assert_same(fn(x.cuda()), fn(x), rtol=tol[0], atol=tol[1])
    if name == "logit":
        assert_same(ember.logit(x.cuda(), eps=0.1), ember.logit(x, eps=0.1), rtol=tol[0], atol=tol[1])


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.int32, ember.int64, ember.float64], ids=str)
def test_sort_topk(dtype):
    x = rand((5, 300), dtype, low=-50.0, high=50.0, seed=7)
    if dtype.is_floating_point:
        x[0, 3] = float("nan")
    for dim in (1, 0):
        for descending in (False, True):
            got = ember.sort(x.cuda(), dim=dim, descending=descending, stable=True)
            want = ember.sort(x, dim=dim, descending=descending, stable=True)
            assert_same(got[0], want[0])
            assert_same(got[1], want[1])
    assert_same(ember.argsort(x.cuda(), dim=1), ember.argsort(x, dim=1, stable=True))
    distinct = ember.randperm(5000).reshape(2, 2500).to(dtype) if dtype is not ember.bfloat16 else \
        ember.randperm(200).reshape(2, 100).to(dtype)
    for largest in (True, False):
        got, want = ember.topk(distinct.cuda(), 7, largest=largest), ember.topk(distinct, 7, largest=largest)
        assert_same(got.values, want.values)
        assert_same(got.indices, want.indices)
    long_rows = rand((2, 6000), dtype, seed=8)  # past one program's row: the host round trip
    assert_same(ember.sort(long_rows.cuda(), stable=True)[1], ember.sort(long_rows, stable=True)[1])


def test_searchsorted():
    seq = ember.sort(rand((3, 40), ember.int64, seed=9).float(), dim=-1).values
    vals = rand((3, 11), ember.int64, seed=10).float()
    for right in (False, True):
        assert_same(ember.searchsorted(seq.cuda(), vals.cuda(), right=right),
                    ember.searchsorted(seq, vals, right=right))
        assert_same(ember.searchsorted(seq[0].cuda(), vals.cuda(), right=right, out_int32=True),
                    ember.searchsorted(seq[0], vals, right=right, out_int32=True))
    order = ember.argsort(vals[0])
    assert_same(ember.searchsorted(vals[0].cuda(), seq[1].cuda(), sorter=order.cuda()),
                ember.searchsorted(vals[0], seq[1], sorter=order))
    # NaN, in the sequence or as the value, never stops the search (PyTorch's comparisons).
    s = ember.tensor([[0.0, 3.0, 4.0, float("nan"), float("nan")]]).cuda()
    v = ember.tensor([[19.0, float("nan"), 2.0]]).cuda()
    assert ember.searchsorted(s, v).cpu().tolist() == [[5, 5, 1]]


def test_multinomial_statistics():
    ember.manual_seed(0)
    p = ember.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]]).cuda()
    draws = ember.multinomial(p, 20000, replacement=True).cpu()
    for row in range(2):
        freq = ember.bincount(draws[row], minlength=4).float() / 20000
        want = (p[row] / p[row].sum()).cpu()
        assert (freq - want).abs().max().item() < 0.02, (freq, want)
    picks = ember.multinomial(p, 3).cpu()  # without replacement: distinct, never a zero weight
    for row in range(2):
        got = picks[row].tolist()
        assert len(set(got)) == 3 and all(p[row, i].item() > 0 for i in got)
    assert ember.multinomial(p[0], 1).shape == (1,)
    ember.multinomial(ember.tensor([[0.0, 0.0]]).cuda(), 1)
    with pytest.raises(RuntimeError, match="invalid multinomial distribution"):
        ember.cuda.synchronize()


@pytest.mark.parametrize("name", ["kthvalue", "median", "nanmedian"])
def test_kthvalue_median(name):
    x = ember.randperm(140).reshape(4, 7, 5).float()
    x[1, 2, 3] = float("nan")
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            args = (3, dim, keepdim) if name == "kthvalue" else (dim, keepdim)
            got, want = getattr(ember, name)(x.cuda(), *args), getattr(ember, name)(x, *args)
            assert_same(got[0], want[0])
            assert_same(got[1], want[1])


def test_more_samplers_statistics():
    ember.cuda.manual_seed(1)
    n = 200000
    x = ember.empty(n, device="cuda")
    assert abs(x.exponential_(2.0).mean().item() - 0.5) < 0.01 and x.min().item() >= 0
    assert abs(x.geometric_(0.3).mean().item() - 1 / 0.3) < 0.05 and x.min().item() == 1
    logs = x.log_normal_(0.5, 0.25).log()
    assert abs(logs.mean().item() - 0.5) < 0.01 and abs(logs.std().item() - 0.25) < 0.01
    assert abs(x.cauchy_(1.0, 2.0).cpu().median().item() - 1.0) < 0.05
    p = ember.tensor([[0.1], [0.9]]).cuda()
    b = ember.empty(2, n // 2, device="cuda").bernoulli_(p)
    assert ((b.mean(1).cpu() - ember.tensor([0.1, 0.9])).abs() < 0.01).all()
    with pytest.raises(RuntimeError, match="expects lambda > 0.0"):
        x.exponential_(-1.0)


def test_randperm_and_normal_tensor():
    ember.cuda.manual_seed(2)
    for n in (1, 100, 5000):
        p = ember.randperm(n, device="cuda")
        assert p.device.type == "cuda" and p.dtype is ember.int64
        assert sorted(p.cpu().tolist()) == list(range(n))
    assert ember.randperm(7, device="cuda", dtype=ember.float32).dtype is ember.float32
    mean = ember.tensor([[0.0], [1.0], [2.0]]).cuda()
    std = ember.full((1, 50000), 2.0).cuda()
    z = ember.normal(mean, std)
    assert tuple(z.shape) == (3, 50000)
    assert ((z.mean(1).cpu() - ember.tensor([0.0, 1.0, 2.0])).abs() < 0.05).all()
    assert ((z.std(1).cpu() - 2.0).abs() < 0.05).all()


def test_random_and_randint():
    ember.cuda.manual_seed(3)
    x = ember.randint(3, 9, (60000,), device="cuda")
    assert x.device.type == "cuda" and x.dtype is ember.int64
    counts = ember.bincount(x.cpu() - 3).float() / 60000
    assert counts.shape == (6,) and ((counts - 1 / 6).abs() < 0.01).all()
    y = ember.empty(20000, dtype=ember.int64, device="cuda").random_()
    assert y.min().item() >= 0 and abs(y.cpu().double().mean().item() / 2.0 ** 62 - 1) < 0.05
    f = ember.empty(5000, device="cuda").random_(0, 10)
    assert f.min().item() == 0 and f.max().item() == 9


def test_bincount_histc():
    x = rand((500,), ember.int64, low=0, high=30).abs()
    w = rand((500,), ember.float32, seed=11)
    for args in ((), (None, 40), (w,)):
        cuda_args = tuple(a.cuda() if isinstance(a, ember.Tensor) else a for a in args)
        assert_same(ember.bincount(x.cuda(), *cuda_args), ember.bincount(x, *args), rtol=1e-5, atol=1e-5)
    f = rand((2000,), ember.float32, seed=12)
    for args in ((), (10,), (7, -1.0, 1.0), (5, 0.5, 0.5)):
        assert_same(ember.histc(f.cuda(), *args), ember.histc(f, *args))
    with pytest.raises(RuntimeError, match="non-negative"):
        ember.bincount(ember.tensor([1, -1]).cuda())


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes(mode):
    for shape, pad in (((2, 3, 7), (2, 3)), ((2, 3, 5, 6), (1, 2, 3, 0)), ((3, 5, 6), (-1, 2, 4, 1)),
                       ((1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2))):
        cpu, gpu = _grads(lambda t, pad=pad: F.pad(t, pad, mode=mode), rand(shape, seed=13))
        for got, want in zip(gpu, cpu):
            assert_same(got, want, rtol=1e-5, atol=1e-5)


_INTERPOLATE = [("nearest", (2, 3, 5, 6), (10, 12)), ("nearest-exact", (2, 3, 5, 6), (7, 9)),
                ("linear", (2, 3, 7), (15,)), ("bilinear", (2, 3, 5, 6), (11, 3)),
                ("bicubic", (2, 3, 5, 6), (9, 13)), ("trilinear", (1, 2, 3, 4, 5), (5, 6, 7))]


@pytest.mark.parametrize("mode,shape,size", _INTERPOLATE)
def test_interpolate(mode, shape, size):
    aligns = (None,) if mode.startswith("nearest") else (False, True)
    for align in aligns:
        x = rand(shape, seed=14)
        cpu, gpu = _grads(lambda t, a=align: F.interpolate(t, size=size, mode=mode, align_corners=a), x)
        for got, want in zip(gpu, cpu):
            assert_same(got, want, rtol=1e-5, atol=1e-5)


def test_unfold_fold():
    x = rand((2, 3, 7, 8), seed=15)
    cpu, gpu = _grads(lambda t: F.unfold(t, (3, 2), dilation=(1, 1), padding=(1, 0), stride=(1, 2)), x)
    for got, want in zip(gpu, cpu):
        assert_same(got, want, rtol=1e-5, atol=1e-5)
    cols = rand((2, 3 * 6, 28), seed=16)
    assert_same(F.fold(cols.cuda(), (7, 8), (3, 2), padding=(1, 0), stride=(1, 2)),
                F.fold(cols, (7, 8), (3, 2), padding=(1, 0), stride=(1, 2)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [ember.float16, ember.uint8, ember.int16], ids=str)
def test_sort_topk_narrow_dtypes(dtype):
    x = rand((3, 257), dtype, low=-20.0, high=20.0, seed=17)
    for descending in (False, True):
        got = ember.sort(x.cuda(), dim=-1, descending=descending, stable=True)
        want = ember.sort(x, dim=-1, descending=descending, stable=True)
        assert_same(got[0], want[0])
        assert_same(got[1], want[1])
    got, want = ember.topk(x.cuda(), 2, dim=0), ember.topk(x, 2, dim=0)
    assert_same(got.values, want.values)


def test_topk_over_a_vocabulary_and_non_contiguous_sort():
    logits = ember.randperm(4 * 50257).reshape(4, 50257).float()  # distinct: indices are unambiguous
    for x, k, dim, largest in ((logits, 50, -1, True), (logits, 3, -1, False), (logits.t(), 10, 0, True),
                               (logits.reshape(2, 2, 50257).to(ember.bfloat16), 5, 2, True), (logits, 400, -1, True)):
        got, want = ember.topk(x.cuda(), k, dim, largest), ember.topk(x, k, dim, largest)
        assert_same(got.values, want.values)
        if x.dtype is ember.float32:  # bfloat16 rounding makes ties
            assert_same(got.indices, want.indices)
    x = rand((40, 30), seed=18).t()
    got, want = ember.sort(x.cuda(), dim=0, stable=True), ember.sort(x, dim=0, stable=True)
    assert_same(got[0], want[0])
    assert_same(got[1], want[1])
    got, want = ember.sort(x.cuda(), dim=1, stable=True), ember.sort(x, dim=1, stable=True)
    assert_same(got[1], want[1])


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float64], ids=str)
def test_pad_and_interpolate_dtypes(dtype):
    x = rand((2, 3, 6, 7), dtype, seed=19)
    for mode in ("reflect", "replicate", "circular"):
        assert_same(F.pad(x.cuda(), (2, 1, 1, 3), mode=mode), F.pad(x, (2, 1, 1, 3), mode=mode))
    for mode, kw in (("nearest", {}), ("bilinear", {"align_corners": False}), ("bicubic", {"align_corners": True})):
        assert_same(F.interpolate(x.cuda(), scale_factor=1.7, mode=mode, **kw),
                    F.interpolate(x, scale_factor=1.7, mode=mode, **kw))

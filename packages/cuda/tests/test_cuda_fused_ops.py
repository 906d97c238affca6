"""CUDA kernels that replace composites: the fused Adam/AdamW update, the cross-entropy forward
(with the row log-sum-exp it saves) and its one-pass backward; and the CUDA autocast refusal of
binary_cross_entropy (GPU only; each compared with the CPU result, which the core's tests compare
with PyTorch)."""

from __future__ import annotations

import pytest
from cuda_helpers import assert_same, needs_gpu, rand

import ember

nn = pytest.importorskip("ember.nn")
F = pytest.importorskip("ember.nn.functional")

pytestmark = [pytest.mark.gpu, needs_gpu]


def _adam_run(device, decoupled, maximize, weight_decay, dtype=ember.float32, steps=3):
    shapes = [(33, 17), (5,), (1000,), (4, 4, 4)]
    params = [rand(s, seed=i).to(dtype).to(device) for i, s in enumerate(shapes)]
    ms = [ember.zeros_like(p) for p in params]
    vs = [ember.zeros_like(p) for p in params]
    counters = [ember.tensor(0.0) for _ in params]
    fn = ember._fused_adamw_ if decoupled else ember._fused_adam_
    for step in range(steps):
        grads = [rand(s, seed=100 * step + i).to(dtype).to(device) for i, s in enumerate(shapes)]
        for c in counters:
            c.add_(1)
        fn(params, grads, ms, vs, [], counters, lr=1e-2, beta1=0.9, beta2=0.99, weight_decay=weight_decay,
           eps=1e-8, amsgrad=False, maximize=maximize)
    return params, ms, vs


@pytest.mark.parametrize("decoupled,maximize,weight_decay", [(True, False, 0.1), (False, True, 0.05),
                                                             (False, False, 0.0)])
def test_fused_adam_matches_cpu(decoupled, maximize, weight_decay):
    got = _adam_run("cuda", decoupled, maximize, weight_decay)
    want = _adam_run("cpu", decoupled, maximize, weight_decay)
    for gs, ws in zip(got, want):
        for g, w in zip(gs, ws):
            assert_same(g, w, rtol=1e-5, atol=1e-6)


def test_fused_adam_half_params_match_cpu():
    got = _adam_run("cuda", True, False, 0.1, dtype=ember.bfloat16)
    want = _adam_run("cpu", True, False, 0.1, dtype=ember.bfloat16)
    for gs, ws in zip(got, want):
        for g, w in zip(gs, ws):
            assert_same(g, w, rtol=2e-2, atol=2e-2)


def test_fused_adam_chunks_span_parameters_steps_and_alignment():
    """One launch over a table of chunks: a parameter longer than a chunk, parameters at different
    steps, and a parameter 4 bytes off 16-byte alignment (updated by the per-parameter launch)."""
    from ember._cuda import _ops_optim

    def run(device):
        sizes = (_ops_optim.CHUNK + 77, 5, 300)
        params = [rand((n,), seed=i).to(device) for i, n in enumerate(sizes)]
        params.append(rand((65,), seed=9).to(device)[1:])  # storage offset 1: misaligned
        ms, vs = [ember.zeros_like(p) for p in params], [ember.zeros_like(p) for p in params]
        counters = [ember.tensor(float(i)) for i in range(len(params))]
        for step in range(3):
            grads = [rand(tuple(p.shape), seed=50 * step + i).to(device) for i, p in enumerate(params)]
            for c in counters:
                c.add_(1)
            ember._fused_adamw_(params, grads, ms, vs, [], counters, lr=1e-2, beta1=0.9, beta2=0.99,
                                weight_decay=0.1, eps=1e-8, amsgrad=False, maximize=False)
        return params + ms + vs

    for g, w in zip(run("cuda"), run("cpu")):
        assert_same(g, w, rtol=1e-5, atol=1e-6)


def test_fused_adam_kernel_is_registered_and_taken():
    from ember._src.ops.optim import fused

    ember.zeros(1, device="cuda")
    impl = fused.DEVICE_UPDATES[("adam", "cuda")]
    p, g = rand((8,)).cuda(), rand((8,), seed=1).cuda()
    m, v = ember.zeros_like(p), ember.zeros_like(p)
    assert impl([p], [g], [m], [v], [], [ember.tensor(1.0)], 1e-3, 0.9, 0.999, 0.0, 1e-8, False, False, None,
                None, True)
    # amsgrad and GradScaler state take the composite (the kernel declines)
    assert not impl([p], [g], [m], [v], [ember.zeros_like(p)], [ember.tensor(1.0)], 1e-3, 0.9, 0.999, 0.0, 1e-8,
                    True, False, None, None, True)


def test_adamw_module_training_matches_cpu():
    def train(device):
        ember.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(device)
        opt = ember.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, fused=True)
        x, y = rand((8, 16), seed=3).to(device), rand((8, 4), seed=4).to(device)
        for _ in range(5):
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [p.detach() for p in model.parameters()]

    for g, w in zip(train("cuda"), train("cpu")):
        assert_same(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float16])
@pytest.mark.parametrize("kwargs", [{}, {"ignore_index": 2}, {"label_smoothing": 0.1},
                                    {"weight": True, "label_smoothing": 0.2, "reduction": "sum"}])
def test_cross_entropy_backward_matches_cpu(dtype, kwargs):
    rows, classes = 64, 5000
    x = rand((rows, classes), seed=5).to(dtype)
    target = ember.tensor([(i * 7) % classes for i in range(rows)])
    target[3] = 2
    kw = dict(kwargs)
    if kw.pop("weight", False):
        kw["weight"] = rand((classes,), low=0.5, high=1.5, seed=6).to(dtype)
    grads = []
    for device in ("cuda", "cpu"):
        xd = x.clone().to(device).requires_grad_()
        kwd = {k: (v.to(device) if isinstance(v, ember.Tensor) else v) for k, v in kw.items()}
        F.cross_entropy(xd, target.to(device), **kwd).backward()
        grads.append(xd.grad)
    tol = {ember.bfloat16: 2e-2, ember.float16: 2e-3}.get(dtype, 1e-5)
    assert_same(grads[0], grads[1], rtol=tol, atol=tol * 1e-2)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16, ember.float64])
def test_cross_entropy_saves_its_logsumexp(dtype):
    """_class_nll's fourth output is each row's log-sum-exp in the compute dtype (float32 for the
    half types): as the CPU kernel's, NaN where a row's max is infinite, 0 on ignored rows."""
    x = rand((9, 300), seed=11).to(dtype)
    x[2, 7] = float("inf")
    x[3, :] = -float("inf")
    x[4, 9] = float("nan")
    x[5, 0] = -float("inf")
    target = ember.tensor([0, 1, 2, 3, 4, 5, -100, 7, 8])
    got = ember.ops._class_nll(x.cuda(), target.cuda(), None, -100, False, False)
    want = ember.ops._class_nll(x, target, None, -100, False, False)
    assert got[3].dtype is (ember.float64 if dtype is ember.float64 else ember.float32)
    for g, w in zip(got, want):
        assert_same(g, w, dtype)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float16, ember.bfloat16])
@pytest.mark.parametrize("kwargs", [{}, {"label_smoothing": 0.1, "reduction": "none"}])
def test_cross_entropy_special_values_and_spatial_match_cpu(dtype, kwargs):
    """Infinite and NaN scores, classes on dim 1 of (N, C, d1, d2) scores: loss and gradient as the
    CPU's (whose tests compare them with PyTorch) through the saved log-sum-exp."""
    x = rand((3, 40, 2, 5), seed=12).to(dtype)
    x[0, 3, 1, 1] = float("inf")
    x[1, :, 0, 2] = -float("inf")
    x[2, 5, 1, 4] = float("nan")
    x[2, 0, 0, 0] = -float("inf")
    target = ember.tensor([[[(i * 3 + j) % 40 for j in range(5)] for i in range(2)] for _ in range(3)])
    target[0, 0, 0] = -100
    results = []
    for device in ("cuda", "cpu"):
        xd = x.clone().to(device).requires_grad_()
        loss = F.cross_entropy(xd, target.to(device), **kwargs)
        loss.backward(ember.ones_like(loss))
        results.append((loss.detach(), xd.grad))
    tol = 2e-2 if dtype is not ember.float32 else 1e-5
    for g, c in zip(*results):
        assert_same(g, c, dtype, rtol=tol, atol=tol)


def test_nll_loss_backward_matches_cpu():
    x = rand((10, 7), seed=8).log_softmax(1)
    target = ember.tensor([0, 1, 2, 3, 4, 5, 6, 0, 1, -100])
    grads = []
    for device in ("cuda", "cpu"):
        xd = x.clone().to(device).requires_grad_()
        F.nll_loss(xd, target.to(device)).backward()
        grads.append(xd.grad)
    assert_same(grads[0], grads[1])


def test_binary_cross_entropy_refused_under_cuda_autocast():
    p = rand((4,), low=0.1, high=0.9).cuda()
    t = rand((4,), low=0.0, high=1.0, seed=1).cuda()
    with ember.autocast("cuda", dtype=ember.bfloat16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, t)
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            nn.BCELoss()(p, t)
        F.binary_cross_entropy_with_logits(p, t)  # the safe form runs
    assert F.binary_cross_entropy(p, t).device.type == "cuda"  # and outside autocast BCE runs

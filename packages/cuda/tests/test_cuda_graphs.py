"""CUDA graphs: capture, replay, memory pools, errors, make_graphed_callables (GPU only)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import host, needs_gpu, rand

import ember

pytestmark = [pytest.mark.gpu, needs_gpu]


def _step(x, w):
    return ember.softmax((x @ w).relu() * 0.5 + 1.0, -1).sum(0)


def test_capture_and_replay_follow_new_inputs():
    x, w = rand((64, 32)).cuda(), rand((32, 48), seed=1).cuda()
    s = ember.cuda.Stream()
    s.wait_stream(ember.cuda.current_stream())
    with ember.cuda.stream(s):
        _step(x, w)  # warm-up: kernels compiled outside the capture
    ember.cuda.current_stream().wait_stream(s)
    g = ember.cuda.CUDAGraph()
    with ember.cuda.graph(g):
        out = _step(x, w)
    for seed in (2, 3):
        fresh = rand((64, 32), seed=seed)
        x.copy_(fresh.cuda())
        g.replay()
        np.testing.assert_allclose(host(out), host(_step(fresh, w.cpu())), rtol=1e-5, atol=1e-6)


def test_later_allocations_do_not_take_graph_memory():
    x = rand((1024,)).cuda()
    g = ember.cuda.CUDAGraph()
    ember.cuda.synchronize()
    with ember.cuda.graph(g):
        tmp = x * 2.0
        out = tmp + 1.0
        del tmp  # freed inside the capture: back to the graph's pool only
    others = [ember.full((1024,), 7.0, device="cuda") for _ in range(8)]
    g.replay()
    ember.cuda.synchronize()
    for t in others:
        assert float(host(t).min()) == 7.0 == float(host(t).max())
    np.testing.assert_allclose(host(out), host(x) * 2 + 1, rtol=1e-6, atol=1e-6)


def test_shared_pool_and_reset():
    x = rand((256,)).cuda()
    g1, g2 = ember.cuda.CUDAGraph(), ember.cuda.CUDAGraph()
    with ember.cuda.graph(g1):
        y = x.exp()
    with ember.cuda.graph(g2, pool=g1.pool()):
        z = y * 3.0
    g1.replay()
    g2.replay()
    np.testing.assert_allclose(host(z), np.exp(host(x)) * 3, rtol=1e-5)
    g1.reset()
    g2.reset()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g1.replay()
    handle = ember.cuda.graph_pool_handle()
    assert handle != ember.cuda.graph_pool_handle()


def test_capture_errors():
    g = ember.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="non-default stream"):
        g.capture_begin()
    x = rand((8,)).cuda()
    g = ember.cuda.CUDAGraph()
    with pytest.raises(RuntimeError):
        with ember.cuda.graph(g):
            (x + 1).sum().item()  # reads device memory on the host: the driver refuses it
    assert not ember.cuda.is_current_stream_capturing()
    np.testing.assert_allclose(host(x + 1), host(x) + 1)  # the device is still usable


def test_make_graphed_callables_trains_like_eager():
    nn = pytest.importorskip("ember.nn")
    F = pytest.importorskip("ember.nn.functional")

    def losses(graphed):
        ember.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).cuda()
        opt = ember.optim.SGD(model.parameters(), lr=0.1)
        x = ember.randn(8, 16).cuda()
        y = ember.tensor([0, 1, 2, 3, 0, 1, 2, 3]).cuda()
        if graphed:
            model = ember.cuda.make_graphed_callables(model, (x.clone(),))
        out = []
        for _ in range(5):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    np.testing.assert_allclose(losses(True), losses(False), rtol=1e-5, atol=1e-6)


def test_graphed_function():
    w = rand((8, 8)).cuda().requires_grad_()

    def fn(a):
        return (a @ w).tanh()

    a = rand((4, 8), seed=4).cuda().requires_grad_()
    graphed = ember.cuda.make_graphed_callables(fn, (a.detach().clone().requires_grad_(),))
    b = rand((4, 8), seed=5).cuda().requires_grad_()
    out = graphed(b)
    out.sum().backward()
    ref_b = b.detach().clone().requires_grad_()
    fn(ref_b).sum().backward()
    np.testing.assert_allclose(host(out), host(fn(b.detach())), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(host(b.grad), host(ref_b.grad), rtol=1e-5, atol=1e-6)

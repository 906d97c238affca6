"""nn.LSTM / nn.GRU on CUDA (the recurrence's time loop over the fused step ops) against the
same modules on the CPU (the native layer ops): outputs, final states and every gradient; and the
step ops themselves (GPU only)."""

from __future__ import annotations

import pytest
from cuda_helpers import assert_same, needs_gpu, rand

import ember

nn = pytest.importorskip("ember.nn")

pytestmark = [pytest.mark.gpu, needs_gpu]


@pytest.mark.parametrize("kind,kwargs", [("LSTM", {}), ("GRU", {}), ("LSTM", {"proj_size": 3}),
                                         ("GRU", {"bias": False})], ids=["lstm", "gru", "lstm_proj", "gru_nobias"])
def test_recurrent_layers_match_cpu(kind, kwargs):
    ember.manual_seed(0)
    cpu = getattr(nn, kind)(6, 5, num_layers=2, bidirectional=True, batch_first=True, **kwargs)
    gpu = getattr(nn, kind)(6, 5, num_layers=2, bidirectional=True, batch_first=True, **kwargs).cuda()
    gpu.load_state_dict(cpu.state_dict())
    x = rand((3, 7, 6), seed=1)
    results = []
    for model, dev in ((cpu, "cpu"), (gpu, "cuda")):
        xi = x.detach().to(dev).clone().requires_grad_()
        out, state = model(xi)
        states = state if isinstance(state, tuple) else (state,)
        loss = (out ** 2).sum() + sum((s * 1.5).sum() for s in states)
        loss.backward()
        results.append([out, *states, xi.grad] + [p.grad for p in model.parameters()])
    for got, want in zip(results[1], results[0]):
        assert_same(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16], ids=str)
def test_step_ops(dtype):
    ops, rows, h = ember.ops, 4, 8
    xg, hg, cp = rand((rows, 4 * h), dtype, seed=2), rand((rows, 4 * h), dtype, seed=3), rand((rows, h), dtype, seed=4)
    want = ops["_lstm_cell_fused"](xg, hg, cp)
    for got, w in zip(ops["_lstm_cell_fused"](xg.cuda(), hg.cuda(), cp.cuda()), want):
        assert_same(got, w)
    dh, dc = rand((rows, h), dtype, seed=5), rand((rows, h), dtype, seed=6)
    acts, _, tanh_c, _ = want
    for got, w in zip(ops["_lstm_cell_fused_backward"](dh.cuda(), dc.cuda(), acts.cuda(), cp.cuda(), tanh_c.cuda()),
                      ops["_lstm_cell_fused_backward"](dh, dc, acts, cp, tanh_c)):
        assert_same(got, w)
    xg, hg = rand((rows, 3 * h), dtype, seed=7), rand((rows, 3 * h), dtype, seed=8)
    want = ops["_gru_cell_fused"](xg, hg, dh)
    for got, w in zip(ops["_gru_cell_fused"](xg.cuda(), hg.cuda(), dh.cuda()), want):
        assert_same(got, w)
    for got, w in zip(ops["_gru_cell_fused_backward"](dc.cuda(), want[1].cuda(), hg.cuda(), dh.cuda()),
                      ops["_gru_cell_fused_backward"](dc, want[1], hg, dh)):
        assert_same(got, w)

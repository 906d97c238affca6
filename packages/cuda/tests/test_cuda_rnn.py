"""nn.LSTM / nn.GRU on CUDA (the recurrence's time loop over the fused step ops) against the
same modules on the CPU (the native layer ops): outputs, final states and every gradient, bidirectional,
packed sequences; the step ops themselves (GPU); the launches per time step (the fake host, no GPU).
The step kernels' arithmetic is checked in Triton's interpreter (coverage_interp_check.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_helpers import assert_same, needs_gpu, rand

import ember

nn = pytest.importorskip("ember.nn")


_LAUNCHES = r"""
import ctypes, json, sys
sys.path.insert(0, sys.argv[1])
import host_cuda_fake
host_cuda_fake.install()
import ember
from ember import _C
from ember._cuda import _compile, _fastcall

ex, classic = _C._device_launch_recorder(0, 0, -1, True)
lib = _fastcall._LIB[0]
lib.cuLaunchKernelEx = ctypes.PYFUNCTYPE(ctypes.c_int, *_fastcall._SIGNATURES["cuLaunchKernelEx"])(ex)
lib.cuLaunchKernel = ctypes.PYFUNCTYPE(ctypes.c_int, *_fastcall._SIGNATURES["cuLaunchKernel"])(classic)
ids = {}

def load(cubin, meta, kinds, device):
    fid = ids.setdefault(meta["name"] + repr(kinds), ((len(ids) + 1) << 8) | (len(kinds) + 2))
    return _fastcall.make_launcher(fid, kinds, meta["num_warps"], meta["shared"], meta["name"])

_compile.load = load
from ember._src.dispatch import OPS
ember.ones(1, device="cuda")  # (the plugin registers its kernels at the first CUDA call)
called = set()
for name in ("_lstm_layer", "_lstm_layer_backward", "_gru_layer", "_gru_layer_backward"):
    kernel = OPS[name].kernels["cuda"]
    OPS[name].kernels["cuda"] = lambda *a, kernel=kernel, name=name: called.add(name) or kernel(*a)
out = {}
for mode in ("LSTM", "GRU"):
    for dtype in (ember.float32, ember.bfloat16, ember.float16, ember.float64):
        m = getattr(ember.nn, mode)(16, 32).to("cuda", dtype)
        counts = []
        for steps in (6, 6, 7):  # (the first run builds the kernels)
            x = ember.ones(steps, 3, 16, dtype=dtype, device="cuda", requires_grad=True)
            _C._device_launch_log()
            y, _ = m(x)
            fwd = len(_C._device_launch_log())
            (y * y).sum().backward()
            counts.append([fwd, len(_C._device_launch_log())])
        out[mode + " " + str(dtype)] = [counts[2][0] - counts[1][0], counts[2][1] - counts[1][1]]
out["layer ops"] = sorted(called)
print(json.dumps(out))
"""


def test_recurrent_steps_launch_one_kernel_each_on_the_fake_host():
    """nn.LSTM / nn.GRU on CUDA run the layer ops (_lstm_layer, _gru_layer and their backward: CUDA kernels since
    session 19); each further time step adds one Triton launch to the forward (the cell; the hidden product is
    cuBLAS) and one to the backward (the cell's backward, which adds the output's gradient too), in every floating
    dtype (the kernels build for sm_90). float64's GRU forward has one more: its addmm with b_hh broadcasts the
    bias by a copy (no cuBLASLt bias epilogue for float64). The step ops were composites of 11 (LSTM forward) and
    26 (backward) launches before session 19."""
    pytest.importorskip("triton")
    if ember.cuda.is_available():
        pytest.skip("the fake host replaces the driver of a process without a GPU")
    benchmarks = Path(__file__).resolve().parents[3] / "benchmarks"
    done = subprocess.run([sys.executable, "-c", _LAUNCHES, str(benchmarks)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    want = {f"{mode} ember.{dtype}": [1, 1] for mode in ("LSTM", "GRU")
            for dtype in ("float32", "bfloat16", "float16", "float64")}
    want["GRU ember.float64"] = [2, 1]
    want["layer ops"] = ["_gru_layer", "_gru_layer_backward", "_lstm_layer", "_lstm_layer_backward"]
    assert got == want, got


@pytest.mark.gpu
@needs_gpu
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


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.bfloat16], ids=str)
def test_packed_bidirectional_layers_match_cpu(kind, dtype):
    """Packed sequences of unequal lengths (unsorted, enforce_sorted=False) through a 2-layer bidirectional
    layer with initial states: the packed output, final states and every gradient as the CPU's."""
    from ember.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    ember.manual_seed(1)
    cpu = getattr(nn, kind)(5, 4, num_layers=2, bidirectional=True).to(dtype)
    gpu = getattr(nn, kind)(5, 4, num_layers=2, bidirectional=True).to(dtype).cuda()
    gpu.load_state_dict(cpu.state_dict())
    x, h0, c0 = rand((6, 4, 5), dtype, seed=2), rand((4, 4, 4), dtype, seed=3), rand((4, 4, 4), dtype, seed=4)
    lengths = ember.tensor([3, 6, 1, 4])
    results = []
    for model, dev in ((cpu, "cpu"), (gpu, "cuda")):
        xi, hi, ci = (t.detach().to(dev).clone().requires_grad_() for t in (x, h0, c0))
        packed = pack_padded_sequence(xi, lengths, enforce_sorted=False)
        out, state = model(packed, (hi, ci) if kind == "LSTM" else hi)
        padded, _ = pad_packed_sequence(out)
        states = state if isinstance(state, tuple) else (state,)
        loss = (padded ** 2).sum() + sum((s * 1.5).sum() for s in states)
        loss.backward()
        grads = [xi.grad, hi.grad] + ([ci.grad] if kind == "LSTM" else [])
        results.append([padded, *states, *grads] + [p.grad for p in model.parameters()])
    # (bfloat16 runs in float32 on both devices, rounded once per output: a last-bit difference at most)
    tol = {ember.float32: 1e-4, ember.float64: 1e-10, ember.bfloat16: 2e-2}[dtype]
    for got, want in zip(results[1], results[0]):
        assert_same(got, want, dtype, rtol=tol, atol=tol)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float16, ember.float64], ids=str)
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
    for got, w in zip(ops["_lstm_cell_fused_backward"](dh.cuda(), None, acts.cuda(), cp.cuda(), tanh_c.cuda()),
                      ops["_lstm_cell_fused_backward"](dh, None, acts, cp, tanh_c)):
        assert_same(got, w)
    xg, hg = rand((rows, 3 * h), dtype, seed=7), rand((rows, 3 * h), dtype, seed=8)
    want = ops["_gru_cell_fused"](xg, hg, dh)
    for got, w in zip(ops["_gru_cell_fused"](xg.cuda(), hg.cuda(), dh.cuda()), want):
        assert_same(got, w)
    for got, w in zip(ops["_gru_cell_fused_backward"](dc.cuda(), want[1].cuda(), hg.cuda(), dh.cuda()),
                      ops["_gru_cell_fused_backward"](dc, want[1], hg, dh)):
        assert_same(got, w)

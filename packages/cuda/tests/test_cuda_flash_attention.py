"""Flash attention on CUDA (Triton) against the float64 math path on the CPU (GPU only).

Forward output and the gradients of query, key and value, over dtypes, causal masking,
boolean and additive masks, grouped heads, odd lengths and head widths, and inputs whose
(batch, head) strides are not contiguous (the (B, T, H, D) -> (B, H, T, D) transpose of a
GPT block).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from cuda_helpers import host, needs_gpu

import ember

pytestmark = [pytest.mark.gpu, needs_gpu]
F = pytest.importorskip("ember.nn.functional")

# Relative error (norm of the difference over the norm of the reference) each dtype must reach.
REL = {ember.float32: 2e-5, ember.float16: 4e-3, ember.bfloat16: 2.5e-2}


def _rel(got, ref):
    g, r = host(got), host(ref)
    assert np.isfinite(g).all()
    return float(np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-30))


def _inputs(b, h, hk, lq, s, d, e, dtype, seed, transposed=False):
    g = np.random.default_rng(seed)
    if transposed:  # (B, T, H, D) storage viewed as (B, H, T, D)
        q = g.standard_normal((b, lq, h, d)).transpose(0, 2, 1, 3)
        k = g.standard_normal((b, s, hk, d)).transpose(0, 2, 1, 3)
        v = g.standard_normal((b, s, hk, e)).transpose(0, 2, 1, 3)
    else:
        q, k, v = (g.standard_normal(shape) for shape in ((b, h, lq, d), (b, hk, s, d), (b, hk, s, e)))
    cpu = [ember.tensor(np.ascontiguousarray(x)) for x in (q, k, v)]  # float64 references
    dev = []
    for x in (q, k, v):
        t = ember.tensor(np.ascontiguousarray(x.transpose(0, 2, 1, 3) if transposed else x)).to(dtype).cuda()
        dev.append(t.transpose(1, 2) if transposed else t)
    return cpu, dev


CASES = [  # b, h, hk, lq, s, d, e, causal, mask, transposed
    (2, 3, 3, 64, 64, 64, 64, False, None, False),
    (2, 4, 4, 200, 200, 64, 64, True, None, True),
    (1, 2, 2, 77, 130, 40, 24, False, None, False),
    (1, 2, 2, 130, 77, 32, 32, True, None, False),
    (1, 4, 2, 96, 96, 128, 128, True, None, False),
    (2, 2, 2, 50, 70, 16, 16, False, "bool", False),
    (1, 2, 2, 33, 65, 64, 64, False, "float", False),
]


# Every case in bfloat16; float16 and float32 on a few (each distinct case compiles its own kernels).
_RUNS = [(i, ember.bfloat16) for i in range(len(CASES))] + [(0, ember.float16), (4, ember.float16),
                                                             (1, ember.float32), (5, ember.float32)]


@pytest.mark.parametrize("index,dtype", _RUNS, ids=[f"case{i}-{str(d).split('.')[-1]}" for i, d in _RUNS])
def test_flash_attention_forward_backward(index, dtype):
    b, h, hk, lq, s, d, e, causal, mask, transposed = CASES[index]
    (q, k, v), (dq, dk, dv) = _inputs(b, h, hk, lq, s, d, e, dtype, seed=index, transposed=transposed)
    g = np.random.default_rng(7)
    m_cpu = m_dev = None
    if mask == "bool":
        keep = g.random((lq, s)) > 0.4
        keep[3] = False  # a row that sees no key: zeros, as the CPU kernel gives
        m_cpu, m_dev = ember.tensor(keep), ember.tensor(keep).cuda()
    elif mask == "float":
        bias = g.standard_normal((1, h, lq, s))
        m_cpu, m_dev = ember.tensor(bias), ember.tensor(bias).to(dtype).cuda()
    for t in (q, k, v, dq, dk, dv):
        t.requires_grad_()
    gqa = h != hk
    # The reference is the op pair's float64 CPU definition (checked against PyTorch in tensor-core's
    # tests): unlike the math path's backward it gives rows that see no key zero gradients, not NaN.
    ref = ember.ops._scaled_dot_product_flash_attention(q, k, v, m_cpu, causal, 1 / math.sqrt(d))[0]
    out = F.scaled_dot_product_attention(dq, dk, dv, attn_mask=m_dev, is_causal=causal, enable_gqa=gqa)
    assert out.dtype is dtype and tuple(out.shape) == (b, h, lq, e)
    assert out.grad_fn is not None
    assert _rel(out, ref) < REL[dtype]
    grad = np.random.default_rng(3).standard_normal((b, h, lq, e))
    ref.backward(ember.tensor(grad))
    out.backward(ember.tensor(grad).to(dtype).cuda())
    for got, want in ((dq, q), (dk, k), (dv, v)):
        assert got.grad.dtype is dtype and tuple(got.grad.shape) == tuple(want.shape)
        assert _rel(got.grad, want.grad) < 2 * REL[dtype]


@pytest.mark.parametrize("ws", [False, True], ids=["tma", "tma-ws"])
@pytest.mark.parametrize("index", [0, 1, 2, 3, 4])
def test_descriptor_forward(monkeypatch, index, ws):
    """The tensor-descriptor forward (``_ops_attention._FWD_TMA``), its loop warp-specialized or not, gives the
    float64 CPU output and log-sum-exp: causal and not, ragged lengths and (padded) widths, grouped heads,
    (B, T, H, D) strides."""
    from ember._cuda import _ops_attention as A

    monkeypatch.setattr(A, "_FWD_TMA", (((True, ws), (True, ws)),) * 2)
    dtype = ember.bfloat16
    b, h, hk, lq, s, d, e, causal, mask, transposed = CASES[index]
    (q, k, v), (dq, dk, dv) = _inputs(b, h, hk, lq, s, d, e, dtype, seed=30 + index, transposed=transposed)
    ref, ref_lse = ember.ops._scaled_dot_product_flash_attention(q, k, v, None, causal, 1 / math.sqrt(d))[:2]
    out, lse = A.flash_forward(dq, dk, dv, None, causal, 1 / math.sqrt(d))
    assert _rel(out, ref) < REL[dtype]
    assert np.allclose(host(lse), host(ref_lse), rtol=2e-2, atol=2e-2)


def test_flash_op_pair_matches_its_cpu_definition():
    (q, k, v), (dq, dk, dv) = _inputs(1, 2, 2, 48, 48, 32, 32, ember.float32, seed=1)
    out, lse = ember.ops._scaled_dot_product_flash_attention(dq, dk, dv, None, True, 1 / math.sqrt(32))
    ref, ref_lse = ember.ops._scaled_dot_product_flash_attention(q, k, v, None, True, 1 / math.sqrt(32))
    assert lse.dtype is ember.float32 and tuple(lse.shape) == (1, 2, 48)
    np.testing.assert_allclose(host(lse), host(ref_lse), rtol=1e-5, atol=1e-5)
    assert _rel(out, ref) < 2e-5


def test_inference_op_and_dropout_paths():
    (q, k, v), (dq, dk, dv) = _inputs(2, 2, 2, 40, 40, 16, 16, ember.bfloat16, seed=2)
    with ember.no_grad():
        ref = ember.ops.scaled_dot_product_attention(q, k, v, None, 0.0, True)
        out = ember.ops.scaled_dot_product_attention(dq, dk, dv, None, 0.0, True)
        assert _rel(out, ref) < REL[ember.bfloat16]
        # dropout=1 drops every weight: zeros (the math path with the dropout mask)
        dropped = F.scaled_dot_product_attention(dq, dk, dv, dropout_p=1.0)
        assert float(host(dropped).__abs__().max()) == 0.0
    # float64 stays on the math path
    out64 = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), is_causal=True)
    np.testing.assert_allclose(host(out64), host(ember.ops.scaled_dot_product_attention(q, k, v, None, 0.0, True)),
                               rtol=1e-10, atol=1e-10)


def test_long_causal_sequence_bf16():
    (q, k, v), (dq, dk, dv) = _inputs(1, 2, 2, 1024, 1024, 64, 64, ember.bfloat16, seed=5)
    out = F.scaled_dot_product_attention(dq, dk, dv, is_causal=True)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert _rel(out, ref) < REL[ember.bfloat16]


def test_gpt_block_layout_needs_no_copies():
    """Heads split off a (B, T, 3*H*D) projection: the output (and so the usual transpose back and
    .contiguous()) and the gradients come in the input's (B, T, H, D) layout, as in PyTorch, and
    the values match the float64 CPU computation of the same program."""
    b, t, h, d = 2, 96, 3, 32
    x_np = np.random.default_rng(11).standard_normal((b, t, 3 * h * d))
    g_np = np.random.default_rng(12).standard_normal((b, t, h * d))

    def block(x):
        q, k, v = (z.view(b, t, h, d).transpose(1, 2) for z in x.split(h * d, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y, y.transpose(1, 2).contiguous().view(b, t, h * d)

    x_ref = ember.tensor(x_np, requires_grad=True)
    y_ref, out_ref = block(x_ref)
    out_ref.backward(ember.tensor(g_np))
    x = ember.tensor(x_np).to(ember.bfloat16).cuda().requires_grad_()
    y, out = block(x)
    assert y.transpose(1, 2).is_contiguous() and out.data_ptr() == y.data_ptr()
    assert _rel(out, out_ref) < REL[ember.bfloat16]
    out.backward(ember.tensor(g_np).to(ember.bfloat16).cuda())
    assert _rel(x.grad, x_ref.grad) < 2 * REL[ember.bfloat16]


@pytest.mark.parametrize("mode", ["dq_first", "dq_first-dp", "dq_first-tma", "dq_first-tmaws", "dq_first-dkdvtma",
                                  "dq_first-dkdvtmaws", "split", "fused", "atomic-1", "atomic-2"])
@pytest.mark.parametrize("index", [1, 3, 4, 6])
def test_backward_modes(monkeypatch, mode, index):
    """Every launch form of the backward (``_ops_attention._BWD_MODE``; the atomic one with either form of
    dQ's share; dq_first-dp with both kernels' dP products issued first, ``_DP_FIRST``; dq_first-tma(ws) with the
    tensor-descriptor dQ kernel, ``_DQ_TMA``, asked to warp-specialize (which Triton 3.6 may refuse: then the
    plain build runs);
    dq_first-dkdvtma(ws) with the tensor-descriptor dK/dV kernel capped at 168 registers, or warp-specialized at
    (64, 64, 4, 3), ``_DKDV_TMA``) gives the float64 CPU gradients: causal and ragged lengths, grouped heads, an
    additive mask."""
    from ember._cuda import _ops_attention as A

    name, _, form = mode.partition("-")
    monkeypatch.setattr(A, "_BWD_MODE", name)
    if form == "dp":
        monkeypatch.setattr(A, "_DP_FIRST", ((True, True), (True, True)))
    elif form == "dkdvtma":
        monkeypatch.setattr(A, "_DKDV_TMA", ((True, 168, False),) * 2)
    elif form == "dkdvtmaws":
        monkeypatch.setattr(A, "_DKDV_TMA", ((True, None, True),) * 2)
        monkeypatch.setattr(A, "_BWD_D64", (((64, 64, 4, 3), (64, 64, 4, 4)),) * 2)
    elif form.startswith("tma"):
        monkeypatch.setattr(A, "_DQ_TMA", ((True, form == "tmaws"),) * 2)
        if form == "tmaws":
            monkeypatch.setattr(A, "_BWD_D64", (((64, 64, 4, 3), (64, 64, 4, 3)),) * 2)
    elif form:
        monkeypatch.setattr(A, "_ATOMIC_FORM", int(form))
    dtype = ember.bfloat16
    b, h, hk, lq, s, d, e, causal, mask, transposed = CASES[index]
    (q, k, v), (dq, dk, dv) = _inputs(b, h, hk, lq, s, d, e, dtype, seed=10 + index, transposed=transposed)
    m_cpu = m_dev = None
    if mask == "float":
        bias = np.random.default_rng(8).standard_normal((1, h, lq, s))
        m_cpu, m_dev = ember.tensor(bias), ember.tensor(bias).to(dtype).cuda()
    for t in (q, k, v, dq, dk, dv):
        t.requires_grad_()
    ref = ember.ops._scaled_dot_product_flash_attention(q, k, v, m_cpu, causal, 1 / math.sqrt(d))[0]
    out = F.scaled_dot_product_attention(dq, dk, dv, attn_mask=m_dev, is_causal=causal, enable_gqa=h != hk)
    grad = np.random.default_rng(4).standard_normal((b, h, lq, e))
    ref.backward(ember.tensor(grad))
    out.backward(ember.tensor(grad).to(dtype).cuda())
    for got, want in ((dq, q), (dk, k), (dv, v)):
        assert _rel(got.grad, want.grad) < 2 * REL[dtype], (mode, got is dq)


def test_deterministic_algorithms_take_the_ordered_backward(monkeypatch):
    """The atomic backward adds dQ's shares in no fixed order; with deterministic algorithms on, two runs give
    bitwise equal gradients (the two-kernel form), and they match the atomic form's to rounding."""
    from ember._cuda import _ops_attention as A

    monkeypatch.setattr(A, "_BWD_MODE", "atomic")
    _, (q, k, v) = _inputs(2, 4, 4, 256, 256, 64, 64, ember.bfloat16, seed=21, transposed=True)
    g = ember.tensor(np.random.default_rng(5).standard_normal((2, 4, 256, 64))).to(ember.bfloat16).cuda()

    def grads():
        x = [t.detach().requires_grad_() for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*x, is_causal=True)
        return [host(t) for t in ember.autograd.grad(out, x, g)]

    atomic = grads()
    previous = ember.are_deterministic_algorithms_enabled()
    ember.use_deterministic_algorithms(True)
    try:
        first, second = grads(), grads()
    finally:
        ember.use_deterministic_algorithms(previous)
    for a, b_ in zip(first, second):
        np.testing.assert_array_equal(a, b_)
    for a, b_ in zip(atomic, first):
        assert np.linalg.norm(a - b_) / np.linalg.norm(b_) < 1e-2


def test_causal_dkdv_tile_taller_than_its_key_tile_is_refused(monkeypatch):
    """A causal dK/dV tile of more query rows than keys would read past the last row (an illegal address on the
    H100): the backward refuses it with a RuntimeError instead of launching it."""
    from ember._cuda import _ops_attention as A

    monkeypatch.setattr(A, "_BWD_MODE", "dq_first")
    monkeypatch.setattr(A, "_BWD_D64", (A._BWD_D64[0], ((128, 64, 8, 3), A._BWD_D64[1][1])))
    (q, k, v), (dq, dk, dv) = _inputs(1, 2, 2, 128, 128, 64, 64, ember.bfloat16, seed=5)
    for t in (dq, dk, dv):
        t.requires_grad_()
    out = F.scaled_dot_product_attention(dq, dk, dv, is_causal=True)
    with pytest.raises(RuntimeError, match="multiple of BLOCK_M"):
        out.sum().backward()

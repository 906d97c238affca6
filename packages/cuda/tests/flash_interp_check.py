"""Runs ember's flash-attention Triton kernels in Triton's CPU interpreter against float64
attention in PyTorch (``python flash_interp_check.py``; test_cuda_flash_interpreter.py starts it in a
fresh process, since TRITON_INTERPRET must be set before Triton decorates the kernels)."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import tempfile

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton.runtime.interpreter as interp  # noqa: E402

CASES = [
    (1, 2, 2, 64, 64, 16, 16, True, False, ((32, 16), (16, 32), (32, 16))),
    (2, 2, 1, 40, 24, 20, 12, True, False, ((16, 16), (16, 32), (32, 16))),
    (1, 2, 2, 17, 29, 16, 24, False, True, ((16, 16), (16, 32), (32, 16))),
    (1, 2, 1, 33, 47, 64, 64, False, False, ((32, 16), (16, 32), (32, 16))),
    (2, 2, 1, 17, 29, 16, 24, False, 2, ((16, 16), (16, 32), (32, 16))),  # a key-padding row, ragged
    (2, 2, 2, 32, 64, 16, 16, False, 2, ((16, 16), (16, 32), (32, 16))),  # ... and tiles that never pass the end
]


def _load():
    # NumPy 2 refuses int() of a 1-element array, which the interpreter does for loop bounds.
    original = interp._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interp._patch_lang_tensor = patched
    from ember._cuda._flash_kernels import SOURCE

    path = os.path.join(tempfile.mkdtemp(), "ember_flash_interp.py")
    with open(path, "w") as f:
        f.write(SOURCE)
    spec = importlib.util.spec_from_file_location("ember_flash_interp", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ember_flash_interp"] = mod
    spec.loader.exec_module(mod)
    return mod


def _pow2(n):
    return max(16, 1 << (n - 1).bit_length())


def _reference(q, k, v, bias, causal, scale, group):
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(-1, -2) * scale
    if bias is not None:
        s = s + bias
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def check(kernels, b, h, hk, lq, s, d, e, causal, bias, blocks):
    pad = torch.nn.functional.pad
    g = torch.Generator().manual_seed(lq * s)
    q0, k0, v0 = (torch.randn(*shape, generator=g) for shape in ((b, h, lq, d), (b, hk, s, d), (b, hk, s, e)))
    # bias 2: one row over the keys for every query row (a key-padding mask: row stride 0)
    bias_t = (torch.randn(b, 1, 1, s, generator=g) if bias == 2 else torch.randn(1, h, lq, s, generator=g)) if bias \
        else None
    scale, group, dp, ep = 1 / math.sqrt(d), h // hk, _pow2(d), _pow2(e)
    q, k, v = pad(q0, (0, dp - d)), pad(k0, (0, dp - d)), pad(v0, (0, ep - e))
    bt = bias_t.expand(b, h, lq, s) if bias else q
    bs = bt.stride() if bias else (0, 0, 0, 0)
    kw = dict(D=dp, E=ep, CAUSAL=causal, HAS_BIAS=bias, PREC="ieee")
    (bm, bn), (bm1, bn1), (bm2, bn2) = blocks
    out, lse = torch.empty(b, h, lq, ep), torch.empty(b, h, lq)
    grid = -(-lq // bm)
    qd, kd, vd = (t.double().requires_grad_() for t in (q0, k0, v0))
    ref, ref_lse = _reference(qd, kd, vd, None if bias_t is None else bias_t.double(), causal, scale, group)
    # the scale folded into the exponent (what a positive scale without a bias takes) and not
    for fold in (False, True) if not bias else (False,):
        out.fill_(float("nan")), lse.fill_(float("nan"))
        kernels.fwd[(grid * b * h,)](q, k, v, bt, out, lse, scale, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
                                     *bs, *out.stride()[:3], h, group, lq, s, grid, BLOCK_M=bm, BLOCK_N=bn,
                                     EVEN_M=lq % bm == 0, EVEN_N=s % bn == 0, FOLD_SCALE=fold, LPT=fold, **kw)
        torch.testing.assert_close(out[..., :e].double(), ref.detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(lse.double(), ref_lse.detach(), rtol=1e-5, atol=1e-5)
    # the tensor-descriptor forward (no bias), its loop warp-specialized on the GPU or not
    for ws in (False, True) if not bias else ():
        out_t, lse_t = torch.full_like(out, float("nan")), torch.full_like(lse, float("nan"))
        kernels.fwd_tma[(grid * b * h,)](q, k, v, out_t, lse_t, scale, *q.stride()[:3], *k.stride()[:3],
                                         *v.stride()[:3], *out_t.stride()[:3], h, group, lq, s, grid, BLOCK_M=bm,
                                         BLOCK_N=bn, EVEN_M=lq % bm == 0, EVEN_N=s % bn == 0, FOLD_SCALE=True,
                                         LPT=ws, WS=ws, **kw)
        torch.testing.assert_close(out_t[..., :e].double(), ref.detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(lse_t.double(), ref_lse.detach(), rtol=1e-5, atol=1e-5)
    do0 = torch.randn(b, h, lq, e, generator=g)
    ref.backward(do0.double())
    do = pad(do0, (0, ep - e))
    delta = torch.empty(b, h, lq)
    kernels.delta[(-(-lq // 16), b * h)](out, do, delta, delta, *out.stride()[:3], *do.stride()[:3], h, lq, E=ep,
                                         BLOCK_M=16, D=dp, ZERO_DQA=False)
    common = (*q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *bs, *do.stride()[:3])
    n1, m2 = -(-s // bn1), -(-lq // bm2)
    blocks1 = dict(BLOCK_M=bm1, BLOCK_N=bn1, EVEN_M=lq % bm1 == 0, EVEN_N=s % bn1 == 0)
    blocks2 = dict(BLOCK_M=bm2, BLOCK_N=bn2, EVEN_M=lq % bm2 == 0, EVEN_N=s % bn2 == 0)

    def dkdv(dk, dv, delta, lpt=False, dqa=None, form=1, diag_last=False, dp_first=False):
        kernels.dkdv[(n1 * b * h,)](q, k, v, bt, do, lse, delta, dk, dv, dk if dqa is None else dqa, scale, *common,
                                    *dk.stride()[:3], *dv.stride()[:3], h, group, lq, s, n1, **blocks1, **kw, LPT=lpt,
                                    ATOMIC_DQ=0 if dqa is None else form, DIAG_LAST=diag_last, DP_FIRST=dp_first)

    def dq(dq, delta, own, lpt=False, dp_first=False):
        kernels.dq[(m2 * b * h,)](q, k, v, bt, do, out, lse, delta, dq, scale, *common, *out.stride()[:3],
                                  *dq.stride()[:3], h, group, lq, s, m2, **blocks2, **kw, OWN_DELTA=own, LPT=lpt,
                                  DP_FIRST=dp_first)

    # The four forms of the backward's launches (_ops_attention._BWD_MODE), each from unwritten outputs.
    for mode in ("split", "dq_first", "fused", "atomic", "atomic_t"):
        dk, dv, dqt = (torch.full(shape, float("nan")) for shape in ((b, h, s, dp), (b, h, s, ep), q.shape))
        if mode == "split":
            dkdv(dk, dv, delta)
            dq(dqt, delta, False)
        elif mode == "dq_first":
            own = torch.full((b, h, lq), float("nan"))
            # with the grids ordered over all heads (_ops_attention._LPT) and the dP products issued first
            dq(dqt, own, True, lpt=True, dp_first=True)
            torch.testing.assert_close(own, delta, rtol=1e-5, atol=1e-6)
            dkdv(dk, dv, own, lpt=True, diag_last=True, dp_first=True)
        elif mode.startswith("atomic"):
            # delta and the zeroed float32 accumulator from one kernel, dQ's share added by the dK/dV kernel
            own, dqa = torch.full((b, h, lq), float("nan")), torch.full((b * h, lq, dp), float("nan"))
            kernels.delta[(-(-lq // 16), b * h)](out, do, own, dqa, *out.stride()[:3], *do.stride()[:3], h, lq,
                                                 E=ep, BLOCK_M=16, D=dp, ZERO_DQA=True)
            torch.testing.assert_close(own, delta, rtol=1e-5, atol=1e-6)
            dkdv(dk, dv, own, dqa=dqa, form=2 if mode == "atomic_t" else 1, diag_last=mode == "atomic_t")
            kernels.dq_cast[(-(-lq // 16), b * h)](dqa, dqt, scale, *dqt.stride()[:3], h, lq, D=dp, BLOCK_M=16)
        else:
            nj = max(n1, m2)
            kernels.bwd[(nj * b * h,)](q, k, v, bt, do, out, lse, delta, dqt, dk, dv, scale, *common,
                                       *out.stride()[:3], *dqt.stride()[:3], *dk.stride()[:3], *dv.stride()[:3], h,
                                       group, lq, s, n1, m2, nj, **blocks1, BLOCK_M2=bm2, BLOCK_N2=bn2,
                                       EVEN_M2=lq % bm2 == 0, EVEN_N2=s % bn2 == 0, **kw)
        if mode == "dq_first" and not bias:  # the tensor-descriptor dQ kernel, its loop warp-specialized or not
            for ws in (False, True):
                dq2, own2 = torch.full_like(dqt, float("nan")), torch.full((b, h, lq), float("nan"))
                kernels.dq_tma[(m2 * b * h,)](q, k, v, do, out, lse, own2, dq2, scale, *q.stride()[:3],
                                              *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], *out.stride()[:3],
                                              *dq2.stride()[:3], h, group, lq, s, m2, **blocks2, **kw, OWN_DELTA=True,
                                              LPT=ws, WS=ws)
                torch.testing.assert_close(own2, delta, rtol=1e-5, atol=1e-6)
                torch.testing.assert_close(dq2[..., :d].double(), qd.grad, rtol=1e-4, atol=1e-5)
            # the tensor-descriptor dK/dV kernel (per query head, grouped heads summed as below)
            for ws in (False, True):
                dk2, dv2 = torch.full_like(dk, float("nan")), torch.full_like(dv, float("nan"))
                kernels.dkdv_tma[(n1 * b * h,)](q, k, v, do, lse, delta, dk2, dv2, scale, *q.stride()[:3],
                                                *k.stride()[:3], *v.stride()[:3], *do.stride()[:3], *dk2.stride()[:3],
                                                *dv2.stride()[:3], h, group, lq, s, n1, **blocks1, **kw, LPT=True,
                                                WS=ws)
                torch.testing.assert_close(dk2.view(b, hk, group, s, dp).sum(2)[..., :d].double(), kd.grad,
                                           rtol=1e-4, atol=1e-5)
                torch.testing.assert_close(dv2.view(b, hk, group, s, ep).sum(2)[..., :e].double(), vd.grad,
                                           rtol=1e-4, atol=1e-5)
        dk = dk.view(b, hk, group, s, dp).sum(2)[..., :d]
        dv = dv.view(b, hk, group, s, ep).sum(2)[..., :e]
        for got, want in ((dqt[..., :d], qd.grad), (dk, kd.grad), (dv, vd.grad)):
            torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5,
                                       msg=lambda m, mode=mode: f"{mode}: {m}")

if __name__ == "__main__":
    kernels = _load()
    for case in CASES:
        check(kernels, *case)
        print("ok", case[:9], flush=True)

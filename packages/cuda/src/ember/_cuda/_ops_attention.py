"""Attention on CUDA: Triton flash attention (``_flash_kernels``) for
``scaled_dot_product_attention`` and the fused op pair ``_scaled_dot_product_flash_attention``
(forward with log-sum-exp) / ``_scaled_dot_product_flash_attention_backward``.

float16/bfloat16/float32 inputs with head widths up to 256 take the fused kernels (float32
products in full precision, as PyTorch's fp32 attention); float64, dropout and inputs the
kernels do not take go to the math path (cuBLAS products around the fused row softmax), which
materializes the B*H*L*S scores.
"""

from __future__ import annotations

import math

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.nn import attention as na
from ember._src.ops.nn import attention_flash as naf
from ember._src.runtime import are_deterministic_algorithms_enabled
from ember._src.tensor import make_tensor

from . import _compile
from ._elementwise import TRITON
from ._flash_kernels import SOURCE
from ._ops_pointwise import fill_values
from ._storage import new_empty as new_empty_tensor  # one frame per CUDA result
from ._streams import current_handle

_FLOAT = (dt.float16, dt.bfloat16, dt.float32)


def _pow2(n: int) -> int:
    return max(16, 1 << (max(n, 1) - 1).bit_length())


def _fwd_config(dtype, d: int, lq: int = 0, causal: bool = False):
    """(BLOCK_M, BLOCK_N, warps, stages) of the forward for ``lq`` query rows; from sweeps on the H200 (see
    NOTES.md). BLOCK_M must be a multiple of BLOCK_N: the causal forward's unmasked key tiles end at the query
    tile's first row."""
    if dtype is dt.float32:
        return (64, 32, 4, 2) if d <= 64 else (32, 32, 4, 1)
    if d <= 64:
        # B8 H12 bf16 sweeps on the H200: 64-row query tiles were best at T1024 (more programs in flight on a
        # short sequence), 128-row ones at T4096.
        return (_FWD_SHORT if lq <= 2048 else _FWD_LONG)[bool(causal)]
    return (128, 64, 8, 3) if d <= 128 else (64, 32, 4, 2)


# (non-causal, causal) forward tiles of 16-bit D64 attention, for up to 2048 query rows and beyond. Session 19's
# --tune-grid sweep (H100, B8 H12 bf16, every variant of grid_variants() built and timed) chose the long-sequence
# 8-warp tiles: T4096 forward 1.077 / 0.601 ms (non-causal / causal) against (128, 64, 4, 3)'s 1.126 / 0.618.
_FWD_SHORT, _FWD_LONG = ((64, 64, 4, 3), (64, 64, 4, 3)), ((128, 64, 8, 4), (128, 64, 8, 3))
# Per length class (up to 2048 query rows, beyond) and (non-causal, causal): (whether 16-bit forwards without a
# bias move their tiles through tensor descriptors, the copy engine's, when every base and row stride is 16-byte
# aligned: the ``fwd_tma`` kernel; whether Triton then warp-specializes its loop: a loading warp group beside two
# computing ones, 12 warps for num_warps 4). Built for sm_90 with Triton 3.6 (session 16: 187 registers at
# (128, 64, 4, 3) against the pointer kernel's 229; warp-specialized: 168, 12 warps) but not yet timed on the
# H200, so both stay off.
_FWD_TMA = (((False, False), (False, False)), ((False, False), (False, False)))
_FOLD_SCALE = True  # the forward keeps scores unscaled and folds the scale into exp2's argument (scale > 0)
# Causal grids ordered heaviest tile first over all heads (longest-processing-time first) rather than per
# head: (forward, dQ, dK/dV). On the H200 (bench_cuda_attention.py --tune-lpt, B8 H12 bf16) the forward
# gained 9% at T1024 and T4096; the backward kernels none (within 3%, either way).
_LPT = (True, False, False)
# With True the causal dK/dV kernel walks the query tiles below its key tile's diagonal first and the masked
# diagonal ones last. In the other order (diagonal first) ptxas serializes the kernel's wgmma instructions
# (its warning C7515 on the sm_90 build of the (64, 64, 4, 3) and (64, 128, 8, 3) kernels; diagonal last
# builds without it). Same gradients (the interpreter tests take both orders). On the H200
# (bench_cuda_attention.py --tune-bwd-forms, B8 H12 D64 bf16, session 15) the causal backward took
# 0.179 / 1.794 ms (T1024 / T4096) diagonal last vs 0.188 / 2.004 diagonal first; it applies to causal only.
_DIAG_LAST = True


def _bwd_config(dtype, d: int, causal: bool = True):
    """((BLOCK_M, BLOCK_N, warps, stages) of dK/dV, the same of dQ): dK/dV walks query tiles of BLOCK_M rows
    past a tile of BLOCK_N keys, dQ key tiles of BLOCK_N past BLOCK_M query rows."""
    if dtype is dt.float32:
        return (32, 32, 4, 1), (32, 32, 4, 1)
    if d <= 64:
        return _BWD_D64[bool(causal)]
    return (32, 64, 4, 2), (64, 32, 4, 2)


# (non-causal, causal) (dK/dV, dQ) tiles of 16-bit D64 attention. Session 14's sweep (B8 H12 T1024/4096 causal
# bf16 on the H200, bench_cuda_attention.py --tune-bwd): best of 10 dK/dV and 8 dQ configurations, the
# runners-up within ~5% (run-to-run noise). Session 19's --tune-grid sweep (H100, both lengths, dK/dV first with
# dQ at its default, then dQ with dK/dV at its winner) moved both: the backward alone took (T1024 / T4096 ms)
# non-causal 0.216 / 2.905, causal 0.169 / 1.798 (PyTorch's SDPA in the same run: 0.223 / 2.578, 0.160 / 1.503).
_BWD_D64 = (((32, 128, 4, 4), (128, 64, 8, 3)), ((64, 64, 4, 2), (64, 64, 4, 3)))
# (non-causal, causal) (dQ, dK/dV): with True the kernel issues its second score-shaped product (dP = dO V^T,
# or dP^T = V dO^T) right after the first (S, or S^T) instead of after the exponentials, so the products that
# follow (dQ's, or dV's and dK's) are the ones left in flight across the loop's end.
_DP_FIRST = ((True, True), (False, True))  # (session 19's sweep, beside _BWD_D64's tiles)
# dK/dV tiles of 16-bit D64 attention with an additive mask (HAS_BIAS): the sm_90 build of (64, 64, 4, 3) spills
# 144 (non-causal) to 1080 (causal) bytes per thread (ptxas -v, Triton 3.6); (32, 64, 4, 3) spills none and was
# the fastest of 4 in session 19's sweep (H100, (1, 1, T, T) bf16 mask, whole backward 0.848 / 13.44 ms at T1024 /
# T4096 against (64, 64, 4, 3)'s 0.916 / 15.55; PyTorch 0.314 / 4.01).
_BIAS_DKDV_D64 = (32, 64, 4, 3)
# (non-causal, causal): (whether the dQ kernel of 16-bit backwards without a bias moves its tiles through tensor
# descriptors, ``dq_tma``, when every operand is 16-byte aligned; whether its loop is warp-specialized). Built
# for sm_90 with Triton 3.6 (session 16): 122-125 registers at (64, 64, 4, 3) against the pointer kernel's
# 150-162. Its warp specialization built offline at (64, 64, 4, 3) (12 warps, 168 registers) but fails with the
# divisibility hints ember's launches give (and at 128-row tiles): _run then takes the plain build. Not yet
# timed on the H200: off.
_DQ_TMA = ((False, False), (False, False))
# (non-causal, causal): (whether dq_first's dK/dV kernel of 16-bit backwards without a bias moves its tiles through
# tensor descriptors, ``dkdv_tma``, when every operand is 16-byte aligned; a register cap per thread or None;
# whether its loop is warp-specialized: at (64, 64, 4, 3) 12 warps, 168 registers, no spills).
# Built for sm_90 with Triton 3.6 (session 16): 196 (causal) / 179 registers at (64, 64, 4, 3) against the
# pointer kernel's 252 / 204; capped at 168 (3 programs of 4 warps per multiprocessor instead of 2) it spills
# 28-52 bytes per thread. Not yet timed on the H200: off.
_DKDV_TMA = ((False, None, False), (False, None, False))


def _atomic_config(dtype, d: int):
    """(BLOCK_M, BLOCK_N, warps, stages) of the "atomic" backward's one dK/dV/dQ kernel."""
    if dtype is dt.float32:
        return (32, 32, 4, 1)
    if d <= 64:
        return _ATOMIC_D64
    return (32, 64, 4, 2)


_ATOMIC_D64 = (64, 64, 4, 3)
# How the atomic kernel forms dQ's share: 1 as dS K (dS^T transposed through shared memory, the float32
# result added row-major), 2 as its transpose K^T dS^T (dS^T as it stands, the result added column-wise).
# On the H200 (bench_cuda_attention.py, session 15) form 2 was the faster at (64, 64, 4, 3) in every case,
# and its causal grid heaviest key tile first over all heads (LPT) 14% (T1024) and 4% (T4096) faster than
# per head, so the atomic mode takes LPT whatever _LPT[2] (dq_first's dK/dV grid) says.
_ATOMIC_FORM = 2

# How the backward runs: "dq_first" (dQ first, each of its programs also computing and storing its rows'
# delta = sum(dO * O), then dK/dV: two launches), "split" (delta, dK/dV, dQ: three), "fused" (delta,
# then one launch whose program j does key tile j's dK/dV and query tile j's dQ) or "atomic" (delta with
# a zeroed float32 dQ accumulator, one dK/dV kernel that also adds each tile pair's dS K into it, then a
# cast: 5 matrix products per tile pair where the others do 7, but dQ's sums come in no fixed order, so
# deterministic algorithms (ember.use_deterministic_algorithms) take "dq_first" instead).
_BWD_MODE = "dq_first"
_DELTA_CONFIG = (64, 4)  # (BLOCK_M, warps) of the separate delta kernel (and of the atomic mode's cast)


def _unit_last(t):
    return t if t._stride[-1] == 1 or t._shape[-1] == 1 else t.contiguous()


def _strides(t, n=3):
    return [int(s) for s in t._stride[:n]]


def _bias(attn_mask, q, k):
    """The additive bias as a (B, H, L, S) view (0 strides where broadcast), or None."""
    if attn_mask is None:
        return None
    import ember

    if attn_mask.dtype is dt.bool:
        attn_mask = ember.where(attn_mask, 0.0, float("-inf")).to(dt.float32)
    b, h, lq = q._shape[:3]
    return attn_mask.expand(b, h, lq, k._shape[2])


def _sig(names, ptr_types, ints64, ints32, scale=True):
    sig = {}
    for n in names:
        if n in ptr_types:
            sig[n] = "*" + ptr_types[n]
        elif n == "scale":
            sig[n] = "fp32"
        elif n in ints64:
            sig[n] = "i64"
        elif n in ints32:
            sig[n] = "i32"
        else:
            sig[n] = "constexpr"
    return sig


_STRIDE_NAMES = {
    "fwd": ["sqb", "sqh", "sqm", "skb", "skh", "skn", "svb", "svh", "svn", "sbb", "sbh", "sbm", "sbn",
            "sob", "soh", "som"],
    "fwd_tma": ["sqb", "sqh", "sqm", "skb", "skh", "skn", "svb", "svh", "svn", "sob", "soh", "som"],
    "dq_tma": ["sqb", "sqh", "sqm", "skb", "skh", "skn", "svb", "svh", "svn", "sdb", "sdh", "sdm", "sob", "soh", "som",
               "sqb2", "sqh2", "sqm2"],
    "dkdv_tma": ["sqb", "sqh", "sqm", "skb", "skh", "skn", "svb", "svh", "svn", "sdb", "sdh", "sdm", "skb2", "skh2",
                 "skn2", "svb2", "svh2", "svn2"],
    "dkdv": ["sqb", "sqh", "sqm", "skb", "skh", "skn", "svb", "svh", "svn", "sbb", "sbh", "sbm", "sbn",
             "sdb", "sdh", "sdm", "skb2", "skh2", "skn2", "svb2", "svh2", "svn2"],
    "dq": ["sqb", "sqh", "sqm", "skb", "skh", "skn", "svb", "svh", "svn", "sbb", "sbh", "sbm", "sbn",
           "sdb", "sdh", "sdm", "sob", "soh", "som", "sqb2", "sqh2", "sqm2"],
    "bwd": ["sqb", "sqh", "sqm", "skb", "skh", "skn", "svb", "svh", "svn", "sbb", "sbh", "sbm", "sbn",
            "sdb", "sdh", "sdm", "sob", "soh", "som", "sqb2", "sqh2", "sqm2", "skb2", "skh2", "skn2", "svb2",
            "svh2", "svn2"],
}
_PTRS = {"fwd": ["Q", "K", "V", "B", "O", "LSE"], "fwd_tma": ["Q", "K", "V", "O", "LSE"],
         "dq_tma": ["Q", "K", "V", "DO", "O", "LSE", "DELTA", "DQ"],
         "dkdv_tma": ["Q", "K", "V", "DO", "LSE", "DELTA", "DK", "DV"],
         "dkdv": ["Q", "K", "V", "B", "DO", "LSE", "DELTA", "DK", "DV", "DQA"],
         "dq": ["Q", "K", "V", "B", "DO", "O", "LSE", "DELTA", "DQ"],
         "bwd": ["Q", "K", "V", "B", "DO", "O", "LSE", "DELTA", "DQ", "DK", "DV"]}
_INTS = {"fwd": ["H", "GROUP", "L", "S", "NUM_M"], "fwd_tma": ["H", "GROUP", "L", "S", "NUM_M"],
         "dq_tma": ["H", "GROUP", "L", "S", "NUM_M"], "dkdv_tma": ["H", "GROUP", "L", "S", "NUM_N"],
         "dkdv": ["H", "GROUP", "L", "S", "NUM_N"],
         "dq": ["H", "GROUP", "L", "S", "NUM_M"], "bwd": ["H", "GROUP", "L", "S", "NUM_N", "NUM_M", "NUM_J"]}
_CONST = ["D", "E", "BLOCK_M", "BLOCK_N", "EVEN_M", "EVEN_N", "CAUSAL", "HAS_BIAS", "PREC"]
_MORE_CONST = {"fwd": ["FOLD_SCALE", "LPT"], "fwd_tma": ["FOLD_SCALE", "LPT", "WS"],
               "dq_tma": ["OWN_DELTA", "LPT", "WS"], "dkdv_tma": ["LPT", "WS"],
               "dq": ["OWN_DELTA", "LPT", "DP_FIRST"],
               "dkdv": ["LPT", "ATOMIC_DQ", "DIAG_LAST", "DP_FIRST"],
               "bwd": ["BLOCK_M2", "BLOCK_N2", "EVEN_M2", "EVEN_N2"]}


_RUN_LAUNCHERS: dict = {}  # (kernel, operand dtypes, alignment, constexprs, warps, stages, device) -> launcher


def _run(name, ptrs, scale, strides, ints, consts, grid, warps, stages, index, maxnreg=None):
    # One pass over the operands (this runs three times per attention layer and step): their addresses,
    # dtypes and which addresses and strides are multiples of 16 (Triton's divisibility hints).
    addresses, dtypes, aligned = [], [], []
    for n in _PTRS[name]:
        t = ptrs[n]
        p = t.data_ptr()
        addresses.append(p)
        dtypes.append(t.dtype)
        if p % 16 == 0:
            aligned.append(n)
    for n, v in zip(_STRIDE_NAMES[name], strides):
        if v % 16 == 0:
            aligned.append(n)
    aligned = tuple(aligned)
    # The signature follows from the kernel and its operands' dtypes: memoized by that short key, a call
    # skips rebuilding it and the kernel cache's long key (source, signature) (~10 us a call on the host).
    key = (name, tuple(dtypes), aligned, tuple(consts.items()), warps, stages, index, maxnreg)
    launcher = _RUN_LAUNCHERS.get(key)
    if launcher is None:
        names = _PTRS[name] + ["scale"] + _STRIDE_NAMES[name] + _INTS[name] + _CONST + _MORE_CONST.get(name, [])
        ptr_types = {n: TRITON[t.dtype] for n, t in ptrs.items()}
        sig = _sig(names, ptr_types, set(_STRIDE_NAMES[name]), set(_INTS[name]))
        try:
            launcher = _compile.kernel(SOURCE, name, sig, consts, aligned, warps, stages, index, maxnreg)
        except RuntimeError:
            if not consts.get("WS"):
                raise
            # Triton 3.6's sm_90 warp specialization refuses some tile shapes (its pass fails, e.g. dq_tma with
            # 128-row tiles): the same kernel unspecialized, remembered under this key.
            launcher = _compile.kernel(SOURCE, name, sig, {**consts, "WS": False}, aligned, warps, stages, index,
                                       maxnreg)
        _RUN_LAUNCHERS[key] = launcher
    launcher((grid, 1, 1), current_handle(index), *addresses, float(scale), *strides, *ints)


def _consts(q, v, lq, s, bias, is_causal, bm, bn):
    # Head widths arrive padded to powers of two (_pad): the kernels never mask along them.
    return {"D": q._shape[3], "E": v._shape[3], "BLOCK_M": bm, "BLOCK_N": bn, "EVEN_M": lq % bm == 0,
            "EVEN_N": s % bn == 0, "CAUSAL": bool(is_causal),
            # 2: a bias that is one row over the keys for every query row (a key-padding mask, row stride 0)
            "HAS_BIAS": False if bias is None else 2 if bias._stride[2] == 0 else True,
            "PREC": "ieee" if q.dtype is dt.float32 else "tf32"}


def _pad(t, width):
    """``t`` zero-padded along its last dim to ``width`` (a zero column adds nothing to q.k, and
    a zero value column is sliced off the output)."""
    n = t._shape[-1]
    if n == width:
        return t
    out = new_empty_tensor(tuple(t._shape[:-1]) + (width,), t.dtype, t._device).zero_()
    out.narrow(-1, 0, n).copy_(t)
    return out


def _empty_in_order_of(t, shape, dtype):
    """A fresh (B, H, L, E) tensor whose dims lie in memory in the order of ``t``'s (PyTorch's
    attention does the same): heads split off a (B, L, H*E) projection give a query laid out
    (B, L, H, E), so the output and the gradients come that way too and the usual
    ``y.transpose(1, 2).contiguous().view(B, L, H*E)`` afterwards copies nothing."""
    st = t._stride
    if t._shape[3] <= 1 or st[0] >= st[1] >= st[2] >= st[3]:  # already in order (sorted's answer, cheaply)
        return new_empty_tensor(shape, dtype, t._device)
    order = sorted(range(4), key=lambda i: (-st[i], i))
    if order == [0, 1, 2, 3] or order[-1] != 3:
        return new_empty_tensor(shape, dtype, t._device)
    base = new_empty_tensor((shape[order[0]], shape[order[1]], shape[order[2]], shape[order[3]]), dtype, t._device)
    strides = [0] * 4
    for position, dim in enumerate(order):
        strides[dim] = base._stride[position]
    return make_tensor(base._storage, tuple(shape), tuple(strides), 0, dtype, t._device)


def _bias_strides(bias):
    return [0, 0, 0, 0] if bias is None else [int(s) for s in bias._stride]


def _padded(query, key, value, *more_like_value):
    """q, k, v (and each of ``more_like_value``) unit-strided along the head dim and padded to the
    kernels' power-of-two widths; the forward and the backward read their inputs the same way."""
    dp, ep = _pow2(query._shape[3]), _pow2(value._shape[3])
    return (_pad(_unit_last(query), dp), _pad(_unit_last(key), dp), _pad(_unit_last(value), ep),
            *(_pad(_unit_last(t), ep) for t in more_like_value))


def flash_forward(query, key, value, attn_mask, is_causal, scale):
    d, e = query._shape[3], value._shape[3]
    q, k, v = _padded(query, key, value)
    b, h, lq, _ = q._shape
    hk, s = k._shape[1], k._shape[2]
    out = _empty_in_order_of(q, (b, h, lq, v._shape[3]), q.dtype)
    lse = new_empty_tensor((b, h, lq), dt.float32, q._device)
    if out.numel() == 0:
        return out, lse
    if s == 0:  # no keys: zeros, and rows that see nothing
        fill_values(out, 0)
        fill_values(lse, float("-inf"))
        return out.narrow(-1, 0, e), lse
    bias = _bias(attn_mask, q, k)
    bm, bn, warps, stages = _fwd_config(q.dtype, max(d, e), lq, bool(is_causal))
    num_m = -(-lq // bm)
    ptrs = {"Q": q, "K": k, "V": v, "B": q if bias is None else bias, "O": out, "LSE": lse}
    strides = _strides(q) + _strides(k) + _strides(v) + _bias_strides(bias) + _strides(out)
    index = q._device.index or 0
    consts = _consts(q, v, lq, s, bias, is_causal, bm, bn)
    consts["FOLD_SCALE"] = _FOLD_SCALE and bias is None and scale > 0
    consts["LPT"] = bool(is_causal) and _LPT[0]
    tma, ws = _FWD_TMA[lq > 2048][bool(is_causal)]
    if tma and bias is None and q.dtype is not dt.float32 and _descriptor_ready(q, k, v, out):
        del ptrs["B"]
        _run("fwd_tma", ptrs, scale, _strides(q) + _strides(k) + _strides(v) + _strides(out),
             [h, h // hk, lq, s, num_m], {**consts, "WS": _warp_specialized(ws)},
             num_m * b * h, warps, stages, index)
    else:
        _run("fwd", ptrs, scale, strides, [h, h // hk, lq, s, num_m], consts, num_m * b * h, warps, stages, index)
    return (out if e == out._shape[3] else out.narrow(-1, 0, e).contiguous()), lse


def _warp_specialized(ws):
    """Whether a warp-specialized loop is taken where a switch asks for one: never. Triton 3.6's warp-specialized
    forward, dQ and dK/dV loops gave NaN on an H100 (session 18), not always in the same cases (ragged lengths,
    grouped heads: dQ's passed its tests in one call and failed at case 4 in the next), so the switches' ``ws`` flag
    is kept for a later Triton (``_WS_ENABLED``) and the plain build of the same kernel runs."""
    return _WS_ENABLED and bool(ws)


_WS_ENABLED = False


def _descriptor_ready(*tensors):
    """Whether a tensor descriptor can cover each (B, H, L, D) tensor's (batch, head) slices: 16-byte aligned
    addresses and (batch, head, row) strides (2-byte elements), as the copy engine needs."""
    return all(t.data_ptr() % 16 == 0 and all(int(x) % 8 == 0 for x in t._stride[:3]) for t in tensors)


def _delta(out, g, lse, index, dqa=None):
    """delta = sum(dO * O) per row; with ``dqa`` (the atomic mode's (B*H, L, D) float32 dQ accumulator) the
    same launch zeroes it."""
    b, h, lq, e = out._shape
    delta = new_empty_tensor((b, h, lq), dt.float32, out._device)
    sig = {"O": "*" + TRITON[out.dtype], "DO": "*" + TRITON[g.dtype], "DELTA": "*fp32", "DQA": "*fp32",
           "sob": "i64", "soh": "i64", "som": "i64", "sdb": "i64", "sdh": "i64", "sdm": "i64", "H": "i32", "L": "i32",
           "E": "constexpr", "BLOCK_M": "constexpr", "D": "constexpr", "ZERO_DQA": "constexpr"}
    bm, warps = _DELTA_CONFIG
    consts = {"E": e, "BLOCK_M": bm, "D": 16 if dqa is None else dqa._shape[2], "ZERO_DQA": dqa is not None}
    launcher = _compile.kernel(SOURCE, "delta", sig, consts, (), warps, 1, index)
    launcher((-(-lq // bm), b * h, 1), current_handle(index), out.data_ptr(), g.data_ptr(), delta.data_ptr(),
             (delta if dqa is None else dqa).data_ptr(), *_strides(out), *_strides(g), h, lq)
    return delta


def _dq_cast(dqa, dq, scale, index):
    """dq = scale * dqa (float32, (B*H, L, D)) in dq's dtype and strides."""
    b, h, lq, d = dq._shape
    sig = {"DQA": "*fp32", "DQ": "*" + TRITON[dq.dtype], "scale": "fp32", "sqb2": "i64", "sqh2": "i64",
           "sqm2": "i64", "H": "i32", "L": "i32", "D": "constexpr", "BLOCK_M": "constexpr"}
    bm, warps = _DELTA_CONFIG
    launcher = _compile.kernel(SOURCE, "dq_cast", sig, {"D": d, "BLOCK_M": bm}, (), warps, 1, index)
    launcher((-(-lq // bm), b * h, 1), current_handle(index), dqa.data_ptr(), dq.data_ptr(), float(scale),
             *_strides(dq), h, lq)


def _mode():
    return "dq_first" if _BWD_MODE == "atomic" and are_deterministic_algorithms_enabled() else _BWD_MODE


def _backward_kernels(q, k, v, g, o, lse, dq, dk, dv, attn_mask, is_causal, scale, width):
    """dq, dk, dv of the padded operands, in the launches ``_BWD_MODE`` names."""
    b, h, lq, _ = q._shape
    hk, s = k._shape[1], k._shape[2]
    group = h // hk
    index = q._device.index or 0
    bias = _bias(attn_mask, q, k)
    (bm1, bn1, w1, s1), (bm2, bn2, w2, s2) = _bwd_config(q.dtype, width, bool(is_causal))
    # (not with a bias: its dK/dV build already spills, see _BIAS_DKDV_D64)
    dpf = _DP_FIRST[bool(is_causal)] if q.dtype is not dt.float32 and width <= 64 and bias is None else (False, False)
    if bias is not None and q.dtype is not dt.float32 and width <= 64:
        bm1, bn1, w1, s1 = _BIAS_DKDV_D64
    mode = _mode()
    dqa = None
    if mode == "dq_first":
        delta = new_empty_tensor((b, h, lq), dt.float32, q._device)
    elif mode == "atomic":
        bm1, bn1, w1, s1 = _atomic_config(q.dtype, width)
        dqa = new_empty_tensor((b * h, lq, q._shape[3]), dt.float32, q._device)
        delta = _delta(o, g, lse, index, dqa)
    else:
        delta = _delta(o, g, lse, index)
    if is_causal and bn1 % bm1:
        # The causal dK/dV walk takes whole query tiles from its key tile's diagonal on, unmasked below it: a query
        # tile taller than the key tile reads past the last row (an illegal address on the H100, session 18).
        raise RuntimeError(f"flash attention: causal dK/dV tiles need BLOCK_N ({bn1}) a multiple of BLOCK_M ({bm1})")
    common = _strides(q) + _strides(k) + _strides(v) + _bias_strides(bias) + _strides(g)
    ptrs = {"Q": q, "K": k, "V": v, "B": q if bias is None else bias, "DO": g, "O": o, "LSE": lse, "DELTA": delta}
    num_n, num_m = -(-s // bn1), -(-lq // bm2)
    if mode == "fused":
        num_j = max(num_n, num_m)
        consts = {**_consts(q, v, lq, s, bias, is_causal, bm1, bn1), "BLOCK_M2": bm2, "BLOCK_N2": bn2,
                  "EVEN_M2": lq % bm2 == 0, "EVEN_N2": s % bn2 == 0}
        _run("bwd", {**ptrs, "DQ": dq, "DK": dk, "DV": dv}, scale,
             common + _strides(o) + _strides(dq) + _strides(dk) + _strides(dv), [h, group, lq, s, num_n, num_m, num_j],
             consts, num_j * b * h, w1, s1, index)
        return
    dq_tma, dq_ws = _DQ_TMA[bool(is_causal)]
    if dq_tma and bias is None and q.dtype is not dt.float32 and _descriptor_ready(q, k, v, g, o, dq):
        dq_args = ("dq_tma", {n: t for n, t in ptrs.items() if n != "B"} | {"DQ": dq}, scale,
                   _strides(q) + _strides(k) + _strides(v) + _strides(g) + _strides(o) + _strides(dq),
                   [h, group, lq, s, num_m], {**_consts(q, v, lq, s, bias, is_causal, bm2, bn2),
                                              "OWN_DELTA": mode == "dq_first", "LPT": bool(is_causal) and _LPT[1],
                                              "WS": _warp_specialized(dq_ws)}, num_m * b * h, w2, s2, index)
    else:
        dq_args = ("dq", {**ptrs, "DQ": dq}, scale, common + _strides(o) + _strides(dq), [h, group, lq, s, num_m],
                   {**_consts(q, v, lq, s, bias, is_causal, bm2, bn2), "OWN_DELTA": mode == "dq_first",
                    "LPT": bool(is_causal) and _LPT[1], "DP_FIRST": dpf[0]}, num_m * b * h, w2, s2, index)
    if mode == "dq_first":
        _run(*dq_args)
    dkdv_tma, cap, dkdv_ws = _DKDV_TMA[bool(is_causal)]
    if (dkdv_tma and dqa is None and bias is None and q.dtype is not dt.float32 and (_DIAG_LAST or not is_causal)
            and _descriptor_ready(q, k, v, g, dk, dv)):
        _run("dkdv_tma", {n: ptrs[n] for n in ("Q", "K", "V", "DO", "LSE", "DELTA")} | {"DK": dk, "DV": dv}, scale,
             _strides(q) + _strides(k) + _strides(v) + _strides(g) + _strides(dk) + _strides(dv),
             [h, group, lq, s, num_n], {**_consts(q, v, lq, s, bias, is_causal, bm1, bn1),
                                        "LPT": bool(is_causal) and _LPT[2],
                                        "WS": _warp_specialized(dkdv_ws)},
             num_n * b * h, w1, s1, index, cap)
    else:
        _run("dkdv", {**ptrs, "DK": dk, "DV": dv, "DQA": dk if dqa is None else dqa}, scale,
             common + _strides(dk) + _strides(dv), [h, group, lq, s, num_n],
             {**_consts(q, v, lq, s, bias, is_causal, bm1, bn1),
              "LPT": bool(is_causal) and (_LPT[2] or dqa is not None),
              "ATOMIC_DQ": 0 if dqa is None else _ATOMIC_FORM, "DIAG_LAST": bool(is_causal) and _DIAG_LAST,
              "DP_FIRST": dpf[1] and dqa is None},
             num_n * b * h, w1, s1, index)
    if mode == "atomic":
        _dq_cast(dqa, dq, scale, index)
    elif mode != "dq_first":
        _run(*dq_args)


def flash_backward(grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale):
    d0, e0 = query._shape[3], value._shape[3]
    dp, ep = _pow2(d0), _pow2(e0)
    q, k, v, g, o = _padded(query, key, value, grad_out, out)
    lse = logsumexp if logsumexp.dtype is dt.float32 and logsumexp.is_contiguous() else \
        logsumexp.to(dt.float32).contiguous()
    b, h, lq, d = q._shape
    hk, s, e = k._shape[1], k._shape[2], v._shape[3]
    group = h // hk
    # Per query head; grouped heads are summed afterwards (in float32, then cast).
    gd = q.dtype if group == 1 else dt.float32
    dq = _empty_in_order_of(q, tuple(q._shape), q.dtype)
    dk = _empty_in_order_of(k, (b, h, s, d), gd) if group == 1 else new_empty_tensor((b, h, s, d), gd, q._device)
    dv = _empty_in_order_of(v, (b, h, s, e), gd) if group == 1 else new_empty_tensor((b, h, s, e), gd, q._device)
    if q.numel() == 0 or s == 0:
        fill_values(dq, 0), fill_values(dk, 0), fill_values(dv, 0)
    else:
        _backward_kernels(q, k, v, g, o, lse, dq, dk, dv, attn_mask, is_causal, scale, max(d0, e0))
    if group > 1:
        dk = dk.reshape(b, hk, group, s, d).sum(2).to(key.dtype)
        dv = dv.reshape(b, hk, group, s, e).sum(2).to(value.dtype)
    if dp != d0:
        dq, dk = dq.narrow(-1, 0, d0).contiguous(), dk.narrow(-1, 0, d0).contiguous()
    if ep != e0:
        dv = dv.narrow(-1, 0, e0).contiguous()
    return dq, dk, dv


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    for t in (key, value) + (() if attn_mask is None else (attn_mask,)):
        if t._device is not query._device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{query._device} and {t._device}!")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    if dropout_p:
        return na._sdpa_composite(query, key, value, attn_mask, float(dropout_p), bool(is_causal), scale,
                                  bool(enable_gqa))
    if query.dtype in _FLOAT and naf.routes_to_flash(query, key, value, attn_mask, 0.0, enable_gqa):
        return flash_forward(query, key, value, attn_mask, is_causal, scale)[0]
    return _sdpa_math(query, key, value, attn_mask, is_causal, scale, enable_gqa)


def _sdpa_math(query, key, value, attn_mask, is_causal, scale, enable_gqa):
    # softmax(q k^T * scale + mask) v with every score materialized; float64 and odd shapes.
    import ember

    q, k, v = query, key, value
    if enable_gqa and k.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        rep = q.shape[-3] // k.shape[-3]
        k, v = na._repeat_heads(k, rep), na._repeat_heads(v, rep)
    scores = ember.matmul(q, k.transpose(-2, -1)) * scale
    lq, s = q.shape[-2], k.shape[-2]
    if is_causal:
        dev = q.device
        keep = ember.arange(lq, device=dev).unsqueeze(1) >= ember.arange(s, device=dev).unsqueeze(0)
        scores = ember.where(keep, scores, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype is ember.bool:
            scores = ember.where(attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = ember.softmax(scores, -1).nan_to_num(0.0)
    return ember.matmul(weights, v)


def _flash(query, key, value, attn_mask, is_causal, scale):
    if query.dtype not in _FLOAT:
        return naf._flash_kernel(query, key, value, attn_mask, is_causal, scale)
    return flash_forward(query, key, value, attn_mask, is_causal, float(scale))


def _flash_bwd(grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale):
    if query.dtype not in _FLOAT:
        return naf._flash_backward_kernel(grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale)
    return flash_backward(grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, float(scale))


def register() -> None:
    OPS["scaled_dot_product_attention"].kernels["cuda"] = _sdpa
    OPS["_scaled_dot_product_flash_attention"].kernels["cuda"] = _flash
    OPS["_scaled_dot_product_flash_attention_backward"].kernels["cuda"] = _flash_bwd

"""Fused Adam/AdamW on CUDA: ``ember._fused_adam_`` / ``_fused_adamw_`` (what ``ember.optim.Adam``
and ``AdamW`` call for their ``fused``/``foreach``/default steps) in one kernel per parameter.

The per-tensor composite the core falls back to issues eight elementwise kernels per parameter
(about 1200 launches for GPT-2's 148 parameters, more than half of a training step's launches,
each paying ember's per-op host cost). Here each parameter takes one launch that reads param,
grad and both moments once and writes param and moments once, in float32 arithmetic for every
float dtype. The bias corrections are computed on the host from the step counters (CPU tensors,
as PyTorch keeps them), so the launch needs no device-to-host read.

Taken only for the plain case: every tensor a contiguous dense CUDA tensor of the param's dtype,
no amsgrad, no GradScaler state (``grad_scale``/``found_inf``), CPU step counters. Anything else
returns False and the core's composite runs (same equations, PyTorch's results).
"""

from __future__ import annotations

import math

from ember._src.ops.optim import fused as core_fused
from ember._src.tensor import Tensor

from . import _compile
from ._elementwise import HEADER, TRITON
from ._streams import current_handle

_ADAM = HEADER + '''
@triton.jit
def k(p, g, m, v, n, lr, beta1, beta2, eps, wd, step_size, bc2_sqrt, BLOCK: tl.constexpr,
      DECOUPLED: tl.constexpr, MAXIMIZE: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    pv = tl.load(p + i, mask=mask).to(tl.float32)
    gv = tl.load(g + i, mask=mask).to(tl.float32)
    mv = tl.load(m + i, mask=mask).to(tl.float32)
    vv = tl.load(v + i, mask=mask).to(tl.float32)
    if MAXIMIZE:
        gv = -gv
    if DECOUPLED:
        pv = pv * (1.0 - lr * wd)
    else:
        gv = gv + pv * wd
    mv = mv + (1.0 - beta1) * (gv - mv)
    vv = vv * beta2 + (1.0 - beta2) * gv * gv
    denom = tl.sqrt(vv) / bc2_sqrt + eps
    pv = pv - step_size * (mv / denom)
    tl.store(p + i, pv.to(p.dtype.element_ty), mask=mask)
    tl.store(m + i, mv.to(m.dtype.element_ty), mask=mask)
    tl.store(v + i, vv.to(v.dtype.element_ty), mask=mask)
'''

_BLOCK, _WARPS = 2048, 8
_FLOAT = frozenset(("fp16", "bf16", "fp32", "fp64"))


def _contiguous(t) -> bool:
    expected = 1
    for size, stride in zip(reversed(t._shape), reversed(t._stride)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _plain_cuda(t, device, dtype) -> bool:
    return (isinstance(t, Tensor) and t._device is device and t.dtype is dtype and _contiguous(t)
            and getattr(t, "_layout", None) is Tensor._layout)


def _launcher(name: str, decoupled: bool, maximize: bool, aligned: bool, index: int):
    ptr = "*" + name
    sig = {"p": ptr, "g": ptr, "m": ptr, "v": ptr, "n": "i64", "lr": "fp32", "beta1": "fp32", "beta2": "fp32",
           "eps": "fp32", "wd": "fp32", "step_size": "fp32", "bc2_sqrt": "fp32", "BLOCK": "constexpr",
           "DECOUPLED": "constexpr", "MAXIMIZE": "constexpr"}
    constexprs = {"BLOCK": _BLOCK, "DECOUPLED": decoupled, "MAXIMIZE": maximize}
    return _compile.kernel(_ADAM, "k", sig, constexprs, ("p", "g", "m", "v") if aligned else (), _WARPS, 1, index)


def adam(params, grads, exp_avgs, exp_avg_sqs, maxes, state_steps, lr, beta1, beta2, weight_decay, eps, amsgrad,
         maximize, grad_scale, found_inf, decoupled) -> bool:
    """Runs the update and returns True, or returns False (nothing written) for a case it does not take."""
    if amsgrad or grad_scale is not None or found_inf is not None:
        return False
    p0 = params[0]
    device, dtype = p0._device, p0.dtype
    name = TRITON.get(dtype)
    if device.type != "cuda" or name not in _FLOAT:
        return False
    steps = []
    for items in (params, grads, exp_avgs, exp_avg_sqs):
        for t in items:
            if not _plain_cuda(t, device, dtype):
                return False
    for s in state_steps:
        if not isinstance(s, Tensor) or s._device.type != "cpu":
            return False
        steps.append(float(s.item()))
    beta1, beta2 = float(beta1), float(beta2)
    lr, eps, wd = float(lr), float(eps), float(weight_decay)
    index = device.index or 0
    stream = current_handle(index)
    launchers = {}
    for i, p in enumerate(params):
        n = p.numel()
        if n == 0:
            continue
        g, m, v = grads[i], exp_avgs[i], exp_avg_sqs[i]
        size = dtype.itemsize
        ptrs = [t._storage._ptr + t._offset * size for t in (p, g, m, v)]
        aligned = not ((ptrs[0] | ptrs[1] | ptrs[2] | ptrs[3]) & 15)
        launch = launchers.get(aligned)
        if launch is None:
            launch = launchers[aligned] = _launcher(name, bool(decoupled), bool(maximize), aligned, index)
        step = steps[i]
        step_size = lr / (1.0 - beta1 ** step)
        bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
        launch(((n + _BLOCK - 1) // _BLOCK, 1, 1), stream, *ptrs, n, lr, beta1, beta2, eps, wd, step_size, bc2_sqrt)
    return True


def register() -> None:
    core_fused.DEVICE_UPDATES[("adam", "cuda")] = adam

"""CUDA kernels of the activations' native input gradients (the core's ``activation_grads.py``):
``gelu_backward`` (one elementwise pass over grad and input, exact or tanh) and
``_softmax_backward_data``/``_log_softmax_backward_data`` (one program per row: the row's dot
product (softmax) or sum (log_softmax) of the gradient, then the input gradient).

ember-autograd's gelu/softmax/log_softmax formulas call these when the device has them (no graph
of the backward recorded); without them the composite formulas run about ten (gelu) and four
(softmax) elementwise kernels per backward. Statistics in float32 (float64 for float64 inputs),
as the CPU kernels.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS

from . import _compile
from ._elementwise import HEADER, TL, TRITON, launch
from ._ops_rows import _aligned, _block, _ct
from ._storage import new_empty as new_empty_tensor  # one frame per CUDA result
from ._streams import current_handle

L = "libdevice."
# d/dx of 0.5 x (1 + erf(x / sqrt 2)) = Phi(x) + x phi(x)
_GELU_GRAD = ("{0} * (0.5 * (1.0 + " + L + "erf({1} * 0.7071067811865476)) + {1} * 0.3989422804014327 * "
              + L + "exp(-0.5 * {1} * {1}))")
# the tanh form, as PyTorch's kernel: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 kappa x^2)
_T = L + "tanh(0.7978845608028654 * ({1} + 0.044715 * {1} * {1} * {1}))"
_GELU_TANH_GRAD = ("{0} * (0.5 * (1.0 + " + _T + ") + 0.5 * {1} * (1.0 - " + _T + " * " + _T + ") * "
                   "0.7978845608028654 * (1.0 + 0.134145 * {1} * {1}))")


def _gelu_backward(grad_output, self, approximate="none"):
    if approximate not in ("none", "tanh"):  # the CPU kernel's checks
        raise RuntimeError(f"approximate argument must be either none or tanh. Got: {approximate}")
    if not self.is_floating_point():
        raise RuntimeError(f"gelu_backward: expected a floating point input, got {self.dtype}")
    out = new_empty_tensor(tuple(self._shape), self.dtype, self._device)
    ct = _ct(self.dtype)
    launch(_GELU_TANH_GRAD if approximate == "tanh" else _GELU_GRAD, out, [grad_output, self], [ct, ct])
    return out


_SOFTMAX_BWD = HEADER + '''
@triton.jit
def k(g, y, out, N, BLOCK: tl.constexpr, LOG: tl.constexpr, SINGLE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    gr = g + row * N
    yr = y + row * N
    orow = out + row * N
    if SINGLE:
        cols = tl.arange(0, BLOCK)
        m = cols < N
        gv = tl.load(gr + cols, mask=m, other=0).to(__CT__)
        yv = tl.load(yr + cols, mask=m, other=0).to(__CT__)
        if LOG:
            r = gv - tl.exp(yv) * tl.sum(gv, axis=0)
        else:
            gy = gv * yv
            r = gy - yv * tl.sum(gy, axis=0)
        tl.store(orow + cols, r.to(out.dtype.element_ty), mask=m)
    else:
        acc = tl.zeros([BLOCK], __CT__)
        for n0 in range(0, N, BLOCK):
            cols = n0 + tl.arange(0, BLOCK)
            m = cols < N
            gv = tl.load(gr + cols, mask=m, other=0).to(__CT__)
            if LOG:
                acc += gv
            else:
                acc += gv * tl.load(yr + cols, mask=m, other=0).to(__CT__)
        s = tl.sum(acc, axis=0)
        for n0 in range(0, N, BLOCK):
            cols = n0 + tl.arange(0, BLOCK)
            m = cols < N
            gv = tl.load(gr + cols, mask=m, other=0).to(__CT__)
            yv = tl.load(yr + cols, mask=m, other=0).to(__CT__)
            if LOG:
                r = gv - tl.exp(yv) * s
            else:
                r = gv * yv - yv * s
            tl.store(orow + cols, r.to(out.dtype.element_ty), mask=m)
'''


def _last_dense(t, d: int):
    """``t`` with dim ``d`` moved last, contiguous."""
    moved = t.movedim(d, -1) if t.ndim > 1 and d != t.ndim - 1 else t
    return moved if moved.is_contiguous() else moved.contiguous()


def _softmax_backward(log: bool):
    name = "_log_softmax_backward_data" if log else "_softmax_backward_data"

    def kernel(grad_output, output, dim, input_dtype):
        rd = dt.to_dtype(input_dtype)
        nd = output.ndim
        d = dim % nd if nd else 0
        if output.dtype.is_complex or not output.dtype.is_floating_point:
            raise NotImplementedError(f"ember.ops.{name} has no CUDA kernel for {output.dtype}")
        shape = tuple(output._shape)
        grad = grad_output if tuple(grad_output._shape) == shape else grad_output.expand(*shape)
        if grad.dtype is not output.dtype:
            grad = grad.to(output.dtype)
        g, y = _last_dense(grad, d), _last_dense(output, d)
        n = y._shape[-1] if y.ndim else 1
        out = new_empty_tensor(y._shape, rd, output._device)
        rows = y.numel() // max(n, 1)
        if rows and n:
            block, single, warps = _block(n)
            index = output._device.index or 0
            sig = {"g": "*" + TRITON[g.dtype], "y": "*" + TRITON[y.dtype], "out": "*" + TRITON[rd], "N": "i64",
                   "BLOCK": "constexpr", "LOG": "constexpr", "SINGLE": "constexpr"}
            al = _aligned(n, ("g", g), ("y", y), ("out", out))
            launcher = _compile.kernel(_SOFTMAX_BWD.replace("__CT__", TL[_ct(y.dtype)]), "k", sig,
                                       {"BLOCK": block, "LOG": log, "SINGLE": single}, al, warps, 1, index)
            launcher((rows, 1, 1), current_handle(index), g.data_ptr(), y.data_ptr(), out.data_ptr(), n)
        if nd > 1 and d != nd - 1:
            out = out.movedim(-1, d).contiguous()
        return out

    return kernel


def register() -> None:
    OPS["gelu_backward"].kernels["cuda"] = _gelu_backward
    OPS["_softmax_backward_data"].kernels["cuda"] = _softmax_backward(False)
    OPS["_log_softmax_backward_data"].kernels["cuda"] = _softmax_backward(True)

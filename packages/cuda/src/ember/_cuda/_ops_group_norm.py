"""native_group_norm and its backward on CUDA, composed from CUDA kernels (a var_mean per group,
per-channel sums, elementwise affine passes), and flip (one index_select per flipped dim).

The backward follows the CPU kernel's (PyTorch's) closed form: with per-(n, c) sums
``ds = sum(dy * x)`` and ``db = sum(dy)`` and per-group ``b, c2``, ``dx = rstd * w * dy + b * x + c2``.
float16/bfloat16 compute in float32 and round once, as on the CPU.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.tensor import new_empty_tensor

_HALF = (dt.float16, dt.bfloat16)


def _work(t):
    if t is None:
        return None
    return t.to(dt.float32) if t.dtype in _HALF else t


def _channel(t, c, fill, like):
    if t is not None:
        return _work(t)
    return new_empty_tensor((c,), like.dtype, like._device).fill_(fill)


def _group_norm(input, weight, bias, n, c, hw, group, eps):
    x = _work(input).reshape(n, group, -1)
    dev = input._device
    if x.numel() == 0:
        empty = new_empty_tensor((n, group), input.dtype, dev)
        return new_empty_tensor(input._shape, input.dtype, dev), empty, empty
    var, mean = x.var_mean(-1, correction=0)
    rstd = (var + eps).rsqrt()
    y = ((x - mean.unsqueeze(-1)) * rstd.unsqueeze(-1)).reshape(n, c, hw)
    w, b = _channel(weight, c, 1.0, x), _channel(bias, c, 0.0, x)
    y = y * w.reshape(c, 1) + b.reshape(c, 1)
    out = y.reshape(input._shape).to(input.dtype)
    return out, mean.to(input.dtype), rstd.to(input.dtype)


def _group_norm_backward(grad_out, input, mean, rstd, weight, n, c, hw, group, output_mask):
    x, g = _work(input).reshape(n, c, hw), _work(grad_out).reshape(n, c, hw)
    cd = x.dtype
    mean, rstd = mean.to(cd).reshape(n, group), rstd.to(cd).reshape(n, group)
    per = c // group
    ds = (g * x).sum(-1)  # (n, c)
    db_nc = g.sum(-1)
    w = _channel(weight, c, 1.0, x)
    dx = dw = db = None
    if output_mask[0]:
        ds_g = (ds * w).reshape(n, group, per).sum(-1)
        db_g = (db_nc * w).reshape(n, group, per).sum(-1)
        s = 1.0 / (per * hw)
        b = (db_g * mean - ds_g) * rstd * rstd * rstd * s
        c2 = -b * mean - db_g * rstd * s
        a_nc = (rstd.unsqueeze(-1) * w.reshape(group, per)).reshape(n, c, 1)
        b_nc = b.unsqueeze(-1).expand(n, group, per).reshape(n, c, 1)
        c_nc = c2.unsqueeze(-1).expand(n, group, per).reshape(n, c, 1)
        dx = (g * a_nc + x * b_nc + c_nc).reshape(input._shape).to(input.dtype)
    if output_mask[1] or output_mask[2]:
        m_nc = mean.unsqueeze(-1).expand(n, group, per).reshape(n, c)
        r_nc = rstd.unsqueeze(-1).expand(n, group, per).reshape(n, c)
        if output_mask[1]:
            dw = ((ds - db_nc * m_nc) * r_nc).sum(0).to(input.dtype)
        if output_mask[2]:
            db = db_nc.sum(0).to(input.dtype)
    return dx, dw, db


def _flip(self, dims):
    from ember._src.ops.creation.factories import arange
    from ember._src.shapes import wrap_dims

    dims = wrap_dims(dims, self.ndim) if self.ndim else ()
    out = self
    for d in sorted(set(dims)):
        size = self._shape[d]
        if size > 1:
            out = out.index_select(d, arange(size - 1, -1, -1, device=self._device))
    return out.clone() if out is self else out


def register() -> None:
    OPS["native_group_norm"].kernels["cuda"] = _group_norm
    OPS["native_group_norm_backward"].kernels["cuda"] = _group_norm_backward
    OPS["flip"].kernels["cuda"] = _flip

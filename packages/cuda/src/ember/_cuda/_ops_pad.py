"""_pad_enum (reflect, replicate, circular padding: ``F.pad`` modes and convolutions'
``padding_mode``) and its backward on CUDA, as gathers and index-adds.

Each padded dim maps every output position to the input position it copies (``o - before``
reflected about the edges, clamped to them, or taken modulo the size left after negative pads
crop), so the
forward is one ``index_select`` per padded dim and the backward one ``index_add_`` per dim in the
reverse order, which sums the gradient of every copy into its source. Written with dispatched ops
only, so the composite was also checked against the CPU kernels on CPU tensors.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.nn import resample as core

_REFLECT, _REPLICATE, _CIRCULAR = 1, 2, 3


def _sources(size: int, before: int, after: int, mode: int, device):
    """For each output position along a dim, the input position it copies."""
    import ember

    p = ember.arange(-before, size + after, device=device)
    if mode == _REFLECT:
        p = p.abs()
        return ember.where(p >= size, 2 * (size - 1) - p, p)
    if mode == _REPLICATE:
        return p.clamp(0, size - 1)
    # circular: negative pads crop first, and positive ones wrap around what is left (PyTorch's)
    start = max(-before, 0)
    kept = size - start - max(-after, 0)
    q = ember.arange(-max(before, 0), kept + max(after, 0), device=device)
    return q.remainder(kept) + start


def _plan(self, pad, mode):
    """(dim, source positions) per padded dim, last dim first (the order of ``pad``)."""
    core._pad_shape(self, pad, mode)  # PyTorch's checks and errors
    return [(self.ndim - 1 - i, _sources(self._shape[self.ndim - 1 - i], pad[2 * i], pad[2 * i + 1], mode,
                                         self._device)) for i in range(len(pad) // 2)]


def _pad_enum(self, pad, mode, value=None):
    out = self
    for d, src in _plan(self, pad, mode):
        out = out.index_select(d, src)
    return out if out is not self else out.clone()


def _pad_enum_backward(grad_output, self, pad, mode):
    plan = _plan(self, pad, mode)
    shape = core._pad_shape(self, pad, mode)
    if tuple(grad_output._shape) != shape:
        raise RuntimeError(f"_pad_enum_backward: expected grad_output of size {list(shape)}, but got "
                           f"{list(grad_output._shape)}")
    work = dt.float32 if self.dtype in (dt.float16, dt.bfloat16) else self.dtype
    g = grad_output.to(work)
    for d, src in reversed(plan):
        sizes = list(g._shape)
        sizes[d] = self._shape[d]
        g = g.new_zeros(tuple(sizes)).index_add_(d, src, g)
    return g.to(self.dtype)


def register() -> None:
    OPS["_pad_enum"].kernels["cuda"] = _pad_enum
    OPS["_pad_enum_backward"].kernels["cuda"] = _pad_enum_backward

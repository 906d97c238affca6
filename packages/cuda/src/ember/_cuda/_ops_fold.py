"""im2col (``F.unfold``) and col2im (``F.fold``) on CUDA as a gather from / an index-add into the
zero-padded image, through one table of source positions per (kernel offset, block) built on the
host. Written with dispatched ops only, so the composite was also checked against the CPU kernels
on CPU tensors. float16/bfloat16 compute in float32, as the CPU kernels.
"""

from __future__ import annotations

import numpy as np

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.nn import conv as core


def _positions(h: int, w: int, kernel_size, dilation, padding, stride, blocks, device):
    """Flat positions in the padded (h + 2 ph, w + 2 pw) plane, ordered (kernel row, kernel col,
    block row, block col): the layout of a column's entries."""
    import ember

    wp = w + 2 * padding[1]
    ki = np.arange(kernel_size[0])[:, None, None, None] * dilation[0]
    kj = np.arange(kernel_size[1])[None, :, None, None] * dilation[1]
    bi = np.arange(blocks[0])[None, None, :, None] * stride[0]
    bj = np.arange(blocks[1])[None, None, None, :] * stride[1]
    return ember.tensor(((ki + bi) * wp + (kj + bj)).reshape(-1)).to(device)


def _work(t):
    return t.to(dt.float32) if t.dtype in (dt.float16, dt.bfloat16) else t


def _im2col(self, kernel_size, dilation, padding, stride):
    shape, blocks = core._im2col_check(self, kernel_size, dilation, padding, stride)
    x = _work(self)
    x = x if x.ndim == 4 else x.unsqueeze(0)
    n, c, h, w = x._shape
    xp = OPS["constant_pad_nd"](x, (padding[1], padding[1], padding[0], padding[0]), 0) if any(padding) else x
    pos = _positions(h, w, kernel_size, dilation, padding, stride, blocks, self._device)
    cols = xp.reshape(n, c, -1).index_select(2, pos)
    return cols.reshape(shape).to(self.dtype)


def _col2im(self, output_size, kernel_size, dilation, padding, stride):
    shape, blocks = core._col2im_check(self, output_size, kernel_size, dilation, padding, stride)
    cols = _work(self)
    cols = cols if cols.ndim == 3 else cols.unsqueeze(0)
    n = cols._shape[0]
    c = cols._shape[1] // (kernel_size[0] * kernel_size[1])
    h, w = output_size
    hp, wp = h + 2 * padding[0], w + 2 * padding[1]
    pos = _positions(h, w, kernel_size, dilation, padding, stride, blocks, self._device)
    out = cols.new_zeros((n, c, hp * wp)).index_add_(2, pos, cols.reshape(n, c, -1))
    out = out.reshape(n, c, hp, wp)[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w]
    return out.reshape(shape).to(self.dtype)


def register() -> None:
    OPS["im2col"].kernels["cuda"] = _im2col
    OPS["col2im"].kernels["cuda"] = _col2im

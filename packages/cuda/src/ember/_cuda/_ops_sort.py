"""sort, argsort (through sort), topk, kthvalue, median and nanmedian on CUDA.

Rows of up to 4096 elements of a 32-bit-or-narrower dtype sort in one Triton program each: every
element becomes one int64 key, its value mapped to an order-preserving int32 (floats: sign-
magnitude flipped to two's complement, NaN largest, -0.0 equal to 0.0; descending: the bitwise
complement) in the high half and its position in the low half, and ``tl.sort`` orders the keys.
Equal values keep their positions' order, so the sort is stable either way, and NaN comes last
ascending and first descending, as in PyTorch. The values are then read back through the sorted
positions. topk is the first ``k`` of such a sort.

topk of a longer row (a vocabulary) sorts it by blocks of 4096 and then the blocks' first k (while
they fit one program). Other longer rows and 64-bit dtypes (whose value and position do not fit one
64-bit key) take the CPU kernel through a host round trip: correct, but a synchronization and two
copies (see NOTES.md).
"""

from __future__ import annotations

import ember
from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.indexing import sorting as core_sort
from ember._src.shapes import wrap_dim
from ember._src.tensor import new_empty_tensor

from . import _compile
from ._elementwise import HEADER, TRITON
from ._streams import current_handle

MAX_ROW = 4096
_NARROW = (dt.float32, dt.float16, dt.bfloat16, dt.int32, dt.int16, dt.int8, dt.uint8, dt.bool)

SORT = HEADER + '''
@triton.jit
def k(x, vals, idx, N, BN: tl.constexpr, FLOAT: tl.constexpr, DESCENDING: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BN)
    m = cols < N
    v = tl.load(x + row * N + cols, mask=m, other=0)
    if FLOAT:
        f = v.to(tl.float32)
        bits = f.to(tl.int32, bitcast=True)
        key = bits ^ ((bits >> 31) & 0x7FFFFFFF)
        key = tl.where(f == 0, 0, key)
        key = tl.where(f != f, 0x7FFFFFFF, key)
    else:
        key = v.to(tl.int32)
    if DESCENDING:
        key = ~key
    key = tl.where(m, key, 0x7FFFFFFF)
    packed = (key.to(tl.int64) << 32) | cols.to(tl.int64)
    packed = tl.sort(packed, 0)
    pos = (packed & 0xFFFFFFFF).to(tl.int32)
    out = tl.load(x + row * N + pos, mask=m, other=0)
    tl.store(vals + row * N + cols, out, mask=m)
    tl.store(idx + row * N + cols, pos.to(tl.int64), mask=m)
'''


def _rows_sorted(x, descending: bool):
    """(values, indices) of sorting the contiguous ``x`` along its last dim on the device."""
    n = x._shape[-1]
    values = new_empty_tensor(x._shape, x.dtype, x._device)
    indices = new_empty_tensor(x._shape, dt.int64, x._device)
    rows = x.numel() // n if n else 0
    if rows:
        bn = max(16, 1 << (n - 1).bit_length())
        index = x._device.index or 0
        sig = {"x": "*" + TRITON[x.dtype], "vals": "*" + TRITON[x.dtype], "idx": "*i64", "N": "i64",
               "BN": "constexpr", "FLOAT": "constexpr", "DESCENDING": "constexpr"}
        launcher = _compile.kernel(SORT, "k", sig, {"BN": bn, "FLOAT": x.dtype.is_floating_point,
                                                     "DESCENDING": bool(descending)}, (), 4 if bn <= 1024 else 8, 1,
                                   index)
        launcher((rows, 1, 1), current_handle(index), x.data_ptr(), values.data_ptr(), indices.data_ptr(), n)
    return values, indices


def _on_host(kernel, self, *args, **kwargs):
    values, indices = kernel(self.cpu(), *args, **kwargs)
    return values.to(self._device), indices.to(self._device)


def _sort(self, *, stable=None, dim=-1, descending=False):
    core_sort._sort_meta(self, stable=stable, dim=dim, descending=descending)  # PyTorch's checks
    d = wrap_dim(dim, max(self.ndim, 1))
    if self.ndim == 0 or self._shape[d] <= 1:
        return self.clone(), new_empty_tensor(self._shape, dt.int64, self._device, zero=True)
    if self.dtype not in _NARROW or self._shape[d] > MAX_ROW:
        return _on_host(OPS["sort"].kernels["cpu"], self, stable=stable, dim=dim, descending=descending)
    last = d == self.ndim - 1
    x = (self if last else self.movedim(d, -1)).contiguous()
    values, indices = _rows_sorted(x, descending)
    if not last:
        values, indices = values.movedim(-1, d).contiguous(), indices.movedim(-1, d).contiguous()
    return values, indices


def _topk(self, k, dim=-1, largest=True, sorted=True):
    d = core_sort._topk_check(self, k, dim)
    if self.ndim == 0:
        return self.clone(), new_empty_tensor((), dt.int64, self._device, zero=True)
    n = self._shape[d]
    if self.dtype in _NARROW and n > MAX_ROW and -(-n // MAX_ROW) * k <= MAX_ROW:
        return _topk_by_blocks(self, k, d, largest)
    if self.dtype not in _NARROW or n > MAX_ROW:
        return _on_host(OPS["topk"].kernels["cpu"], self, k, dim, largest, sorted)
    values, indices = _sort(self, dim=d, descending=largest)
    return values.narrow(d, 0, k).contiguous(), indices.narrow(d, 0, k).contiguous()


def _pad_value(dtype, largest: bool):
    """What a row is padded with to whole blocks: an element that sorts after every real one of its value
    (the stable sort keeps the real ones, at lower positions, first among equals)."""
    if dtype.is_floating_point:
        return float("-inf") if largest else float("nan")  # NaN sorts last ascending
    if dtype is dt.bool:
        return not largest
    info = ember.iinfo(dtype)
    return info.min if largest else info.max


def _topk_by_blocks(self, k, d, largest):
    """topk of rows longer than one program's sort (a vocabulary of logits): every block of MAX_ROW
    elements keeps its first k of a stable sort, then the blocks' candidates (at most MAX_ROW) are sorted
    once more. Every element of the row's first k is among its block's first k, and equal values keep
    their positions' order across blocks, so this is the first k of a stable sort of the whole row."""
    last = d == self.ndim - 1
    x = (self if last else self.movedim(d, -1)).contiguous()
    lead, n = tuple(x._shape[:-1]), x._shape[-1]
    rows = x.numel() // n
    blocks = -(-n // MAX_ROW)
    x2 = x.reshape(rows, n)
    if blocks * MAX_ROW != n:
        pad = ember.full((rows, blocks * MAX_ROW - n), _pad_value(x.dtype, largest), dtype=x.dtype, device=x.device)
        x2 = ember.cat([x2, pad], 1)
    values, positions = _rows_sorted(x2.reshape(rows * blocks, MAX_ROW), largest)
    offsets = ember.arange(0, blocks * MAX_ROW, MAX_ROW, device=x.device).reshape(1, blocks, 1)
    cand_values = values.narrow(1, 0, k).reshape(rows, blocks * k)
    cand_index = (positions.narrow(1, 0, k).reshape(rows, blocks, k) + offsets).reshape(rows, blocks * k)
    top_values, order = _rows_sorted(cand_values, largest)
    order = order.narrow(1, 0, k)
    values = top_values.narrow(1, 0, k).reshape(lead + (k,))
    indices = ember.gather(cand_index, 1, order).reshape(lead + (k,))
    if not last:
        values, indices = values.movedim(-1, d), indices.movedim(-1, d)
    return values.contiguous(), indices.contiguous()


def _select(self, dim, keepdim, k, name):
    """kthvalue (0-based ``k``), median (the lower one; NaN when the row has one) and nanmedian (of
    the row's numbers; NaN when it has none) as a gather from a stable ascending sort, where NaN
    comes last. Written with dispatched ops only: the same code runs on any device."""
    import ember

    d, _ = core_sort._select_meta(self, dim, keepdim, k, name)  # PyTorch's checks
    if self.ndim == 0:
        return self.clone(), new_empty_tensor((), dt.int64, self._device, zero=True)
    n = self._shape[d]
    values, indices = ember.sort(self, dim=d, stable=True)
    if name == "kthvalue":
        at = ember.full_like(values.narrow(d, 0, 1), k, dtype=dt.int64)
    else:
        nans = self.isnan().sum(d, keepdim=True) if self.dtype.is_floating_point else \
            ember.zeros_like(values.narrow(d, 0, 1), dtype=dt.int64)
        if name == "median":
            at = ember.where(nans > 0, n - nans, ember.full_like(nans, (n - 1) // 2))
        else:
            at = ((n - nans - 1) // 2).clamp(min=0)
    v, i = values.gather(d, at), indices.gather(d, at)
    if not keepdim:
        v, i = v.squeeze(d), i.squeeze(d)
    return v, i


def _kthvalue(self, k, dim=-1, keepdim=False):
    return _select(self, dim, keepdim, k - 1, "kthvalue")


def _median(self, dim, keepdim=False):
    return _select(self, dim, keepdim, 0, "median")


def _nanmedian(self, dim, keepdim=False):
    return _select(self, dim, keepdim, 0, "nanmedian")


def register() -> None:
    OPS["sort"].kernels["cuda"] = _sort
    OPS["topk"].kernels["cuda"] = _topk
    OPS["kthvalue"].kernels["cuda"] = _kthvalue
    OPS["median"].kernels["cuda"] = _median
    OPS["nanmedian"].kernels["cuda"] = _nanmedian

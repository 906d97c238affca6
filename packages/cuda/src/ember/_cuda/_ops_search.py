"""searchsorted and multinomial on CUDA.

searchsorted: one lane per value, a binary search of its row of the sorted sequence with
PyTorch's comparisons (the search moves right past a NaN, in the sequence or as the value). A
``sorter`` is applied first with a gather.

multinomial: with replacement (or one sample), each sample is a uniform draw scaled to the row's
total and searched in the row's running sum (``right``: zero-probability categories, whose
interval is empty, are never drawn); without replacement, the exponential race: the categories
with the smallest ``Exp(1) / p`` win. Invalid distributions (negative, infinite or NaN weights,
rows summing to 0, too few categories) are reported at the next synchronization, as PyTorch's
device-side asserts do, not with a sync now.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.indexing import sorting as core_sort
from ember._src.tensor import new_empty_tensor

from . import _compile
from ._elementwise import HEADER, TRITON
from ._ops_index import assert_async
from ._streams import current_handle

SEARCH = HEADER + '''
@triton.jit
def k(seq, vals, out, M, per_row, NV, STEPS, BLOCK: tl.constexpr, RIGHT: tl.constexpr):
    pos = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = pos < NV
    base = seq + (pos // per_row) * M
    v = tl.load(vals + pos, mask=m, other=0)
    lo = pos * 0
    hi = lo + M
    for _ in range(0, STEPS):
        active = m & (lo < hi)
        mid = (lo + hi) // 2
        s = tl.load(base + mid, mask=active, other=0)
        # PyTorch's comparisons: a NaN, in the sequence or as the value, never stops the search
        if RIGHT:
            go = ~(s > v)
        else:
            go = ~(s >= v)
        lo = tl.where(active & go, mid + 1, lo)
        hi = tl.where(active & (~go), mid, hi)
    tl.store(out + pos, lo.to(out.dtype.element_ty), mask=m)
'''


def _searchsorted(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
    right = core_sort._search_plan(sorted_sequence, self, side, right, sorter)
    if self._device is not sorted_sequence._device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{sorted_sequence._device} and {self._device}!")
    common = dt.promote_types(sorted_sequence.dtype, self.dtype)
    if common in (dt.float16, dt.bfloat16):
        common = dt.float32
    seq = sorted_sequence if sorter is None else sorted_sequence.gather(-1, sorter)
    seq, values = seq.to(common).contiguous(), self.to(common).contiguous()
    out = new_empty_tensor(self._shape, dt.int32 if out_int32 else dt.int64, self._device)
    m = seq._shape[-1]
    rows = 1 if seq.ndim == 1 else seq.numel() // max(m, 1)
    nv = values.numel()
    if nv:
        per_row = nv if seq.ndim == 1 else nv // max(rows, 1)
        index = self._device.index or 0
        sig = {"seq": "*" + TRITON[common], "vals": "*" + TRITON[common], "out": "*" + TRITON[out.dtype], "M": "i64",
               "per_row": "i64", "NV": "i64", "STEPS": "i64", "BLOCK": "constexpr", "RIGHT": "constexpr"}
        launcher = _compile.kernel(SEARCH, "k", sig, {"BLOCK": 256, "RIGHT": bool(right)}, (), 4, 1, index)
        launcher((-(-nv // 256), 1, 1), current_handle(index), seq.data_ptr(), values.data_ptr(), out.data_ptr(), m,
                 max(per_row, 1), nv, m.bit_length() + 1)
    return out


def _multinomial(probs, num_samples, replacement=False, *, generator=None):
    import ember
    from ember._src.ops.random import samplers

    shape = samplers._multinomial_shape(probs, num_samples, replacement)
    if probs.numel() == 0:
        return new_empty_tensor(shape, dt.int64, probs._device)
    ct = dt.float64 if probs.dtype is dt.float64 else dt.float32
    p = probs.to(ct).reshape(-1, probs._shape[-1])
    rows, n = p._shape
    assert_async(((p < 0) | ~p.isfinite()).any(-1), "invalid multinomial distribution (encountering probability "
                 "entry < 0, or inf, or nan)")
    positive = (p > 0).to(dt.int64).sum(-1)
    assert_async(positive == 0, "invalid multinomial distribution (sum of probabilities <= 0)")
    if replacement or num_samples == 1:
        cdf = p.cumsum(-1)
        u = ember.rand((rows, num_samples), dtype=ct, device=probs._device, generator=generator) * cdf[:, n - 1:]
        idx = _searchsorted(cdf, u, right=True)
        # A draw rounded up to the total would land past the last category with any weight.
        last = ((p > 0).to(dt.int64) * ember.arange(n, device=probs._device)).amax(-1, keepdim=True)
        idx = ember.minimum(idx, last)
    else:
        assert_async(positive < num_samples, "invalid multinomial distribution (with replacement=False, not "
                     "enough non-negative category to sample)")
        # Exp(1) draws as -log(u); a category of weight 0 gets an infinite time and never wins.
        race = -ember.rand((rows, n), dtype=ct, device=probs._device, generator=generator).log() / p
        idx = ember.topk(race, num_samples, largest=False).indices
    return idx.reshape(shape)


def register() -> None:
    OPS["searchsorted"].kernels["cuda"] = _searchsorted
    OPS["multinomial"].kernels["cuda"] = _multinomial

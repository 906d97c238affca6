"""CUDA kernels of index_put_ (``x[idx] = v``, ``x[idx] += v`` with accumulate: the backward of
advanced indexing), nonzero, and boolean-mask indexing (``x[mask]``, ``x[mask] = v``), which
becomes integer indexing through nonzero.

nonzero has a data-dependent shape: it counts on the device (a running sum of the mask) and
reads the count back, one synchronization per call, as PyTorch's CUDA nonzero does. Each
selected element then writes its coordinates at row ``running count - 1``, so the rows come in
row-major order like the CPU kernel's.
"""

from __future__ import annotations

import warnings

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops._common import check_no_overlap
from ember._src.ops.indexing import subscripts as ix
from ember._src.tensor import new_empty_tensor

from . import _compile
from . import _scatter_kernels as K
from ._elementwise import TRITON
from ._ops_index import element_offsets
from ._streams import current_handle

_MASKS = (dt.bool, dt.uint8)
_ATOMIC = (dt.float32, dt.float64, dt.int32, dt.int64)


def _nonzero(self):
    nd = self.ndim
    n = self.numel()
    if n == 0:
        return new_empty_tensor((0, nd), dt.int64, self._device)
    mask = (self != 0).reshape(-1)
    csum = mask.to(dt.int64).cumsum(0)
    count = int(csum[n - 1].item())
    out = new_empty_tensor((count, nd), dt.int64, self._device)
    if count and nd:
        device = self._device.index or 0
        sig = {"x": "*i1", "csum": "*i64", "out": "*i64", "n": "i64", "ND": "constexpr"}
        sig.update({f"s{k}": "i64" for k in range(nd)})
        sig["BLOCK"] = "constexpr"
        launcher = _compile.kernel(K.nonzero_source(nd), "k", sig, {"ND": nd, "BLOCK": 1024}, (), 4, 1, device)
        mask = mask.contiguous()
        launcher(((n + 1023) // 1024, 1, 1), current_handle(device), mask.data_ptr(), csum.data_ptr(),
                 out.data_ptr(), n, *self._shape)
    return out


def expand_masks(self, indices) -> list:
    """``indices`` with each k-dim bool/uint8 mask replaced by its k coordinate tensors (the core's
    ``_expand_masks`` on the device) and CPU index tensors moved to ``self``'s device."""
    out = []
    for idx in indices:
        if idx is not None and idx._device is not self._device and idx._device.type == "cpu":
            idx = idx.to(self._device)
        if idx is None or idx.dtype not in _MASKS:
            out.append(idx)
            continue
        if idx.dtype is dt.uint8:
            warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool "
                          "instead.", UserWarning, stacklevel=5)
        at = len(out)
        for j, size in enumerate(idx._shape):
            if at + j >= self.ndim or self._shape[at + j] != size:
                raise IndexError(
                    f"The shape of the mask {list(idx._shape)} at index {j} does not match the shape of the indexed "
                    f"tensor {list(self._shape)} at index {at + j}"
                )
        if idx.ndim == 0:  # as the core's _expand_masks: a 0-d mask indexes no dim
            continue
        coords = _nonzero(idx)
        out.extend(coords.select(1, j) for j in range(idx.ndim))
    return out


def _index_put(self, indices, values, accumulate=False):
    indices = expand_masks(self, list(indices))
    for t in indices:
        if t is not None and t._device is not self._device:
            raise RuntimeError(f"indices should be either on cpu or on the same device as the indexed tensor "
                               f"({self._device})")
    if values._device is not self._device:
        if values.ndim == 0 and values._device.type == "cpu":
            values = values.to(self._device)
        else:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{self._device} and {values._device}!")
    dims, tensors, bshape, rest, result, pos = ix._put_plan(self, indices, values)
    check_no_overlap(self, (values, *[t for t in indices if t is not None]))
    n = 1
    for s in result:
        n *= s
    if n:
        wd = self.dtype
        if accumulate and wd not in _ATOMIC:
            wd = dt.float32 if wd.is_floating_point else dt.int32
        work = self if wd is self.dtype else self.to(wd)
        vals = values.to(wd).expand(result).contiguous()
        if vals._storage is self._storage:
            vals = vals.clone()
        off = element_offsets(work, dims, tensors, bshape, rest, result, pos)
        device = self._device.index or 0
        sig = {"dst": "*" + TRITON[wd], "off": "*i64", "vals": "*" + TRITON[wd], "n": "i64", "BLOCK": "constexpr",
               "ACC": "constexpr"}
        launcher = _compile.kernel(K.PUT, "k", sig, {"BLOCK": 1024, "ACC": bool(accumulate)}, (), 4, 1, device)
        launcher(((n + 1023) // 1024, 1, 1), current_handle(device), work.data_ptr(), off.data_ptr(), vals.data_ptr(),
                 n)
        if work is not self:
            self.copy_(work.to(dt.bool) if self.dtype is dt.bool else work)
    self._bump_version()
    return self


def register() -> None:
    OPS["nonzero"].kernels["cuda"] = _nonzero
    OPS["index_put_"].kernels["cuda"] = _index_put

"""Indexing on CUDA: index_select, embedding (+ its dense backward), gather, and advanced
indexing (``index``) with integer index tensors.

Out-of-range indices cannot raise where they are found (on the device, asynchronously), and
checking them on the host would synchronize every op. As PyTorch's device-side asserts, a
kernel that meets one sets an error flag in mapped host memory; the next synchronizing call
(``ember.cuda.synchronize()``, ``.item()``, ``.cpu()``, any copy to the host) raises
``RuntimeError`` naming the op. Elements read through a bad index are never produced as
values: the kernels mask them (and the error is then certain to be reported).
"""

from __future__ import annotations

import ctypes

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.indexing import gather_scatter as sc
from ember._src.ops.indexing import subscripts as ix
from ember._src.tensor import make_tensor

from . import _compile, _driver
from ._elementwise import HEADER, TRITON
from ._storage import new_empty as new_empty_tensor  # one frame per CUDA result
from ._streams import current_handle

_FLAG: dict = {}  # "host": ctypes int, "dev": device pointer, "op": name of the last op that set it
_CODES = {}  # code -> op name


def _flag(index: int) -> int:
    f = _FLAG.get(index)
    if f is None:
        drv = _driver._driver()
        _driver.ensure_context(index)
        ptr = int(_driver.check(drv.cuMemHostAlloc(64, 2 | 1), "cuMemHostAlloc"))  # DEVICEMAP | PORTABLE
        dptr = int(_driver.check(drv.cuMemHostGetDevicePointer(ptr, 0), "cuMemHostGetDevicePointer"))
        host = ctypes.c_int32.from_address(ptr)
        host.value = 0
        f = _FLAG[index] = (host, dptr)
    return f[1]


def check_device_errors() -> None:
    """Raises (once) if a kernel flagged a bad index since the last check; call after a sync."""
    for host, _ in _FLAG.values():
        code = host.value
        if code:
            host.value = 0
            name = _CODES.get(code, "an indexing op")
            what = name[1:] if name.startswith("!") else f"index out of bounds in ember.ops.{name}"
            raise RuntimeError(f"CUDA error: device-side assert triggered: {what} "
                               "(reported at the next synchronization, as on PyTorch's CUDA device)")


_ASSERT = HEADER + '''
@triton.jit
def k(bad, flag, n, code, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    b = tl.load(bad + offs, mask=m, other=0) != 0
    tl.store(flag + offs * 0, code, mask=m & b)
'''


def assert_async(bad, message: str) -> None:
    """The backend's ``assert_async``: ``message`` raised at the next synchronization if ``bad`` (a
    bool CUDA tensor) has a true element; no wait for the device now."""
    if bad.dtype is not dt.bool:
        bad = bad != 0
    src = bad if bad.is_contiguous() else bad.contiguous()
    n = src.numel()
    if n:
        index = src._device.index or 0
        sig = {"bad": "*i1", "flag": "*i32", "n": "i64", "code": "i32", "BLOCK": "constexpr"}
        _launch_1d(_ASSERT, sig, n, (src.data_ptr(), _flag(index), n, _code("!" + message)), index)


def _code(name: str) -> int:
    for k, v in _CODES.items():
        if v == name:
            return k
    k = len(_CODES) + 1
    _CODES[k] = name
    return k


_INDEX_SELECT = HEADER + '''
@triton.jit
def k(x, idx, out, flag, n, L, D, inner, code, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    c = offs % inner
    t = offs // inner
    l = t % L
    o = t // L
    j = tl.load(idx + l, mask=m, other=0).to(tl.int64)
    ok = (j >= 0) & (j < D)
    tl.store(flag + l * 0, code, mask=m & (~ok))
    v = tl.load(x + (o * D + j) * inner + c, mask=m & ok, other=0)
    tl.store(out + offs, v, mask=m)
'''

_TAKE = HEADER + '''
@triton.jit
def k(x, off, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    o = tl.load(off + offs, mask=m, other=0)
    tl.store(out + offs, tl.load(x + o, mask=m), mask=m)
'''

_CHECK = HEADER + '''
@triton.jit
def k(idx, out, flag, n, size, code, BLOCK: tl.constexpr, WRAP: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    j = tl.load(idx + offs, mask=m, other=0).to(tl.int64)
    if WRAP:
        j = tl.where(j < 0, j + size, j)
    ok = (j >= 0) & (j < size)
    tl.store(flag + offs * 0, code, mask=m & (~ok))
    tl.store(out + offs, tl.where(ok, j, 0), mask=m)
'''

_EMB_BWD = HEADER + '''
@triton.jit
def k(g, idx, gw, D, padding, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < D
    j = tl.load(idx + r)
    v = tl.load(g + r * D + cols, mask=m, other=0).to(tl.float32)
    tl.atomic_add(gw + j * D + cols, v, mask=m & (j != padding), sem="relaxed")
'''


def _launch_1d(src, sig, n, args, index, block=1024, **constexprs):
    launcher = _compile.kernel(src, "k", sig, {"BLOCK": block, **constexprs}, (), 4, 1, index)
    launcher(((n + block - 1) // block, 1, 1), current_handle(index), *args)


def _index_select_into(out, x, dim: int, idx, name: str):
    """out (outer, L, inner) = x (outer, D, inner)[:, idx, :]; x contiguous."""
    shape = x._shape
    d_size = shape[dim] if shape else 1
    inner = 1
    for s in shape[dim + 1:]:
        inner *= s
    n = out.numel()
    if n == 0:
        return
    index = x._device.index or 0
    sig = {"x": "*" + TRITON[x.dtype], "idx": "*" + TRITON[idx.dtype], "out": "*" + TRITON[out.dtype],
           "flag": "*i32", "n": "i64", "L": "i64", "D": "i64", "inner": "i64", "code": "i32", "BLOCK": "constexpr"}
    _launch_1d(_INDEX_SELECT, sig, n, (x.data_ptr(), idx.data_ptr(), out.data_ptr(), _flag(index), n, idx.numel(),
                                       d_size, inner, _code(name)), index)


def _index_select(self, dim: int, index):
    if index._device is not self._device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{self._device} and {index._device}!")
    m = OPS["index_select"].meta(self, dim, index)
    if index.dtype not in (dt.int64, dt.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    out = new_empty_tensor(m._shape, self.dtype, self._device)
    x = self if self.is_contiguous() else self.contiguous()
    d = dim % self.ndim if self.ndim else 0
    idx = index if index.is_contiguous() else index.contiguous()
    _index_select_into(out, x, d, idx, "index_select")
    return out


def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if indices._device is not weight._device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{weight._device} and {indices._device}!")
    d = weight._shape[1]
    out = new_empty_tensor(tuple(indices._shape) + (d,), weight.dtype, weight._device)
    w = weight if weight.is_contiguous() else weight.contiguous()
    idx = indices if indices.is_contiguous() else indices.contiguous()
    _index_select_into(out, w, 0, idx, "embedding")
    return out


def _embedding_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        raise NotImplementedError("ember.ops.embedding_dense_backward with scale_grad_by_freq=True has no CUDA "
                                  "kernel")
    d = grad_output._shape[-1]
    dev = grad_output._device
    gw = new_empty_tensor((num_weights, d), dt.float32, dev, zero=True)
    g = grad_output if grad_output.is_contiguous() else grad_output.contiguous()
    idx = indices if indices.is_contiguous() else indices.contiguous()
    if idx.dtype is not dt.int64:
        idx = idx.to(dt.int64)
    rows = idx.numel()
    if rows and d:
        index = dev.index or 0
        block = min(1024, max(16, 1 << (d - 1).bit_length()))
        sig = {"g": "*" + TRITON[g.dtype], "idx": "*i64", "gw": "*fp32", "D": "i64", "padding": "i64",
               "BLOCK": "constexpr"}
        launcher = _compile.kernel(_EMB_BWD, "k", sig, {"BLOCK": block}, (), 4, 1, index)
        launcher((rows, (d + block - 1) // block, 1), current_handle(index), g.data_ptr(), idx.data_ptr(),
                 gw.data_ptr(), d, int(padding_idx))
    return gw if grad_output.dtype is dt.float32 else gw.to(grad_output.dtype)


def _checked(idx, size: int, name: str, wrap: bool = True):
    """``idx`` as contiguous int64 (negatives wrapped when ``wrap``); out-of-range entries flagged (read as 0)."""
    src = idx if idx.is_contiguous() else idx.contiguous()
    out = new_empty_tensor(src._shape, dt.int64, src._device)
    n = src.numel()
    if n:
        index = src._device.index or 0
        sig = {"idx": "*" + TRITON[src.dtype], "out": "*i64", "flag": "*i32", "n": "i64", "size": "i64",
               "code": "i32", "BLOCK": "constexpr", "WRAP": "constexpr"}
        _launch_1d(_CHECK, sig, n, (src.data_ptr(), out.data_ptr(), _flag(index), n, size, _code(name)), index,
                   WRAP=wrap)
    return out


def _take(x, offsets, out):
    n = out.numel()
    if n:
        index = x._device.index or 0
        sig = {"x": "*" + TRITON[x.dtype], "off": "*i64", "out": "*" + TRITON[out.dtype], "n": "i64",
               "BLOCK": "constexpr"}
        _launch_1d(_TAKE, sig, n, (x.data_ptr(), offsets.data_ptr(), out.data_ptr(), n), index)


def _axis_offsets(size: int, stride: int, axis: int, ndim: int, device):
    from ember._src.ops.creation.factories import arange

    shape = [1] * ndim
    shape[axis] = size
    return (arange(size, device=device) * stride).reshape(shape)


def element_offsets(self, dims, tensors, bshape, rest, result, pos):
    """int64 element offsets into ``self`` (from its data pointer) per position of the advanced-indexing
    ``result`` (contiguous); out-of-range indices flagged, negative ones wrapped."""
    nd, nb = len(result), len(bshape)
    total = None
    for d, t in zip(dims, tensors):
        w = _checked(t, self._shape[d], "index") * self._stride[d]
        w = w.reshape((1,) * pos + tuple(t._shape if t.ndim == nb else (1,) * (nb - t.ndim) + t._shape) +
                      (1,) * (nd - pos - nb))
        total = w if total is None else total + w
    for j, r in enumerate(rest):
        axis = j if j < pos else j + nb
        total = total + _axis_offsets(self._shape[r], self._stride[r], axis, nd, self._device)
    return total.expand(result).contiguous()


def _index(self, indices):
    from ._ops_put import expand_masks

    indices = expand_masks(self, list(indices))
    for t in indices:
        if t is not None and t._device is not self._device:
            raise RuntimeError(f"indices should be either on cpu or on the same device as the indexed tensor "
                               f"({self._device})")
    plan = ix._plan(self, indices)
    out = new_empty_tensor(plan[4], self.dtype, self._device)
    if out.numel() == 0:
        return out
    _take(self, element_offsets(self, *plan), out)
    return out


def _gather(self, dim, index, *, sparse_grad=False):
    d = sc._check_gather(self, dim, index)
    if index._device is not self._device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{self._device} and {index._device}!")
    out = new_empty_tensor(index._shape, self.dtype, self._device)
    if out.numel() == 0:
        return out
    if self.ndim == 0:
        total = _checked(index, 1, "gather", wrap=False) * 0
    else:
        nd = self.ndim
        total = _checked(index, self._shape[d], "gather", wrap=False) * self._stride[d]
        for a in range(nd):
            if a != d:
                total = total + _axis_offsets(index._shape[a], self._stride[a], a, nd, self._device)
        total = total.expand(index._shape).contiguous()
    _take(self, total, out)
    return out


def register() -> None:
    OPS["index_select"].kernels["cuda"] = _index_select
    OPS["embedding"].kernels["cuda"] = _embedding
    OPS["embedding_dense_backward"].kernels["cuda"] = _embedding_backward
    OPS["index"].kernels["cuda"] = _index
    OPS["gather"].kernels["cuda"] = _gather


_ = make_tensor

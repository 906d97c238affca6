"""CUDA kernels of the scattering ops: scatter_/scatter_add_/scatter_reduce_, index_add_,
index_copy_, index_fill_ and masked_scatter_ (the backward of gather, take_along_dim,
index_select and cummax/cummin write through them).

Each op runs the core's own argument checks (so errors match the CPU kernels and PyTorch), then
one launch of a kernel of ``_scatter_kernels``. As on the CPU, float16/bfloat16 reduce in float32
(and bool/8/16-bit integers in int32) through a working copy written back at the end; a plain
assignment writes ``self`` directly. Out-of-range indices are reported at the next
synchronization (``_ops_index``'s device error flag), as PyTorch's CUDA device-side asserts.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.indexing import gather_scatter as sc
from ember._src.shapes import numel, wrap_dim
from ember._src.tensor import new_empty_tensor

from . import _compile
from . import _scatter_kernels as K
from ._elementwise import TRITON
from ._ops_index import _code, _flag
from ._streams import current_handle

_HALF = (dt.float16, dt.bfloat16)
_NARROW_INT = (dt.bool, dt.int8, dt.uint8, dt.int16)
_ATOMIC = (dt.float32, dt.float64, dt.int32, dt.int64)
_ROWS_BLOCK = 128
# Sums go through atomics when the columns alone would leave most of the GPU idle.
_MIN_COLUMNS = 1 << 14


def _identity(mode: int, dtype):
    """The reduction's identity as the kernel's ``ident`` argument (a float or an int) and its type."""
    if dtype.is_floating_point:
        value = {K.PROD: 1.0, K.AMAX: float("-inf"), K.AMIN: float("inf")}.get(mode, 0.0)
        return value, "fp64"
    if mode == K.PROD:
        return 1, "i64"
    if mode in (K.AMAX, K.AMIN):
        bits = dtype.itemsize * 8
        lo, hi = (0, (1 << bits) - 1) if dtype is dt.uint8 else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        return (lo if mode == K.AMAX else hi), "i64"
    return 0, "i64"


def _as_1d(t):
    """(shape, strides) of ``t`` with a 0-d tensor seen as one element."""
    return (t._shape, t._stride) if t.ndim else ((1,), (1,))


def scatter_into(dst, d: int, index, src, mode: int, include_self: bool, name: str) -> None:
    """dst[p with p[d] := index[p]] (mode)= src[p] over index's shape; dst, index and src on one CUDA
    device, src of dst's dtype (any strides; index int32/int64)."""
    shape, istr = _as_1d(index)
    if numel(shape) == 0:
        return
    sstr, dstr = _as_1d(src)[1], _as_1d(dst)[1]
    size = dst._shape[d] if dst.ndim else 1
    dev = dst._device
    device = dev.index or 0
    stream = current_handle(device)
    flag, code = _flag(device), _code(name)
    ncols, length, cols, along = K.column_args(shape, d, istr, sstr, dstr)
    if mode == K.SUM and dst.dtype in _ATOMIC and include_self and ncols < _MIN_COLUMNS and length > 8:
        dims = K.atomic_args(shape, d, istr, sstr, dstr)
        nd = len(dims) // 4
        sig = {"dst": "*" + TRITON[dst.dtype], "idx": "*" + TRITON[index.dtype], "src": "*" + TRITON[src.dtype],
               "flag": "*i32", "n": "i64", "size": "i64", "dstd": "i64", "code": "i32"}
        sig.update({f"{c}{k}": "i64" for k in range(nd) for c in "sird"})
        sig["BLOCK"] = "constexpr"
        n = numel(shape)
        launcher = _compile.kernel(K.atomic_source(nd), "k", sig, {"BLOCK": 1024}, (), 4, 1, device)
        launcher(((n + 1023) // 1024, 1, 1), stream, dst.data_ptr(), index.data_ptr(), src.data_ptr(), flag, n,
                 size, dstr[d], code, *dims)
        return
    ident, ident_type = _identity(mode, dst.dtype)
    nc = len(cols) // 4
    sig = {"dst": "*" + TRITON[dst.dtype], "idx": "*" + TRITON[index.dtype], "src": "*" + TRITON[src.dtype],
           "flag": "*i32", "ncols": "i64", "L": "i64", "size": "i64", "ist": "i64", "sst": "i64", "dstd": "i64",
           "code": "i32", "ident": ident_type}
    sig.update({f"{c}{k}": "i64" for k in range(nc) for c in "sird"})
    sig.update({"BLOCK": "constexpr", "MODE": "constexpr", "RESET": "constexpr"})
    reset = not include_self and mode != K.ASSIGN
    launcher = _compile.kernel(K.rows_source(nc), "k", sig, {"BLOCK": _ROWS_BLOCK, "MODE": mode, "RESET": reset},
                               (), 4, 1, device)
    launcher(((ncols + _ROWS_BLOCK - 1) // _ROWS_BLOCK, 1, 1), stream, dst.data_ptr(), index.data_ptr(),
             src.data_ptr(), flag, ncols, length, size, along[0], along[1], along[2], code, ident, *cols)


def _work_dtype(dtype, mode: int):
    if mode == K.ASSIGN:
        return dtype
    if dtype in _HALF:
        return dt.float32
    if dtype in _NARROW_INT:
        return dt.int32
    return dtype


def _same_device(self, *others) -> None:
    for t in others:
        if t._device is not self._device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{self._device} and {t._device}!")


def run_scatter(self, d: int, index, src, mode: int, include_self: bool = True, name: str = "scatter"):
    """The CUDA counterpart of the core's ``_run_scatter``: self (mode)= src at index, in place."""
    if self.dtype.is_complex:
        raise NotImplementedError(f"scatter: complex tensors are not supported yet (got {self.dtype})")
    _same_device(self, index, src)
    wd = _work_dtype(self.dtype, mode)
    work = self if wd is self.dtype else self.to(wd)
    if src.dtype is not wd:
        src = src.to(wd)
    elif src._storage is self._storage:
        src = src.clone()  # reading what we write
    if mode == K.MEAN:
        scatter_into(work, d, index, src, K.SUM, include_self, name)
        counts = new_empty_tensor(self._shape, wd, self._device)
        counts.fill_(1)
        ones = counts.new_ones(()).expand(index._shape)
        scatter_into(counts, d, index, ones, K.SUM, include_self, name)
        if wd.is_floating_point:
            work.div_(counts)
        else:
            work.copy_(work.floor_divide(counts))  # counts >= 1 everywhere
    else:
        scatter_into(work, d, index, src, mode, include_self, name)
    if work is not self:
        self.copy_(work.to(dt.bool) if self.dtype is dt.bool and wd is not dt.bool else work)
    self._bump_version()
    return self


def _scatter(self, dim, index, src, *, reduce=None):
    d = sc._check_scatter(self, dim, index, src)
    sc._check_written(self, (src, index))
    return run_scatter(self, d, index, src, sc._legacy_code(reduce))


def _scatter_add(self, dim, index, src):
    d = sc._check_scatter(self, dim, index, src, "scatter_add")
    sc._check_written(self, (src, index))
    return run_scatter(self, d, index, src, K.SUM, name="scatter_add")


def _scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    if reduce not in sc._SCATTER_REDUCE_CODES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    d = sc._check_scatter(self, dim, index, src, "scatter_reduce")
    if reduce == "mean" and self.dtype is dt.bool:
        raise NotImplementedError("\"scatter_gather_tensor_cuda_reduce_mean\" not implemented for 'Bool'")
    sc._check_written(self, (src, index))
    return run_scatter(self, d, index, src, sc._SCATTER_REDUCE_CODES[reduce], include_self, "scatter_reduce")


def _index_add(self, dim, index, source, *, alpha=1):
    d = wrap_dim(dim, max(self.ndim, 1))
    sc._check_index_vector("index_add_", index)
    if index.dtype not in sc._INDEX_DTYPES:
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: {index.dtype}")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"index_add_(): self ({self.dtype}) and source ({source.dtype}) must have the same "
                           "scalar type")
    sc._check_source("index_add_", self, d, index, source)
    sc._check_written(self, (source, index))
    if isinstance(alpha, float) and not (self.dtype.is_floating_point or self.dtype.is_complex):
        alpha = bool(alpha) if self.dtype is dt.bool else int(alpha)
    if alpha != 1:
        source = source * alpha
    return run_scatter(self, d, index_view(index, d, source._shape), source, K.SUM, name="index_add")


def index_view(index, d: int, shape: tuple):
    return sc._expanded_index(index, d, shape)


def _index_copy(self, dim, index, source):
    d = wrap_dim(dim, max(self.ndim, 1))
    sc._check_index_vector("index_copy_", index)
    if index.dtype is not dt.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got {index.dtype}")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{self.dtype} and (source) {source.dtype}")
    n = numel(index._shape)
    size = source._shape[d] if source.ndim else 1
    if size != n:
        raise IndexError(f"index_copy_(): Number of indices ({n}) should be equal to source.size(dim) ({size})")
    sc._check_source("index_copy_", self, d, index, source)
    sc._check_written(self, (source, index))
    return run_scatter(self, d, index_view(index, d, source._shape), source, K.ASSIGN, name="index_copy")


def _index_fill(self, dim, index, value):
    d = wrap_dim(dim, max(self.ndim, 1))
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if index.dtype is not dt.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    sc._check_written(self, (index,), internal=False)
    size = self._shape[d] if self.ndim else 1
    index = index.where(index >= 0, index + size)  # index_fill wraps negative indices
    shape = list(self._shape)
    if shape:
        shape[d] = numel(index._shape)
    idx = index_view(index, d, tuple(shape))
    if value._device is not self._device:
        value = value.to(self._device)
    src = value.to(self.dtype).reshape(()).expand(idx._shape)
    return run_scatter(self, d, idx, src, K.ASSIGN, name="index_fill")


def _masked_scatter(self, mask, source):
    from ember._src.ops._common import check_internal_overlap
    from ember._src.shapes import broadcast_shapes

    if mask.dtype is not dt.bool:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {mask.dtype}")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got"
                           f"{self.dtype} and {source.dtype}")
    shape = broadcast_shapes(self._shape, mask._shape)
    if shape != self._shape:
        raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast shape {list(shape)}")
    _same_device(self, mask, source)
    check_internal_overlap(self)
    n = self.numel()
    if n:
        m = mask.expand(shape).contiguous()
        csum = m.to(dt.int64).reshape(-1).cumsum(0)
        work = self if self.is_contiguous() else self.contiguous()
        src = source.contiguous()
        device = self._device.index or 0
        sig = {"dst": "*" + TRITON[work.dtype], "mask": "*i1", "csum": "*i64", "src": "*" + TRITON[src.dtype],
               "flag": "*i32", "n": "i64", "nsrc": "i64", "code": "i32", "BLOCK": "constexpr"}
        launcher = _compile.kernel(K.MASKED_SCATTER, "k", sig, {"BLOCK": 1024}, (), 4, 1, device)
        launcher(((n + 1023) // 1024, 1, 1), current_handle(device), work.data_ptr(), m.data_ptr(), csum.data_ptr(),
                 src.data_ptr(), _flag(device), n, src.numel(), _code("masked_scatter"))
        if work is not self:
            self.copy_(work)
    self._bump_version()
    return self


def register() -> None:
    for name, fn in (("scatter_", _scatter), ("scatter_add_", _scatter_add), ("scatter_reduce_", _scatter_reduce),
                     ("index_add_", _index_add), ("index_copy_", _index_copy), ("index_fill_", _index_fill),
                     ("masked_scatter_", _masked_scatter)):
        OPS[name].kernels["cuda"] = fn

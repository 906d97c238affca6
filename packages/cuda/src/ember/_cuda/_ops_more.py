"""CUDA kernels composed from existing ones: ``cat`` (one strided copy per input into its slice
of the output), ``any``/``all`` (a count of nonzero elements, so empty inputs give PyTorch's
False/True), and the scans ``cumsum``/``cumprod`` (a Triton associative scan per row, rows
longer than one block carried across blocks).
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.tensor import make_tensor

from . import _compile
from ._elementwise import HEADER, TL, TRITON
from ._ops_copy import device_copy
from ._ops_pointwise import fill_values
from ._storage import new_empty as new_empty_tensor  # one frame per CUDA result
from ._streams import current_handle


def _cat(tensors, dim=0):
    from ember._src.ops.shape.joining import _cat_plan

    shape, dtype, parts, device = _cat_plan(tensors, dim)  # PyTorch's checks, promotion, legacy empties
    result = new_empty_tensor(shape, dtype, device)
    if not parts or result.numel() == 0:
        return result
    d = dim % result.ndim
    # Each input into its slice of the fresh result: the slice (narrow's view) made directly and written by
    # copy_'s kernel (device_copy), without narrow's and copy_'s dispatch and checks (nothing can overlap a fresh
    # result; the split backward of every attention layer's q, k, v comes here). copy_ also bumped the result's
    # version once per input, where PyTorch's cat returns it at version 0.
    storage, strides, step, device = result._storage, result._stride, result._stride[d], result._device
    offset = 0
    for t in parts:
        size = t._shape[d]
        if size:
            piece = shape[:d] + (size,) + shape[d + 1:]
            device_copy(make_tensor(storage, piece, strides, offset * step, dtype, device), t)
        offset += size
    return result


def _count_nonzero(x, dim, keepdim):
    import ember

    dims = None if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    nz = ember.ne(x, 0).to(dt.int64)
    return nz.sum(dims, keepdim=keepdim) if dims is not None else nz.sum()


def _any(x, dim=None, keepdim=False):
    import ember

    return ember.gt(_count_nonzero(x, dim, keepdim), 0)


def _all(x, dim=None, keepdim=False):
    import ember

    total = 1
    for i in ([dim] if isinstance(dim, int) else (dim if dim is not None else range(x.ndim))):
        total *= x._shape[i % max(x.ndim, 1)] if x.ndim else 1
    if dim is None:
        total = x.numel()
    return ember.eq(_count_nonzero(x, dim, keepdim), total)


_SCAN = HEADER + '''
@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def _logadd(a, b):
    # log(exp(a) + exp(b)); equal infinities (and -inf, the identity) give themselves, NaN propagates
    hi = tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
    lo = tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
    return tl.where((lo == hi) & (tl.abs(lo) == float('inf')), lo, hi + libdevice.log1p(tl.exp(lo - hi)))


@triton.jit
def k(x, out, N, BLOCK: tl.constexpr, PROD: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    if PROD:
        carry = tl.full([1], 1, __CT__)
    elif LOG:
        carry = tl.full([1], -float('inf'), __CT__)
    else:
        carry = tl.zeros([1], __CT__)
    for n0 in range(0, N, BLOCK):
        cols = n0 + tl.arange(0, BLOCK)
        m = cols < N
        v = tl.load(x + row * N + cols, mask=m, other=1 if PROD else (-float('inf') if LOG else 0)).to(__CT__)
        if PROD:
            r = tl.associative_scan(v, 0, _mul) * carry
        elif LOG:
            r = _logadd(tl.associative_scan(v, 0, _logadd), carry)
        else:
            r = tl.associative_scan(v, 0, _add) + carry
        tl.store(out + row * N + cols, r.to(out.dtype.element_ty), mask=m)
        last = tl.sum(tl.where(cols == tl.minimum(n0 + BLOCK, N) - 1, r, 0), axis=0)
        carry = tl.zeros([1], __CT__) + last
'''


def _scan(name: str):
    prod = name == "cumprod"
    log = name == "logcumsumexp"

    def kernel(x, dim, dtype=None):
        if log:
            OPS[name].meta(x, dim)  # the CPU kernel's errors (integer inputs)
        rd = dtype if dtype is not None else (x.dtype if x.dtype.is_floating_point or x.dtype.is_complex
                                              else dt.int64)
        if rd.is_complex or rd is dt.bool:
            raise NotImplementedError(f"ember.ops.{name} has no CUDA kernel for {rd}")
        src = x if x.dtype is rd else x.to(rd)
        if src.ndim == 0:
            return src.clone()
        d = dim % src.ndim
        moved = src.movedim(d, -1)
        dense = moved if moved.is_contiguous() else moved.contiguous()
        n = dense._shape[-1]
        out = new_empty_tensor(dense._shape, rd, x._device)
        rows = dense.numel() // max(n, 1)
        if rows and n:
            ct = dt.float64 if rd is dt.float64 else (rd if not rd.is_floating_point else dt.float32)
            block = min(4096, max(16, 1 << (n - 1).bit_length()))
            index = x._device.index or 0
            sig = {"x": "*" + TRITON[rd], "out": "*" + TRITON[rd], "N": "i64", "BLOCK": "constexpr",
                   "PROD": "constexpr", "LOG": "constexpr"}
            launcher = _compile.kernel(_SCAN.replace("__CT__", TL[ct]), "k", sig,
                                       {"BLOCK": block, "PROD": prod, "LOG": log},
                                       (), 8 if block >= 2048 else 4, 1, index)
            launcher((rows, 1, 1), current_handle(index), dense.data_ptr(), out.data_ptr(), n)
        return out.movedim(-1, d) if d != src.ndim - 1 else out

    return kernel


_SCAN_INDEXED = HEADER + '''
@triton.jit
def _pick(v1, i1, v2, i2):
    # v2 comes later: it wins on ties (PyTorch keeps the last index of the running extreme) and every NaN
    # wins (NaN ranks above all numbers; the latest NaN's index). i1 < 0 marks the empty carry before
    # the first block. A total order on (value, position): the scan is associative.
    later = (i1 < 0) | (v2 != v2) | ((v1 == v1) & (v2 __CMP__ v1))
    return tl.where(later, v2, v1), tl.where(later, i2, i1)


@triton.jit
def k(x, out, idx, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cv = tl.zeros([1], __CT__)
    ci = tl.full([1], -1, tl.int64)
    for n0 in range(0, N, BLOCK):
        cols = n0 + tl.arange(0, BLOCK)
        m = cols < N
        v = tl.load(x + row * N + cols, mask=m, other=0).to(__CT__)
        rv, ri = tl.associative_scan((v, cols.to(tl.int64)), 0, _pick)
        rv, ri = _pick(cv, ci, rv, ri)  # the previous blocks' extreme, as the earlier operand
        tl.store(out + row * N + cols, rv.to(out.dtype.element_ty), mask=m)
        tl.store(idx + row * N + cols, ri, mask=m)
        last = tl.minimum(n0 + BLOCK, N) - 1
        cv = tl.zeros([1], __CT__) + tl.sum(tl.where(cols == last, rv, 0), axis=0)
        ci = tl.zeros([1], tl.int64) + tl.sum(tl.where(cols == last, ri, 0), axis=0)
'''


def _scan_indexed(name: str):
    is_max = name == "cummax"
    op = OPS[name]

    def kernel(x, dim):
        values, indices = op.meta(x, dim)  # the core's argument checks
        dev = x._device
        if x.dtype.is_complex:
            raise NotImplementedError(f"ember.ops.{name} has no CUDA kernel for {x.dtype}")
        if x.ndim == 0:
            return x.clone(), OPS["full"].kernels["cuda"]((), 0, dtype=dt.int64, device=dev)
        d = dim % x.ndim
        moved = x.movedim(d, -1)
        dense = moved if moved.is_contiguous() else moved.contiguous()
        n = dense._shape[-1]
        out = new_empty_tensor(dense._shape, x.dtype, dev)
        idx = new_empty_tensor(dense._shape, dt.int64, dev)
        rows = dense.numel() // max(n, 1)
        if rows and n:
            ct = (dt.float64 if x.dtype is dt.float64 else dt.float32) if x.dtype.is_floating_point else dt.int64
            block = min(2048, max(16, 1 << (n - 1).bit_length()))
            index = dev.index or 0
            src = _SCAN_INDEXED.replace("__CT__", TL[ct]).replace("__CMP__", ">=" if is_max else "<=")
            sig = {"x": "*" + TRITON[x.dtype], "out": "*" + TRITON[x.dtype], "idx": "*i64", "N": "i64",
                   "BLOCK": "constexpr"}
            launcher = _compile.kernel(src, "k", sig, {"BLOCK": block}, (), 8 if block >= 2048 else 4, 1, index)
            launcher((rows, 1, 1), current_handle(index), dense.data_ptr(), out.data_ptr(), idx.data_ptr(), n)
        if d != x.ndim - 1:
            out, idx = out.movedim(-1, d), idx.movedim(-1, d)
        return out, idx

    return kernel


def _constant_pad_nd(self, pad, value=0):
    """A fill of the padded shape, then one strided copy of the kept part of the input (negative pads
    crop it), as the CPU kernel."""
    from ember._src.ops.nn import resample
    from ember._src.tensor import make_view

    from ._ops_copy import device_copy

    shape = resample._constant_shape(self, pad)
    out = new_empty_tensor(shape, self.dtype, self._device)
    fill_values(out, value)
    if out.numel() == 0:
        return out
    src_off, dst_off = self._offset, 0
    src_shape, dst_shape, out_stride = list(self._shape), list(shape), out._stride
    for i in range(len(pad) // 2):
        d = self.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        keep = self._shape[d] + min(lo, 0) + min(hi, 0)
        if keep <= 0:
            return out
        src_off += max(-lo, 0) * self._stride[d]
        dst_off += max(lo, 0) * out_stride[d]
        src_shape[d] = dst_shape[d] = keep
    device_copy(make_view(out, tuple(dst_shape), out_stride, dst_off),
                make_view(self, tuple(src_shape), self._stride, src_off))
    return out


def register() -> None:
    OPS["cat"].kernels["cuda"] = _cat
    OPS["any"].kernels["cuda"] = _any
    OPS["all"].kernels["cuda"] = _all
    OPS["cumsum"].kernels["cuda"] = _scan("cumsum")
    OPS["cumprod"].kernels["cuda"] = _scan("cumprod")
    OPS["logcumsumexp"].kernels["cuda"] = _scan("logcumsumexp")
    OPS["cummax"].kernels["cuda"] = _scan_indexed("cummax")
    OPS["cummin"].kernels["cuda"] = _scan_indexed("cummin")
    OPS["constant_pad_nd"].kernels["cuda"] = _constant_pad_nd

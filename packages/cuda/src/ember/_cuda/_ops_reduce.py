"""CUDA kernels of the reductions: sum, nansum, prod, mean, amax/amin, max/min (all and
along a dim, with indices), argmax/argmin.

The core's meta functions validate the arguments and give the result's shape and dtype
(the same errors as on the CPU); the kernels come from ``_reduce.py`` and, for the
index-returning forms, the row kernel below (first occurrence wins; NaN counts as the
extreme, as in PyTorch). sum and mean of complex tensors reduce their (real, imag) float view
with the real kernels, as the CPU does.
"""

from __future__ import annotations

from ember._src import dtypes as dt
from ember._src.dispatch import OPS
from ember._src.ops.reduction import reduce as red
from ember._src.shapes import contiguous_strides, is_contiguous
from ember._src.tensor import make_tensor

from . import _compile
from ._elementwise import HEADER, TL, TRITON
from ._ops_pointwise import fill_values
from ._reduce import accumulator, reduce_flat, reduce_into, reduce_new, reduce_pairs, value_kind
from ._storage import new_empty as new_empty_tensor  # one frame per CUDA result
from ._streams import current_handle


def _check_real(x, name):
    if x.dtype.is_complex:
        raise NotImplementedError(f"ember.ops.{name} has no CUDA kernel for complex dtype {x.dtype}")


def _fill(out, value):
    fill_values(out, value)  # a fresh result: below its version counter


def _flat(x, all_dtypes: dict):
    """(numel, result dtype) when ``x`` reduced over every dim can skip the meta function and the
    permutation (a contiguous, non-empty ``x`` of a dtype met before: the result dtype depends on
    nothing else), else None."""
    out_dtype = all_dtypes.get(x.dtype)
    if out_dtype is None:
        return None
    n = 1
    for s in x._shape:
        n *= s
    if n == 0 or not is_contiguous(x._shape, x._stride):
        return None
    return n, out_dtype


def _dim_key(dim):
    """``dim`` as a hashable memo key (None, an int or a tuple of ints), or False where it is anything
    else (the meta function then judges it)."""
    if dim is None or type(dim) is int:
        return dim
    if type(dim) in (tuple, list) and all(type(d) is int for d in dim):
        return tuple(dim)
    return False


def _checked(op, name, x, dim, keepdim, dtype, memo: dict):
    """(reduced dims, result shape, result dtype). The meta function validates and types the call the
    first time (dtype, rank, dims, keepdim, dtype=) are met; repeats take the memo, as they would
    pass the same checks and get the same dims and dtype (bias and layer-norm gradients sum the same
    way every step)."""
    key = _dim_key(dim)
    hit = memo.get((x.dtype, x.ndim, key, keepdim, dtype)) if key is not False else None
    if hit is None:
        m = op.meta(x, dim, keepdim, dtype)
        _check_real(x, name)
        hit = (red._dims(dim, x.ndim, name), m.dtype)
        if key is not False:
            memo[(x.dtype, x.ndim, key, keepdim, dtype)] = hit
    dims, rd = hit
    return dims, red._out_shape(x._shape, dims, keepdim), rd


def _complex_sum(op, name: str, x, dim, keepdim, dtype, real_kernel):
    """sum/mean with a complex result over the (..., 2) float view of the parts: where the reduced dims are the
    trailing ones of a contiguous tensor, each group is one row of interleaved parts summed by the row kernels'
    pairs form (``reduce_pairs``); otherwise the real kernel over the view (the parts dim is kept, so its
    groups are strided or copied dense first)."""
    from ember._src.ops.pointwise.complex import view_as_complex_op, view_as_real_op

    rd = op.meta(x, dim, keepdim, dtype).dtype
    dims = red._dims(dim, x.ndim, name)
    xc = x if x.dtype is rd else x.to(rd)
    if not dims:  # a 0-d tensor
        return xc.clone() if xc is x else xc
    parts = view_as_real_op(xc)
    n = red._count(xc._shape, dims)
    if n and xc.numel() and sorted(dims) == list(range(xc.ndim - len(dims), xc.ndim)) \
            and is_contiguous(xc._shape, xc._stride):
        out = new_empty_tensor(red._out_shape(xc._shape, dims, keepdim) + (2,), parts.dtype, x._device)
        scale = 1.0 / n if name == "mean" else 1.0
        reduce_pairs(parts, xc.numel() // n, n, out, accumulator("sum", parts.dtype), scale)
        return view_as_complex_op(out)
    return view_as_complex_op(real_kernel(parts, list(dims), keepdim))


def _sum_like(name: str, kind: str):
    op = OPS[name]
    all_dtypes: dict = {}  # x's dtype -> the dtype of its sum over every dim (from the meta function)
    memo: dict = {}

    def kernel(x, dim=None, keepdim=False, dtype=None):
        if kind == "sum" and (x.dtype.is_complex or (dtype is not None and dtype.is_complex)):
            return _complex_sum(op, name, x, dim, keepdim, dtype, kernel)
        if dim is None and dtype is None and not keepdim:
            flat = _flat(x, all_dtypes)
            if flat is not None:
                return reduce_flat(kind, x, flat[0], flat[1], accumulator(kind, flat[1]))
        dims, shape, rd = _checked(op, name, x, dim, keepdim, dtype, memo)
        if dim is None and dtype is None and not keepdim:
            all_dtypes[x.dtype] = rd
        if x.numel() == 0:
            out = new_empty_tensor(shape, rd, x._device)
            _fill(out, 1 if kind == "prod" else 0)
            return out
        return reduce_new(kind, x, dims, shape, rd, accumulator(kind, rd))

    return kernel


def _mean_like(name: str):
    op = OPS[name]
    all_dtypes: dict = {}
    memo: dict = {}

    def kernel(x, dim=None, keepdim=False, dtype=None):
        if x.dtype.is_complex or (dtype is not None and dtype.is_complex):
            return _complex_sum(op, name, x, dim, keepdim, dtype, kernel)
        if dim is None and dtype is None and not keepdim:
            flat = _flat(x, all_dtypes)
            if flat is not None:
                return reduce_flat("sum", x, flat[0], flat[1], accumulator("sum", flat[1]), 1.0 / flat[0])
        dims, shape, rd = _checked(op, name, x, dim, keepdim, dtype, memo)
        if dim is None and dtype is None and not keepdim:
            all_dtypes[x.dtype] = rd
        n = red._count(x._shape, dims)
        if n == 0 or x.numel() == 0:
            out = new_empty_tensor(shape, rd, x._device)
            _fill(out, float("nan"))
            return out
        return reduce_new("sum", x, dims, shape, rd, accumulator("sum", rd), 1.0 / n)

    return kernel


def _extreme(name: str, kind: str):
    op = OPS[name]

    def kernel(x, dim=(), keepdim=False):
        m = op.meta(x, dim, keepdim)
        _check_real(x, name)
        dims = red._dims(dim, x.ndim, name)
        out = new_empty_tensor(m._shape, m.dtype, x._device)
        if out.numel() == 0:
            return out
        reduce_into(value_kind(kind, x.dtype), x, dims, out, accumulator(kind, x.dtype))
        return out

    return kernel


_ARG_SRC = HEADER + '''
@triton.jit
def k(x, vals, idxs, N, BN: tl.constexpr, IS_MAX: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x + row * N
    BIG: tl.constexpr = 9223372036854775807
    best = tl.zeros([BN], __CT__)
    besti = tl.full([BN], BIG, tl.int64)
    for n0 in range(0, N, BN):
        ns = n0 + tl.arange(0, BN)
        m = ns < N
        v = tl.load(base + ns, mask=m, other=0).to(__CT__)
        if IS_MAX:
            better = (v > best) | ((v != v) & (best == best))
        else:
            better = (v < best) | ((v != v) & (best == best))
        better = (better | (besti == BIG)) & m
        best = tl.where(better, v, best)
        besti = tl.where(better, ns.to(tl.int64), besti)
    valid = besti != BIG
    anynan = tl.sum(((best != best) & valid).to(tl.int32), axis=0) > 0
    # Lane 0 always saw element 0: its value stands in for the lanes that saw nothing.
    first = tl.sum(tl.where(tl.arange(0, BN) == 0, best, 0).to(__CT__), axis=0)
    if IS_MAX:
        target = tl.max(tl.where(valid, best, first), axis=0)
    else:
        target = tl.min(tl.where(valid, best, first), axis=0)
    cand = valid & tl.where(anynan, best != best, best == target)
    idx = tl.min(tl.where(cand, besti, BIG), axis=0)
    value = tl.sum(tl.where(besti == idx, best, 0).to(__CT__), axis=0)
    tl.store(idxs + row, idx)
    tl.store(vals + row, value.to(vals.dtype.element_ty))
'''


def _arg_rows(x2, vals, idxs, is_max: bool):
    """Row-wise (value, index) extremes of the contiguous (rows, n) ``x2``."""
    rows, n = x2._shape
    ct = dt.float32 if x2.dtype in (dt.float16, dt.bfloat16) else x2.dtype
    if ct is dt.bool:
        ct = dt.int8
    bn = 1024 if n >= 1024 else max(16, 1 << (max(n, 1) - 1).bit_length())
    sig = {"x": "*" + TRITON[x2.dtype], "vals": "*" + TRITON[vals.dtype], "idxs": "*i64", "N": "i64",
           "BN": "constexpr", "IS_MAX": "constexpr"}
    index = x2._device.index or 0
    launcher = _compile.kernel(_ARG_SRC.replace("__CT__", TL[ct]), "k", sig, {"BN": bn, "IS_MAX": is_max}, (),
                               4 if bn >= 1024 else 1, 2, index)
    launcher((rows, 1, 1), current_handle(index), x2.data_ptr(), vals.data_ptr(), idxs.data_ptr(), n)


def _arg_extreme(name: str, is_max: bool, with_values: bool):
    op = OPS[name]

    def kernel(x, dim=None, keepdim=False):
        m = op.meta(x, dim, keepdim)
        _check_real(x, name)
        shape = (m[0] if with_values else m)._shape
        values = new_empty_tensor(shape, x.dtype, x._device)
        indices = new_empty_tensor(shape, dt.int64, x._device)
        if indices.numel() == 0:
            return (values, indices) if with_values else indices
        if dim is None or x.ndim == 0:
            x2 = x.reshape(1, -1) if x.is_contiguous() else x.contiguous().reshape(1, -1)
        else:
            d = red._one_dim(dim, x.ndim, name)
            moved = x.movedim(d, -1)
            moved = moved if moved.is_contiguous() else moved.contiguous()
            x2 = moved.reshape(-1, x._shape[d])
        k_shape = (x2._shape[0],)
        vals = make_tensor(values._storage, k_shape, contiguous_strides(k_shape), 0, x.dtype, x._device)
        idxs = make_tensor(indices._storage, k_shape, contiguous_strides(k_shape), 0, dt.int64, x._device)
        _arg_rows(x2, vals, idxs, is_max)
        return (values, indices) if with_values else indices

    return kernel


def register() -> None:
    OPS["sum"].kernels["cuda"] = _sum_like("sum", "sum")
    OPS["nansum"].kernels["cuda"] = _sum_like("nansum", "nansum")
    OPS["prod"].kernels["cuda"] = _sum_like("prod", "prod")
    OPS["mean"].kernels["cuda"] = _mean_like("mean")
    OPS["amax"].kernels["cuda"] = _extreme("amax", "max")
    OPS["amin"].kernels["cuda"] = _extreme("amin", "min")
    OPS["max_all"].kernels["cuda"] = _extreme("max_all", "max")
    OPS["min_all"].kernels["cuda"] = _extreme("min_all", "min")
    OPS["max_dim"].kernels["cuda"] = _arg_extreme("max_dim", True, True)
    OPS["min_dim"].kernels["cuda"] = _arg_extreme("min_dim", False, True)
    OPS["argmax"].kernels["cuda"] = _arg_extreme("argmax", True, False)
    OPS["argmin"].kernels["cuda"] = _arg_extreme("argmin", False, False)

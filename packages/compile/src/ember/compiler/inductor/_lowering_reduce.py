"""Lowerings of reductions: sum, mean, prod, amax/amin, any/all (softmax, layer_norm, var and
logsumexp reach here through their decompositions).

A reduction always gets a buffer; the scheduler later fuses it with the pointwise work that
feeds it (inlined into its loop) and with the pointwise consumers that share its iteration
space, where the buffer shrinks to a scalar per row.
"""

from __future__ import annotations

import sympy

from ember._src import dtypes as dt

from . import config
from ._ir import Call, Const, TensorValue, cast, compute_dtype, product, unflatten
from ._lowering import Unsupported, pointwise, register


def _reduce_dims(x: TensorValue, dim) -> tuple:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(x.ndim))
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    out = []
    for d in dims:
        if x.ndim == 0:
            if d not in (0, -1):
                raise Unsupported("dim out of range")
            continue
        if not -x.ndim <= d < x.ndim:
            raise Unsupported("dim out of range")
        out.append(d % x.ndim)
    if len(set(out)) != len(out):
        raise Unsupported("repeated dim")
    return tuple(sorted(out))


def _reduced_numel(x, dims):
    return product([x.shape[d] for d in dims])


# A reduction of every element to one value runs as one program on a GPU (one row): from this
# many elements it is split into rows reduced in parallel, then the rows' partial results.
SPLIT_MIN = 1 << 16
SPLIT_ROWS = 1024


def _split_rows(ctx, x: TensorValue, dims) -> int:
    """How many rows a full reduction of ``x`` is split into (0: not split). Only for the Triton
    backend (the C++ one threads a single output itself), static sizes, and a power-of-two row
    count that divides the element count (rows of equal length, at least 1024 elements each)."""
    triton = ctx.device.type != "cpu" or config.cpu_backend == "triton"
    n = _reduced_numel(x, dims)
    if not triton or len(dims) != x.ndim or not n.is_Integer or int(n) < SPLIT_MIN:
        return 0
    n = int(n)
    rows = 1
    while rows < SPLIT_ROWS and n % (rows * 2) == 0 and n // (rows * 2) >= 1024:
        rows *= 2
    return rows if rows >= 8 else 0


def reduce(ctx, x: TensorValue, dims, keepdim, reduce_type, result_dtype, acc_dtype, origin):
    x = ctx.use(x)
    compute = compute_dtype(acc_dtype)
    rows = _split_rows(ctx, x, dims)
    if rows:
        cols = int(_reduced_numel(x, dims)) // rows

        def part(idx):  # element idx[1] of row idx[0] of x's elements in row-major order
            return cast(x.load(unflatten(idx[0] * cols + idx[1], x.shape)), compute)

        partial = ctx.reduction((sympy.Integer(rows), sympy.Integer(cols)), (1,), False, compute, reduce_type,
                                part, compute, origin)
        # the rows' results (kept in the accumulator's dtype) reduced to the one value
        shape = (*([sympy.Integer(1)] * (x.ndim - 1)), sympy.Integer(rows)) if keepdim else (sympy.Integer(rows),)
        return ctx.reduction(shape, (len(shape) - 1,), keepdim, result_dtype, reduce_type,
                             lambda idx: partial.load(idx[-1:]), compute, origin)

    def body(idx):
        return cast(x.load(idx), compute)

    return ctx.reduction(x.shape, dims, keepdim, result_dtype, reduce_type, body, compute, origin)


def _sum_dtype(x, dtype):
    if dtype is not None:
        return dt.to_dtype(dtype)
    return dt.int64 if not x.dtype.is_floating_point else x.dtype


def _check(x):
    if not isinstance(x, TensorValue) or x.dtype.is_complex:
        raise Unsupported("reduction input")


@register("sum")
def _sum(ctx, x, dim=None, keepdim=False, dtype=None):
    _check(x)
    rd = _sum_dtype(x, dtype)
    if rd.is_complex:
        raise Unsupported("complex sum")
    dims = _reduce_dims(x, dim)
    acc = compute_dtype(rd) if rd.is_floating_point else dt.int64
    return reduce(ctx, x, dims, keepdim, "sum", rd, acc, "sum")


@register("prod")
def _prod(ctx, x, dim=None, keepdim=False, dtype=None):
    _check(x)
    rd = _sum_dtype(x, dtype)
    dims = _reduce_dims(x, dim)
    acc = compute_dtype(rd) if rd.is_floating_point else dt.int64
    return reduce(ctx, x, dims, keepdim, "prod", rd, acc, "prod")


@register("mean")
def _mean(ctx, x, dim=None, keepdim=False, dtype=None):
    _check(x)
    rd = dt.to_dtype(dtype) if dtype is not None else x.dtype
    if not rd.is_floating_point:
        raise Unsupported("mean of integers")  # eager raises
    dims = _reduce_dims(x, dim)
    compute = compute_dtype(rd)
    total = reduce(ctx, x, dims, keepdim, "sum", compute, compute, "mean")
    count = _reduced_numel(x, dims)

    def divide(t):
        n = Const(count, compute) if count.is_Integer else cast(_index_const(count), compute)
        return Call("div", (t, n), compute)

    return pointwise(ctx, (total,), compute, rd, divide, "mean")


def _index_const(expr):
    from ._ir import IndexValue

    return IndexValue(sympy.sympify(expr))


def _extreme(name, reduce_type):
    @register(name)
    def lower(ctx, x, dim=(), keepdim=False):
        _check(x)
        dims = _reduce_dims(x, dim)
        n = _reduced_numel(x, dims)
        if n == 0 or (n.is_Integer and int(n) == 0):
            raise Unsupported("empty max")  # eager raises the IndexError/RuntimeError
        if n.free_symbols:
            raise Unsupported("max over a symbolic extent")  # might be empty at run time
        return reduce(ctx, x, dims, keepdim, reduce_type, x.dtype, compute_dtype(x.dtype), name)

    return lower


_extreme("amax", "max")
_extreme("amin", "min")
_extreme("max_all", "max")
_extreme("min_all", "min")


def _logical(name):
    @register(name)
    def lower(ctx, x, dim=None, keepdim=False):
        _check(x)
        dims = _reduce_dims(x, dim)
        rd = dt.uint8 if x.dtype is dt.uint8 else dt.bool
        truth = ctx.use(x)
        as_bool = TensorValue(truth.shape, dt.bool, lambda idx: cast(truth.load(idx), dt.bool), origin=name)
        return reduce(ctx, as_bool, dims, keepdim, name, rd, dt.bool, name)

    return lower


_logical("any")
_logical("all")

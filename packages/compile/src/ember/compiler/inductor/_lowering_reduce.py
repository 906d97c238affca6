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


# On a GPU a reduction's outputs are its parallelism: one value (a loss, a norm) ran as one program,
# a few hundred columns (GPT-2's 768 LayerNorm/bias gradients over 8192 rows) as a few dozen. Such
# reductions are split: the reduced elements in equal parts reduced in parallel, then the parts.
SPLIT_MIN = 1 << 16  # elements of a full reduction worth two passes
SPLIT_MIN_KEPT = 1 << 20  # elements of a reduction with several outputs worth two passes
SPLIT_MAX_KEPT = 2048  # outputs past which the outputs alone fill the GPU (a reduction over the last dims)
# A column sum (the reduced dims leading, the kept ones the contiguous rows: a bias gradient over
# [8192, 2304]) is split up to this many partial results: a program reduces a block of 64 columns,
# so 2304 columns were 36-144 programs each walking all 8192 rows, latency-bound at ~1/6 of the
# bandwidth; 32 parts of 256 rows give ~1100 programs whose loads are rows of 64 columns.
SPLIT_MAX_OUTER = 1 << 17


def _split_parts(ctx, x: TensorValue, dims) -> int:
    """How many parts the reduced elements of ``x`` are split into (0: not split). Only for the
    Triton backend (the C++ one threads over outputs and elements itself) and static sizes; a
    power of two that divides the reduced count, so every part has the same length: up to 1024
    parts of 1024+ elements for one output, up to 32K partial results of 256+ elements otherwise
    (128K for a column sum over many columns)."""
    if not (ctx.device.type != "cpu" or config.cpu_backend == "triton"):
        return 0
    n = _reduced_numel(x, dims)
    kept = product([x.shape[d] for d in range(x.ndim) if d not in dims])
    if not n.is_Integer or not kept.is_Integer:
        return 0
    n, kept = int(n), int(kept)
    if kept == 1:
        if n < SPLIT_MIN:
            return 0
        most, least = 1024, 1024
    else:
        if n * kept < SPLIT_MIN_KEPT:
            return 0
        if kept <= SPLIT_MAX_KEPT:
            most, least = min(64, 32768 // kept), 256
        elif tuple(dims) == tuple(range(len(dims))):
            most, least = min(64, SPLIT_MAX_OUTER // kept), 256
        else:
            return 0
    parts = 1
    while parts * 2 <= most and n % (parts * 2) == 0 and n // (parts * 2) >= least:
        parts *= 2
    return parts if parts >= 4 else 0


def reduce(ctx, x: TensorValue, dims, keepdim, reduce_type, result_dtype, acc_dtype, origin):
    if hasattr(ctx, "store_shared"):
        ctx.store_shared(x)
    x = ctx.use(x)
    compute = compute_dtype(acc_dtype)
    if not dims:
        # a 0-dim input: its one element, converted (a loop reducing over no dims is no kernel)
        return pointwise(ctx, (x,), compute, result_dtype, lambda v: v, origin)
    parts = _split_parts(ctx, x, dims)
    if parts:
        return _split_reduce(ctx, x, dims, keepdim, reduce_type, result_dtype, compute, origin, parts)

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


def _split_reduce(ctx, x, dims, keepdim, reduce_type, result_dtype, compute, origin, parts):
    """``reduce`` in two passes: each of ``parts`` equal runs of the reduced elements (row-major
    over the reduced dims) reduced per output into a (parts, *kept) buffer in the accumulator's
    dtype, then those reduced over the parts."""
    kept = [d for d in range(x.ndim) if d not in dims]
    kept_shape = [x.shape[d] for d in kept]
    reduced_shape = [x.shape[d] for d in dims]
    length = int(_reduced_numel(x, dims)) // parts

    def part(idx):  # (part, element of the part, *kept index)
        r = unflatten(idx[0] * length + idx[1], reduced_shape)
        full = [None] * x.ndim
        for d, i in zip(dims, r):
            full[d] = i
        for d, i in zip(kept, idx[2:]):
            full[d] = i
        return cast(x.load(full), compute)

    partial = ctx.reduction((sympy.Integer(parts), sympy.Integer(length), *kept_shape), (1,), False, compute,
                            reduce_type, part, compute, origin)
    out_shape = [sympy.Integer(1) if d in dims else x.shape[d] for d in range(x.ndim)] if keepdim else kept_shape

    def whole(idx):  # (*output index, part)
        kidx = [idx[d] for d in kept] if keepdim else idx[:-1]
        return partial.load([idx[-1], *kidx])

    return ctx.reduction((*out_shape, sympy.Integer(parts)), (len(out_shape),), False, result_dtype, reduce_type,
                         whole, compute, origin)

"""Generated Triton reductions over a (outer, N, inner) view of a contiguous tensor.

A reduction over any set of dims is brought to that form: the input is permuted so the
reduced dims sit together (copied to contiguous memory only when the permuted view is not
already dense), then one kernel reduces the middle axis. ``inner == 1`` (reducing the last
dims) uses a row kernel; otherwise each program owns a block of ``inner`` columns and walks
the rows, so reductions over leading dims (bias gradients) read memory once, coalesced.
Large reductions into few outputs (few rows, or few column blocks) are split: partial results
per chunk, then a second pass.
"""

from __future__ import annotations

import functools

from ember._src import dtypes as dt
from ember._src.shapes import contiguous_strides
from ember._src.tensor import make_tensor, new_empty_tensor

from . import _compile
from ._elementwise import HEADER, TL, TRITON
from ._streams import current_handle

# kind -> (identity, combine(acc, v) elementwise, final reduce over `axis` of acc)
_KINDS = {
    "sum": ("0", "{a} + {v}", "tl.sum({a}, axis={ax})"),
    "nansum": ("0", "{a} + tl.where({v} != {v}, 0, {v})", "tl.sum({a}, axis={ax})"),
    "prod": ("1", "{a} * {v}", "_prod({a}, {ax})"),
    "max": ("-float('inf')", "tl.maximum({a}, {v}, propagate_nan=tl.PropagateNan.ALL)", "_nanmax({a}, {ax})"),
    "min": ("float('inf')", "tl.minimum({a}, {v}, propagate_nan=tl.PropagateNan.ALL)", "_nanmin({a}, {ax})"),
    "imax": ("-9223372036854775807 - 1", "tl.maximum({a}, {v})", "tl.max({a}, axis={ax})"),
    "imin": ("9223372036854775807", "tl.minimum({a}, {v})", "tl.min({a}, axis={ax})"),
}

_HELPERS = '''
@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def _prod(a, ax: tl.constexpr):
    return tl.reduce(a, ax, _mul)


@triton.jit
def _nanmax(a, ax: tl.constexpr):
    nan = tl.sum((a != a).to(tl.int32), axis=ax) > 0
    return tl.where(nan, float('nan'), tl.max(a, axis=ax))


@triton.jit
def _nanmin(a, ax: tl.constexpr):
    nan = tl.sum((a != a).to(tl.int32), axis=ax) > 0
    return tl.where(nan, float('nan'), tl.min(a, axis=ax))


'''


@functools.cache  # the same string object per kernel: the launcher lookup hashes it once
def _row_source(kind: str, acc, out_dtype) -> str:
    ident, combine, final = _KINDS[kind]
    ct = TL[acc]
    return HEADER + _HELPERS + f'''
@triton.jit
def k(x, out, N, chunk, nchunks, scale, BN: tl.constexpr, SCALED: tl.constexpr, UNROLL: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // nchunks
    c = pid % nchunks
    start = c * chunk
    stop = tl.minimum(start + chunk, N)
    base = x + row * N
    acc = tl.full([BN], {ident}, {ct})
    for n0 in range(start, stop, BN * UNROLL):
        # UNROLL independent loads per step keep more bytes in flight
        for u in tl.static_range(UNROLL):
            ns = n0 + u * BN + tl.arange(0, BN)
            v = tl.load(base + ns, mask=ns < stop, other={ident}).to({ct})
            acc = {combine.format(a="acc", v="v")}
    r = {final.format(a="acc", ax=0)}
    if SCALED:
        r = r * scale
    tl.store(out + pid, r.to({TL[out_dtype]}))
'''


@functools.cache
def _stride_source(kind: str, acc) -> str:
    """Few long rows: ``nprog`` programs per row stride over it in whole tiles of BN * UNROLL elements
    (unmasked loads), program 0 of a row also takes the ragged tail; one partial per program."""
    ident, combine, final = _KINDS[kind]
    ct = TL[acc]
    return HEADER + _HELPERS + f'''
@triton.jit
def k(x, out, N, nprog, BN: tl.constexpr, UNROLL: tl.constexpr, EVICT: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // nprog
    p = pid % nprog
    base = x + row * N
    acc = tl.full([BN], {ident}, {ct})
    nfull = N // (BN * UNROLL)
    for t in range(p, nfull, nprog):
        for u in tl.static_range(UNROLL):
            ns = t * (BN * UNROLL) + u * BN + tl.arange(0, BN)
            if EVICT:  # read once: keep it from displacing other data in L2
                v = tl.load(base + ns, eviction_policy="evict_first").to({ct})
            else:
                v = tl.load(base + ns).to({ct})
            acc = {combine.format(a="acc", v="v")}
    if p == 0:
        for n0 in range(nfull * (BN * UNROLL), N, BN):
            ns = n0 + tl.arange(0, BN)
            v = tl.load(base + ns, mask=ns < N, other={ident}).to({ct})
            acc = {combine.format(a="acc", v="v")}
    tl.store(out + pid, {final.format(a="acc", ax=0)})
'''


@functools.cache
def _col_source(kind: str, acc, out_dtype) -> str:
    ident, combine, final = _KINDS[kind]
    ct = TL[acc]
    return HEADER + _HELPERS + f'''
@triton.jit
def k(x, out, N, inner, scale, BN: tl.constexpr, BK: tl.constexpr, SCALED: tl.constexpr):
    o = tl.program_id(0).to(tl.int64)
    ks = tl.program_id(1) * BK + tl.arange(0, BK)
    km = ks < inner
    base = x + o * N * inner
    acc = tl.full([BN, BK], {ident}, {ct})
    for n0 in range(0, N, BN):
        ns = n0 + tl.arange(0, BN)
        v = tl.load(base + ns[:, None] * inner + ks[None, :], mask=(ns[:, None] < N) & km[None, :],
                    other={ident}).to({ct})
        acc = {combine.format(a="acc", v="v")}
    r = {final.format(a="acc", ax=0)}
    if SCALED:
        r = r * scale
    tl.store(out + o * inner + ks, r.to({TL[out_dtype]}), mask=km)
'''


def as_dense_groups(x, dims: tuple):
    """(tensor, outer, N, inner) with ``x``'s reduced ``dims`` as the contiguous middle axis."""
    from ._ops_copy import device_copy

    shape = x._shape
    nd = len(shape)
    dims = tuple(sorted(dims))
    n = 1
    for d in dims:
        n *= shape[d]
    contiguous_block = dims == tuple(range(dims[0], dims[0] + len(dims))) if dims else True
    if x.is_contiguous() and contiguous_block:
        outer = 1
        for d in range(dims[0] if dims else nd):
            outer *= shape[d]
        inner = 1
        for d in range((dims[-1] + 1) if dims else nd, nd):
            inner *= shape[d]
        return x, outer, n, inner
    kept = [d for d in range(nd) if d not in dims]
    order = kept + list(dims)
    pshape = tuple(shape[d] for d in order)
    view = make_tensor(x._storage, pshape, tuple(x._stride[d] for d in order), x._offset, x.dtype, x._device)
    dense = new_empty_tensor(pshape, x.dtype, x._device)
    device_copy(dense, view)
    return dense, dense.numel() // max(n, 1), n, 1


def reduce_into(kind: str, x, dims: tuple, out, acc, scale: float = 1.0) -> None:
    """Reduces ``x`` over ``dims`` into the contiguous ``out`` (kept dims in order)."""
    x, outer, n, inner = as_dense_groups(x, dims)
    index = x._device.index or 0
    stream = current_handle(index)
    if outer * inner == 0:
        return
    if inner == 1:
        _rows(kind, x, outer, n, out, acc, scale, index, stream)
        return
    bk = 64 if inner >= 64 else 16
    split = col_split(outer, n, inner, bk, _sms(index))
    if split > 1:
        # Few column blocks over many rows (a bias gradient: 8192 rows, 12 blocks of 64 columns): each
        # block's rows are cut into `split` chunks reduced in parallel into partials (the same kernel
        # over outer * split groups of n // split rows), then the partials are reduced.
        partial = new_empty_tensor((outer * split, inner), acc, x._device)
        _col(kind, x, outer * split, n // split, inner, partial, acc, 1.0, bk, index, stream)
        _col(_PARTIALS.get(kind, kind), partial, outer, split, inner, out, acc, scale, bk, index, stream)
        return
    _col(kind, x, outer, n, inner, out, acc, scale, bk, index, stream)


# How the partials of a split reduction combine (nansum's partials hold no NaN it should skip).
_PARTIALS = {"nansum": "sum"}
# Column reductions are split until about this many programs per multiprocessor run.
COL_PROGRAMS_PER_SM = 2


def col_split(outer: int, n: int, inner: int, bk: int, sms: int) -> int:
    """Into how many chunks of rows (a power of two dividing ``n``, each of at least 256 rows) a
    column reduction of ``outer`` groups of ``n`` rows by ``inner`` columns is split."""
    programs = outer * ((inner + bk - 1) // bk)
    split = 1
    while (programs * split * 2 <= COL_PROGRAMS_PER_SM * sms and n % (split * 2) == 0
           and n // (split * 2) >= 256):
        split *= 2
    return split


def _sms(index: int) -> int:
    sms = _SMS.get(index)
    if sms is None:
        from . import _driver

        sms = _SMS[index] = _driver.properties(index).multi_processor_count
    return sms


_COL_LAUNCHERS: dict = {}  # (kind, dtypes, BN, BK, scaled, device) -> launcher: a bias gradient's sum per step


def _col(kind, x, outer, n, inner, out, acc, scale, bk, index, stream) -> None:
    bn = 32 if n >= 32 else 8
    key = (kind, x.dtype, out.dtype, acc, bn, bk, scale != 1.0, index)
    launcher = _COL_LAUNCHERS.get(key)
    if launcher is None:
        src = _col_source(kind, acc, out.dtype)
        sig = {"x": "*" + TRITON[x.dtype], "out": "*" + TRITON[out.dtype], "N": "i64", "inner": "i64",
               "scale": "fp64", "BN": "constexpr", "BK": "constexpr", "SCALED": "constexpr"}
        launcher = _COL_LAUNCHERS[key] = _compile.kernel(src, "k", sig, {"BN": bn, "BK": bk, "SCALED": scale != 1.0},
                                                         (), 4, 2, index)
    launcher((outer, (inner + bk - 1) // bk, 1), stream, x._storage._ptr + x._offset * x.dtype.itemsize,
             out._storage._ptr + out._offset * out.dtype.itemsize, n, inner, float(scale))


# Row reductions: (BN, num_warps) for rows of at least BN elements, and the chunk length a long row is
# split into when there are few rows (module state, so benchmarks can sweep it).
ROW_CONFIG = {"bn": 4096, "warps": 8, "chunk": 65536, "stages": 2, "unroll": 1}  # swept on an H200 (--tune)
# Few long rows by a grid-stride kernel instead of fixed chunks ("ppsm" programs per multiprocessor in
# all; None keeps the chunks). bench_cuda.py --tune on an H200, sum of 2^28 f32: this configuration
# 3.81 TB/s (PyTorch 3.92), the chunked default 3.34-3.58, the best chunked one 3.79.
STRIDE_CONFIG = {"ppsm": 4, "bn": 4096, "warps": 8, "stages": 1, "unroll": 2, "evict": False}
_SMS: dict = {}


def _strided_rows(kind, x, rows, n, out, acc, scale, index, stream) -> None:
    cfg = STRIDE_CONFIG
    sms = _sms(index)
    nprog = max(1, (cfg["ppsm"] * sms) // rows)
    partial = new_empty_tensor((rows, nprog), acc, x._device)
    sig = {"x": "*" + TRITON[x.dtype], "out": "*" + TRITON[acc], "N": "i64", "nprog": "i64", "BN": "constexpr",
           "UNROLL": "constexpr", "EVICT": "constexpr"}
    aligned = ("x", "N") if x.data_ptr() % 16 == 0 and n % 16 == 0 else ()
    launcher = _compile.kernel(_stride_source(kind, acc), "k", sig, {"BN": cfg["bn"], "UNROLL": cfg["unroll"],
                               "EVICT": bool(cfg["evict"])}, aligned, cfg["warps"], cfg["stages"], index)
    launcher((rows * nprog, 1, 1), stream, x.data_ptr(), partial.data_ptr(), n, nprog)
    _rows(kind, partial, rows, nprog, out, acc, scale, index, stream)


def _rows(kind, x, rows, n, out, acc, scale, index, stream):
    cfg = ROW_CONFIG
    bn = cfg["bn"] if n >= cfg["bn"] else max(16, 1 << (max(n, 1) - 1).bit_length())
    warps = cfg["warps"] if bn >= 1024 else 1
    # Few long rows: split each row into chunks reduced in parallel, then reduce the partials.
    nchunks = 1
    if rows < 512 and n >= 2 * cfg["chunk"] and STRIDE_CONFIG["ppsm"]:
        _strided_rows(kind, x, rows, n, out, acc, scale, index, stream)
        return
    if rows < 512 and n >= 2 * cfg["chunk"]:
        nchunks = (n + cfg["chunk"] - 1) // cfg["chunk"]  # the partials are reduced the same way
    chunk = (n + nchunks - 1) // nchunks
    sig = {"x": "*" + TRITON[x.dtype], "out": "*" + TRITON[out.dtype if nchunks == 1 else acc], "N": "i64",
           "chunk": "i64", "nchunks": "i64", "scale": "fp64", "BN": "constexpr", "SCALED": "constexpr",
           "UNROLL": "constexpr"}
    aligned = ("x", "N") if x.data_ptr() % 16 == 0 and n % 16 == 0 else ()
    if aligned and chunk % 16 == 0:
        aligned += ("chunk",)
    if nchunks == 1:
        src = _row_source(kind, acc, out.dtype)
        launcher = _compile.kernel(src, "k", sig, {"BN": bn, "SCALED": scale != 1.0, "UNROLL": cfg["unroll"]}, aligned,
                                   warps, cfg["stages"],
                                   index)
        launcher((rows, 1, 1), stream, x.data_ptr(), out.data_ptr(), n, chunk, 1, float(scale))
        return
    partial = new_empty_tensor((rows, nchunks), acc, x._device)
    src = _row_source(kind, acc, acc)
    launcher = _compile.kernel(src, "k", sig, {"BN": bn, "SCALED": False, "UNROLL": cfg["unroll"]}, aligned, warps,
                               cfg["stages"], index)
    launcher((rows * nchunks, 1, 1), stream, x.data_ptr(), partial.data_ptr(), n, chunk, nchunks, 1.0)
    _rows(kind, partial, rows, nchunks, out, acc, scale, index, stream)


def accumulator(kind: str, dtype):
    if kind in ("max", "min"):
        if dtype.is_floating_point:
            return dt.float32 if dtype in (dt.float16, dt.bfloat16) else dtype
        return dt.int64
    if dtype is dt.float64:
        return dt.float64
    return dt.float32 if dtype.is_floating_point else dt.int64


def value_kind(kind: str, dtype) -> str:
    if kind in ("max", "min") and not dtype.is_floating_point:
        return "i" + kind
    return kind


def contiguous_out(shape: tuple, dtype, device):
    out = new_empty_tensor(shape, dtype, device)
    return out, contiguous_strides(shape)

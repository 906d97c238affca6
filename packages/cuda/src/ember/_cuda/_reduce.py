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
from ember._src.tensor import make_tensor

from . import _compile
from ._elementwise import HEADER, TL, TRITON
from ._storage import new_contiguous
from ._storage import new_empty as new_empty_tensor  # one frame per CUDA result
from ._streams import _TLS as _STREAMS_TLS
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


# The pairs forms' ending (``reduce_pairs``): the even and odd lanes of the accumulator summed apart (a tile
# starts at an even offset, so a lane keeps one part), two results stored per program.
_PAIR_SUM = "tl.sum(tl.reshape({a}, [BN // 2, 2]), axis=0)"


@functools.cache  # the same string object per kernel: the launcher lookup hashes it once
def _row_source(kind: str, acc, out_dtype, pairs: bool = False) -> str:
    ident, combine, final = _KINDS[kind]
    ct = TL[acc]
    final, at = (_PAIR_SUM, "pid * 2 + tl.arange(0, 2)") if pairs else (final, "pid")
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
    tl.store(out + {at}, r.to({TL[out_dtype]}))
'''


@functools.cache
def _stride_source(kind: str, acc, pairs: bool = False) -> str:
    """Few long rows: ``nprog`` programs per row stride over it in whole tiles of BN * UNROLL elements
    (unmasked loads), program 0 of a row also takes the ragged tail; one partial per program (two: pairs)."""
    ident, combine, final = _KINDS[kind]
    ct = TL[acc]
    final, at = (_PAIR_SUM, "pid * 2 + tl.arange(0, 2)") if pairs else (final, "pid")
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
    tl.store(out + {at}, {final.format(a="acc", ax=0)})
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
    from ._ops_copy import device_copy  # (the common case above needs no copy)

    device_copy(dense, view)
    return dense, dense.numel() // max(n, 1), n, 1


def reduce_new(kind: str, x, dims: tuple, shape: tuple, dtype, acc, scale: float = 1.0):
    """``x`` reduced over ``dims`` into a fresh contiguous tensor of ``shape`` and ``dtype`` (kept dims in
    order). A long reduction into few outputs launches its first pass before anything else is allocated:
    the device waits for the host until that launch, and a call is timed from its start."""
    x, outer, n, inner = as_dense_groups(x, dims)
    if inner == 1 and outer < 512 and n >= 2 * ROW_CONFIG["chunk"] and STRIDE_CONFIG["ppsm"]:
        index = x._device.index or 0
        stream = current_handle(index)
        partial = _strided_pass(kind, x, outer, n, acc, index, stream)
        out = new_contiguous(shape, contiguous_strides(shape), outer, dtype, x._device)
        _rows(kind, partial, outer, partial._shape[1], out, acc, scale, index, stream)
        return out
    out = new_empty_tensor(shape, dtype, x._device)
    _reduce_dense(kind, x, outer, n, inner, out, acc, scale)
    return out


def reduce_flat(kind: str, x, n: int, dtype, acc, scale: float = 1.0):
    """All ``n`` elements of the contiguous ``x`` reduced into a fresh 0-d tensor (``reduce_new``'s case
    of every dim, with nothing to check or permute)."""
    index = x._device.index or 0
    stream = current_handle(index)
    if n >= 2 * ROW_CONFIG["chunk"] and STRIDE_CONFIG["ppsm"]:
        partial = _strided_pass(kind, x, 1, n, acc, index, stream)
        out = new_empty_tensor((), dtype, x._device)
        _rows(kind, partial, 1, partial._shape[1], out, acc, scale, index, stream)
        return out
    out = new_empty_tensor((), dtype, x._device)
    _rows(kind, x, 1, n, out, acc, scale, index, stream)
    return out


def reduce_into(kind: str, x, dims: tuple, out, acc, scale: float = 1.0) -> None:
    """Reduces ``x`` over ``dims`` into the contiguous ``out`` (kept dims in order)."""
    x, outer, n, inner = as_dense_groups(x, dims)
    _reduce_dense(kind, x, outer, n, inner, out, acc, scale)


def _reduce_dense(kind: str, x, outer: int, n: int, inner: int, out, acc, scale: float) -> None:
    index = x._device.index or 0
    streams = _STREAMS_TLS.streams  # current_handle(index), inline
    s = streams.get(index) if streams else None
    stream = 0 if s is None else s.cuda_stream
    if outer * inner == 0:
        return
    if inner == 1:
        _rows(kind, x, outer, n, out, acc, scale, index, stream)
        return
    x_dtype = x.dtype
    key = (kind, x_dtype, out.dtype, acc, scale != 1.0, outer, n, inner, index)
    plan = _COL_PLANS.get(key)
    if plan is None:
        plan = _COL_PLANS[key] = _col_plan(kind, x_dtype, out.dtype, acc, scale != 1.0, outer, n, inner, index)
    split, first, first_grid, second, second_grid = plan
    src = x._storage._ptr + x._offset * x_dtype.itemsize
    dst = out._storage._ptr + out._offset * out.dtype.itemsize
    if split > 1:
        # Few column blocks over many rows (a bias gradient: 8192 rows, 12 blocks of 64 columns): each
        # block's rows are cut into `split` chunks reduced in parallel into partials (the same kernel
        # over outer * split groups of n // split rows), then the partials are reduced.
        partial = new_empty_tensor((outer * split, inner), acc, x._device)
        mid = partial._storage._ptr  # (fresh: offset 0)
        first(first_grid, stream, src, mid, n // split, inner, 1.0)
        second(second_grid, stream, mid, dst, split, inner, float(scale))
        return
    first(first_grid, stream, src, dst, n, inner, float(scale))


# The column reductions' launch plans, by (kind, dtypes, accumulator, scaled, outer, n, inner, device): how
# many chunks the rows are split into and the launcher and grid of each pass, as _col_plan finds them from
# COL_CONFIG (~100 column reductions a GPT-2 step, the bias and LayerNorm gradients, all of a few geometries:
# the plan saves each the block/split search and two launcher look-ups). Emptied when COL_CONFIG changes.
_COL_PLANS: dict = {}


def _col_plan(kind, x_dtype, out_dtype, acc, scaled: bool, outer: int, n: int, inner: int, index: int) -> tuple:
    """(split, first launcher, its grid, second launcher or None, its grid) of a column reduction."""
    bk = next(b for b in (COL_CONFIG["bk"], 64, 16) if inner >= b or b == 16)
    split = col_split(outer, n, inner, bk, _sms(index))
    if split > 1:
        return (split, *_col_launch(kind, x_dtype, acc, acc, outer * split, n // split, inner, False, bk, index),
                *_col_launch(_PARTIALS.get(kind, kind), acc, out_dtype, acc, outer, split, inner, scaled, bk, index))
    return (1, *_col_launch(kind, x_dtype, out_dtype, acc, outer, n, inner, scaled, bk, index), None, None)


# How the partials of a split reduction combine (nansum's partials hold no NaN it should skip).
_PARTIALS = {"nansum": "sum"}
# Column reductions: tiles of BN rows by BK columns, and split into chunks of rows until about "ppsm"
# programs per multiprocessor run, each chunk at least "min_rows" rows (module state, so benchmarks can
# sweep it: bench_cuda_gpt2_kernels.py --tune). Swept on an H200 over GPT-2's bias gradients (8192 rows
# by 768/2304/3072 columns, bf16 and fp32): this one 1.26-1.89x PyTorch's time, where the former
# (bn 32, bk 64, 4 warps, 2 stages, 2 per SM, 256 rows) was 0.54-1.47x.
class _PlannedConfig(dict):
    """COL_CONFIG: a dict whose every change empties the launch plans made from it (_COL_PLANS)."""

    def _changed(self):
        _COL_PLANS.clear()

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key):
        super().__delitem__(key)
        self._changed()

    def __ior__(self, other):
        super().__ior__(other)
        self._changed()
        return self

    def update(self, *args, **kwargs):
        super().update(*args, **kwargs)
        self._changed()

    def pop(self, *args):
        value = super().pop(*args)
        self._changed()
        return value

    def popitem(self):
        item = super().popitem()
        self._changed()
        return item

    def setdefault(self, key, default=None):
        value = super().setdefault(key, default)
        self._changed()
        return value

    def clear(self):
        super().clear()
        self._changed()


COL_CONFIG = _PlannedConfig(bn=32, bk=128, warps=4, stages=3, ppsm=8, min_rows=64)


def col_split(outer: int, n: int, inner: int, bk: int, sms: int) -> int:
    """Into how many chunks of rows (a power of two dividing ``n``, each of at least "min_rows" rows) a
    column reduction of ``outer`` groups of ``n`` rows by ``inner`` columns is split."""
    programs = outer * ((inner + bk - 1) // bk)
    split = 1
    while (programs * split * 2 <= COL_CONFIG["ppsm"] * sms and n % (split * 2) == 0
           and n // (split * 2) >= COL_CONFIG["min_rows"]):
        split *= 2
    return split


def _sms(index: int) -> int:
    sms = _SMS.get(index)
    if sms is None:
        from . import _driver

        sms = _SMS[index] = _driver.properties(index).multi_processor_count
    return sms


def _col_launch(kind, x_dtype, out_dtype, acc, outer, n, inner, scaled: bool, bk, index) -> tuple:
    """(launcher, grid) of a column pass: ``outer`` groups of ``n`` rows by ``inner`` columns."""
    bn = COL_CONFIG["bn"] if n >= COL_CONFIG["bn"] else 8
    launcher = _launcher("col", kind, x_dtype, out_dtype, acc, (("BN", bn), ("BK", bk), ("SCALED", scaled)),
                         (), COL_CONFIG["warps"], COL_CONFIG["stages"], index)
    return launcher, (outer, (inner + bk - 1) // bk, 1)


# Row reductions: (BN, num_warps) for rows of at least BN elements, and the chunk length a long row is
# split into when there are few rows (module state, so benchmarks can sweep it).
ROW_CONFIG = {"bn": 4096, "warps": 8, "chunk": 65536, "stages": 2, "unroll": 1}  # swept on an H200 (--tune)
# Few long rows by a grid-stride kernel instead of fixed chunks ("ppsm" programs per multiprocessor in
# all; None keeps the chunks). bench_cuda.py --tune on an H200, sum of 2^28 f32, once the host's latency
# to the first launch was cut (session 5): every swept configuration 3.87-4.26 TB/s, this one 3.98-4.00,
# the default call 4.24 against PyTorch's 4.07 (earlier sweeps measured mostly the host's latency).
STRIDE_CONFIG = {"ppsm": 4, "bn": 4096, "warps": 8, "stages": 1, "unroll": 2, "evict": False}
_SMS: dict = {}
# Launchers by a short key (form, kind, dtypes, constexprs, alignment, warps, stages, device): a long
# reduction's time on the device is counted from the call, so the host work before its first launch
# (formerly ~30 us: generating the source and hashing it per call) is kept to a dictionary look-up.
_LAUNCHERS: dict = {}
_SIGNATURES = {
    "row": (("N", "i64"), ("chunk", "i64"), ("nchunks", "i64"), ("scale", "fp64")),
    "stride": (("N", "i64"), ("nprog", "i64")),
    "col": (("N", "i64"), ("inner", "i64"), ("scale", "fp64")),
}


def _ptr(t) -> int:
    return t._storage._ptr + t._offset * t.dtype.itemsize


def _launcher(form, kind, x_dtype, out_dtype, acc, consts: tuple, aligned: tuple, warps: int, stages: int, index):
    key = (form, kind, x_dtype, out_dtype, acc, consts, aligned, warps, stages, index)
    launcher = _LAUNCHERS.get(key)
    if launcher is None:
        if form in ("row", "row pairs"):
            src = _row_source(kind, acc, out_dtype, form == "row pairs")
        elif form in ("stride", "stride pairs"):
            src = _stride_source(kind, acc, form == "stride pairs")
        else:
            src = _col_source(kind, acc, out_dtype)
        sig = {"x": "*" + TRITON[x_dtype], "out": "*" + TRITON[out_dtype], **dict(_SIGNATURES[form.split()[0]]),
               **{name: "constexpr" for name, _ in consts}}
        launcher = _LAUNCHERS[key] = _compile.kernel(src, "k", sig, dict(consts), aligned, warps, stages, index)
    return launcher


def _strided_pass(kind, x, rows, n, acc, index, stream, pairs=False):
    """The first pass of few long rows: (rows, nprog) partials ((rows, 2 * nprog): pairs)."""
    cfg = STRIDE_CONFIG
    sms = _sms(index)
    nprog = max(1, (cfg["ppsm"] * sms) // rows)
    width = 2 * nprog if pairs else nprog
    partial = new_contiguous((rows, width), (width, 1), rows * width, acc, x._device)
    xp = _ptr(x)
    aligned = ("x", "N") if xp % 16 == 0 and n % 16 == 0 else ()
    form = "stride pairs" if pairs else "stride"
    launcher = _launcher(form, kind, x.dtype, acc, acc, (("BN", cfg["bn"]), ("UNROLL", cfg["unroll"]),
                         ("EVICT", bool(cfg["evict"]))), aligned, cfg["warps"], cfg["stages"], index)
    launcher((rows * nprog, 1, 1), stream, xp, _ptr(partial), n, nprog)
    return partial


def _rows(kind, x, rows, n, out, acc, scale, index, stream, pairs=False):
    cfg = ROW_CONFIG
    # Few long rows: split each row into chunks reduced in parallel, then reduce the partials.
    if rows < 512 and n >= 2 * cfg["chunk"]:
        if STRIDE_CONFIG["ppsm"]:
            partial = _strided_pass(kind, x, rows, n, acc, index, stream, pairs)
            _rows(kind, partial, rows, partial._shape[1], out, acc, scale, index, stream, pairs)
            return
        nchunks = (n + cfg["chunk"] - 1) // cfg["chunk"]  # the partials are reduced the same way
    else:
        nchunks = 1
    bn = cfg["bn"] if n >= cfg["bn"] else max(16, 1 << (max(n, 1) - 1).bit_length())
    warps = cfg["warps"] if bn >= 1024 else 1
    chunk = (n + nchunks - 1) // nchunks
    chunk += chunk & int(pairs)  # (pairs: chunks start at even offsets)
    xp = _ptr(x)
    aligned = ("x", "N") if xp % 16 == 0 and n % 16 == 0 else ()
    if aligned and chunk % 16 == 0:
        aligned += ("chunk",)
    form, width = ("row pairs", 2) if pairs else ("row", 1)
    if nchunks == 1:
        launcher = _launcher(form, kind, x.dtype, out.dtype, acc, (("BN", bn), ("SCALED", scale != 1.0),
                             ("UNROLL", cfg["unroll"])), aligned, warps, cfg["stages"], index)
        launcher((rows, 1, 1), stream, xp, _ptr(out), n, chunk, 1, float(scale))
        return
    partial = new_empty_tensor((rows, nchunks * width), acc, x._device)
    launcher = _launcher(form, kind, x.dtype, acc, acc, (("BN", bn), ("SCALED", False), ("UNROLL", cfg["unroll"])),
                         aligned, warps, cfg["stages"], index)
    launcher((rows * nchunks, 1, 1), stream, xp, _ptr(partial), n, chunk, nchunks, 1.0)
    _rows(kind, partial, rows, nchunks * width, out, acc, scale, index, stream, pairs)


def reduce_pairs(x, outer: int, n: int, out, acc, scale: float = 1.0) -> None:
    """Sums of interleaved pairs (complex numbers' (real, imag) parts): the contiguous (outer, n, 2) ``x`` summed
    over n into the contiguous (outer, 2) ``out``, each group one row of 2n values whose even and odd lanes the
    row kernels add apart: read at full width, where the column kernel's tiles of 2 columns left most lanes idle."""
    index = x._device.index or 0
    _rows("sum", x, outer, 2 * n, out, acc, scale, index, current_handle(index), True)


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

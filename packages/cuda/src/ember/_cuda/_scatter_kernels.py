"""The Triton sources and argument plans of the scattering kernels (importable without a GPU, so
Triton's interpreter can run them on the CPU: tests/scatter_interp_check.py).

Two kernels write ``dst[p with p[dim] := index[p]] (op)= src[p]`` over index's shape:

- ``rows_source(nc)``: one thread per position of index with ``dim`` removed (a "column"),
  walking its ``index.shape[dim]`` entries in order, as the CPU kernel does. Two index entries
  can only address the same element of ``dst`` when they share a column, so every reduction
  (assign, sum, prod, amax, amin) is exact and ordered like the CPU's, with no atomics.
- ``atomic_source(nd)``: one thread per index element and an atomic add, for sums whose columns
  are too few to fill the GPU (``index_add`` of many rows into a narrow table, say).

``put_source``: ``dst[off[i]] (=|+=) values[i]`` over precomputed element offsets (index_put).
``masked_scatter_source``: ``dst[i] = src[pos[i]]`` where ``mask[i]``, ``pos`` the running count.
Out-of-range indices set the device error flag (see _ops_index) and are never written.
"""

from __future__ import annotations

from ._elementwise import HEADER

ASSIGN, SUM, PROD, MEAN, AMAX, AMIN = range(6)

_REDUCE_BODY = '''
        if MODE == 0:
            tl.store(p, v, mask=ok)
        else:
            cur = tl.load(p, mask=ok)
            if MODE == 1:
                r = cur + v
            elif MODE == 2:
                r = cur * v
            elif MODE == 4:
                r = tl.where((v != v) | (cur < v), v, cur)
            else:
                r = tl.where((v != v) | (v < cur), v, cur)
            tl.store(p, r, mask=ok)
'''


def _decompose(nd: int, names: str) -> list:
    """Lines turning the linear position ``rem`` into per-operand offsets over ``nd`` dims (the last
    dim varies fastest); ``names`` are the offset variables, one stride argument letter each."""
    lines = ["    rem = pos"] + [f"    {v} = pos * 0" for v in names]
    for k in reversed(range(nd)):
        lines += [f"    c = rem % s{k}", f"    rem = rem // s{k}"]
        lines += [f"    {v} += c * {v[0]}{k}" for v in names]
    return lines


def rows_source(nc: int) -> str:
    """The column kernel over ``nc`` column dims: args (dst, idx, src, flag, ncols, L, size, idx
    stride along dim, src stride along dim, dst stride along dim, error code, identity, then per
    column dim: size, idx stride, src stride, dst stride)."""
    dims = "".join(f", s{k}, i{k}, r{k}, d{k}" for k in range(nc))
    lines = ["@triton.jit",
             f"def k(dst, idx, src, flag, ncols, L, size, ist, sst, dstd, code, ident{dims}, BLOCK: tl.constexpr, "
             "MODE: tl.constexpr, RESET: tl.constexpr):",
             "    pos = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
             "    m = pos < ncols"]
    lines += _decompose(nc, ("io", "ro", "do"))
    lines += ["    if RESET:",  # include_self=False: every addressed element starts at the identity
              "        for j in range(0, L):",
              "            t = tl.load(idx + io + j * ist, mask=m, other=0).to(tl.int64)",
              "            ok = m & (t >= 0) & (t < size)",
              "            tl.store(dst + do + t * dstd, tl.full([BLOCK], ident, dst.dtype.element_ty), mask=ok)",
              "    for j in range(0, L):",
              "        t = tl.load(idx + io + j * ist, mask=m, other=0).to(tl.int64)",
              "        ok = (t >= 0) & (t < size)",
              "        tl.store(flag + pos * 0, code, mask=m & (~ok))",
              "        ok = m & ok",
              "        v = tl.load(src + ro + j * sst, mask=ok, other=0)",
              "        p = dst + do + t * dstd"]
    return HEADER + "\n".join(lines) + _REDUCE_BODY


def atomic_source(nd: int) -> str:
    """The atomic-add kernel over ``nd`` dims of index: args (dst, idx, src, flag, n, size, dst stride
    along dim, error code, then per dim: size, idx stride, src stride, dst stride (0 along dim))."""
    dims = "".join(f", s{k}, i{k}, r{k}, d{k}" for k in range(nd))
    lines = ["@triton.jit",
             f"def k(dst, idx, src, flag, n, size, dstd, code{dims}, BLOCK: tl.constexpr):",
             "    pos = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
             "    m = pos < n"]
    lines += _decompose(nd, ("io", "ro", "do"))
    lines += ["    t = tl.load(idx + io, mask=m, other=0).to(tl.int64)",
              "    ok = (t >= 0) & (t < size)",
              "    tl.store(flag + pos * 0, code, mask=m & (~ok))",
              "    ok = m & ok",
              "    v = tl.load(src + ro, mask=ok, other=0)",
              "    tl.atomic_add(dst + do + t * dstd, v, mask=ok, sem='relaxed')"]
    return HEADER + "\n".join(lines) + "\n"


def column_args(shape, d, istr, sstr, dstr):
    """(ncols, L, per-column-dim args flattened, (idx, src, dst) strides along d) of the column kernel;
    shapes/strides are index's shape and the three operands' element strides."""
    cols = []
    ncols = 1
    for k, size in enumerate(shape):
        if k != d and size != 1:
            cols += [size, istr[k], sstr[k], dstr[k]]
            ncols *= size
    return ncols, shape[d], cols, (istr[d], sstr[d], dstr[d])


def atomic_args(shape, d, istr, sstr, dstr):
    """Per-dim args of the atomic kernel (dst's stride along d zeroed: the index supplies it)."""
    dims = []
    for k, size in enumerate(shape):
        if size != 1:
            dims += [size, istr[k], sstr[k], 0 if k == d else dstr[k]]
    return dims


PUT = HEADER + '''
@triton.jit
def k(dst, off, vals, n, BLOCK: tl.constexpr, ACC: tl.constexpr):
    pos = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = pos < n
    o = tl.load(off + pos, mask=m, other=0)
    v = tl.load(vals + pos, mask=m, other=0)
    if ACC:
        tl.atomic_add(dst + o, v, mask=m, sem='relaxed')
    else:
        tl.store(dst + o, v, mask=m)
'''

MASKED_SCATTER = HEADER + '''
@triton.jit
def k(dst, mask, csum, src, flag, n, nsrc, code, BLOCK: tl.constexpr):
    pos = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = pos < n
    sel = m & (tl.load(mask + pos, mask=m, other=0) != 0)
    at = tl.load(csum + pos, mask=sel, other=1) - 1
    ok = at < nsrc
    tl.store(flag + pos * 0, code, mask=sel & (~ok))
    v = tl.load(src + at, mask=sel & ok)
    tl.store(dst + pos, v, mask=sel & ok)
'''

# nonzero: coordinates of each selected element at row csum[i] - 1 of out (count, nd), row-major.
NONZERO_HEAD = '''
@triton.jit
def k(x, csum, out, n, ND: tl.constexpr{dims}, BLOCK: tl.constexpr):
    pos = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = pos < n
    sel = m & (tl.load(x + pos, mask=m, other=0) != 0)
    row = tl.load(csum + pos, mask=sel, other=1) - 1
    rem = pos
'''


def nonzero_source(nd: int) -> str:
    dims = "".join(f", s{k}" for k in range(nd))
    lines = [NONZERO_HEAD.replace("{dims}", dims)]
    for k in reversed(range(nd)):
        lines.append(f"    tl.store(out + row * ND + {k}, rem % s{k}, mask=sel)\n    rem = rem // s{k}\n")
    return HEADER + "".join(lines)

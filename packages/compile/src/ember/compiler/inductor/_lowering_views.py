"""Lowerings of view ops: index arithmetic on the loader, never a copy.

A view of a stored buffer also carries its strided layout (``TensorValue.layout``), so an
extern op (matmul, say) gets the view itself instead of a copy; a view of a value not stored
yet remembers its source (``view_source``) so the source, not the view, is what gets stored.
"""

from __future__ import annotations

import builtins

import sympy

from ._ir import FloorDiv, ModularIndexing, TensorValue, contiguous_strides, product, sym, unflatten
from ._lowering import Unsupported, register


def _with_layout(value: TensorValue, source: TensorValue, derive) -> TensorValue:
    """``value`` with the strided layout ``derive(shape, strides, offset)`` of ``source``'s, if any."""
    value.view_source = (source, derive)  # lets an extern op get this view of a stored source
    if source.layout is not None:
        value.layout = derive_layout(value, source.layout, derive)
    return value


def derive_layout(value, layout, derive):
    buf, shape, strides, offset = layout
    derived = derive(list(shape), list(strides), offset)
    if derived is None:
        return None
    return (buf, tuple(value.shape), tuple(derived[0]), derived[1])


def _wrap(dim, ndim):
    if ndim == 0:
        return 0
    if not -ndim <= dim < ndim:
        raise Unsupported("dim out of range")  # eager raises the right IndexError
    return dim % ndim


def view_as_shape(x: TensorValue, shape) -> TensorValue:
    shape = [sym(s) for s in shape]
    if -1 in shape:
        known = product([s for s in shape if s != -1])
        shape[shape.index(-1)] = sympy.simplify(product(x.shape) / known)
    if list(shape) == list(x.shape):
        return x
    src_shape = x.shape
    strides_new = []
    acc = sympy.Integer(1)
    for s in reversed(shape):
        strides_new.append(acc)
        acc = acc * s
    strides_new.reverse()

    groups = _dim_groups(src_shape, shape)

    def load(idx):
        if groups is None:
            flat = sum((i * s for i, s in zip(idx, strides_new)), sympy.Integer(0))
            return x.load(unflatten(flat, src_shape))
        return x.load(_group_index(groups, src_shape, shape, idx))

    out = TensorValue(shape, x.dtype, load, origin="view")

    def derive(sh, st, off):
        dense = [st[k] for k in range(len(sh)) if sh[k] != 1]
        want = [c for k, c in enumerate(contiguous_strides(sh)) if sh[k] != 1]
        if dense == want:
            return (list(strides_new), off)
        strides = _view_strides(sh, st, shape)
        return None if strides is None else (strides, off)

    return _with_layout(out, x, derive)


def _view_strides(old_shape, old_strides, new_shape):
    """Strides of a view of a strided layout as ``new_shape`` without a copy, or None: the
    source's dims fall into runs each one stride apart from the next (a run is contiguous within
    itself), and each run must be exactly a run of the new dims (a split dim keeps its stride for
    its innermost part: GPT-2's heads split off a column slice of the qkv projection). Static
    sizes and strides only."""
    try:
        old = [int(n) for n in old_shape]
        olds = [int(t) for t in old_strides]
        new = [int(n) for n in new_shape]
    except TypeError:
        return None
    if 0 in old or not old:
        return None
    out = [0] * len(new)
    d = len(new) - 1
    base = olds[-1]
    run, made = 1, 1
    for k in range(len(old) - 1, -1, -1):
        run *= old[k]
        if k == 0 or (old[k - 1] != 1 and olds[k - 1] != run * base):
            # the run of source dims k.. ends here: the new dims that make up exactly its elements
            while d >= 0 and (made < run or new[d] == 1):
                out[d] = made * base
                made *= new[d]
                d -= 1
            if made != run:
                return None
            if k > 0:
                base, run, made = olds[k - 1], 1, 1
    if d != -1:
        return None
    return [sympy.Integer(t) for t in out]


def _dim_groups(src, dst):
    """Runs of source and target dims with equal products ([(src dims, dst dims)]), or None.

    A reshape then maps each run on its own: merged dims become a linear index, and only a
    split dim needs division and modulo (of its own index, not of the whole flat index).
    """
    groups, i, j = [], 0, 0
    src_dims = [d for d, s in enumerate(src) if s != 1]
    dst_dims = [d for d, s in enumerate(dst) if s != 1]
    while i < len(src_dims) and j < len(dst_dims):
        gs, gd = [src_dims[i]], [dst_dims[j]]
        ps, pd = src[src_dims[i]], dst[dst_dims[j]]
        while ps != pd:
            if not (ps.is_Integer and pd.is_Integer):
                return None  # symbolic sizes that do not line up: the general flat mapping
            if ps < pd:
                i += 1
                if i >= len(src_dims):
                    return None
                gs.append(src_dims[i])
                ps = ps * src[src_dims[i]]
            else:
                j += 1
                if j >= len(dst_dims):
                    return None
                gd.append(dst_dims[j])
                pd = pd * dst[dst_dims[j]]
        groups.append((gs, gd))
        i += 1
        j += 1
    if i != len(src_dims) or j != len(dst_dims):
        return None
    return groups


def _group_index(groups, src, dst, idx):
    out = [sympy.Integer(0)] * len(src)
    for gs, gd in groups:
        flat, stride = sympy.Integer(0), sympy.Integer(1)
        for d in reversed(gd):
            flat = flat + idx[d] * stride
            stride = stride * dst[d]
        divisor = sympy.Integer(1)
        for k, d in enumerate(reversed(gs)):
            if k == len(gs) - 1:
                out[d] = FloorDiv(flat, divisor)  # the run's outermost dim needs no modulo
            else:
                out[d] = ModularIndexing(flat, divisor, src[d])
            divisor = divisor * src[d]
    return out


@register("view", "reshape", "_unsafe_view")
def _view(ctx, x, size):
    return view_as_shape(ctx.use(x), list(size))


@register("permute")
def _permute(ctx, x, dims):
    x = ctx.use(x)
    dims = [_wrap(d, x.ndim) for d in dims]
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i

    def load(idx):
        return x.load([idx[inverse[k]] for k in range(x.ndim)])

    out = TensorValue([x.shape[d] for d in dims], x.dtype, load, origin="permute")
    return _with_layout(out, x, lambda sh, st, off: ([st[d] for d in dims], off))


@register("transpose")
def _transpose(ctx, x, dim0, dim1):
    dims = list(range(x.ndim))
    if x.ndim:
        a, b = _wrap(dim0, x.ndim), _wrap(dim1, x.ndim)
        dims[a], dims[b] = dims[b], dims[a]
    return _permute(ctx, x, dims)


@register("t")
def _t(ctx, x):
    return _transpose(ctx, x, 0, 1) if x.ndim == 2 else _alias(ctx, x)


@register("expand")
def _expand(ctx, x, size, implicit=False):
    x = ctx.use(x)
    size = [sym(s) for s in size]
    offset = len(size) - x.ndim
    shape = [x.shape[d - offset] if (s == -1) else s for d, s in enumerate(size)]

    def load(idx):
        return x.load([sympy.Integer(0) if x.shape[k] == 1 else idx[k + offset] for k in range(x.ndim)])

    out = TensorValue(shape, x.dtype, load, origin="expand")

    def derive(sh, st, off):
        strides = [sympy.Integer(0)] * offset
        strides += [sympy.Integer(0) if sh[k] == 1 and shape[k + offset] != 1 else st[k] for k in range(len(sh))]
        return strides, off

    return _with_layout(out, x, derive)


@register("unsqueeze")
def _unsqueeze(ctx, x, dim):
    x = ctx.use(x)
    d = dim % (x.ndim + 1)
    out = TensorValue(x.shape[:d] + (1,) + x.shape[d:], x.dtype, lambda idx: x.load(idx[:d] + idx[d + 1:]),
                      origin="unsqueeze")
    return _with_layout(out, x, lambda sh, st, off: (st[:d] + [sympy.Integer(1)] + st[d:], off))


@register("squeeze")
def _squeeze(ctx, x, dim=None):
    x = ctx.use(x)
    if dim is None:
        dims = [d for d, s in enumerate(x.shape) if s == 1]
    else:
        dims = [_wrap(d, x.ndim) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
        dims = [d for d in dims if x.ndim and x.shape[d] == 1]
    keep = [d for d in range(x.ndim) if d not in dims]

    def load(idx):
        full = [sympy.Integer(0)] * x.ndim
        for k, d in enumerate(keep):
            full[d] = idx[k]
        return x.load(full)

    out = TensorValue([x.shape[d] for d in keep], x.dtype, load, origin="squeeze")
    return _with_layout(out, x, lambda sh, st, off: ([st[d] for d in keep], off))


@register("select")
def _select(ctx, x, dim, index):
    x = ctx.use(x)
    d = _wrap(dim, x.ndim)
    i = sym(index)
    if i.is_Integer and int(i) < 0:
        i = i + x.shape[d]
    out = TensorValue(x.shape[:d] + x.shape[d + 1:], x.dtype, lambda idx: x.load(idx[:d] + [i] + idx[d:]),
                      origin="select")
    return _with_layout(out, x, lambda sh, st, off: (st[:d] + st[d + 1:], off + i * st[d]))


@register("slice")
def _slice(ctx, x, dim=0, start=None, end=None, step=1):
    x = ctx.use(x)
    d = _wrap(dim, x.ndim)
    n = x.shape[d]
    if not n.is_Integer:
        raise Unsupported("slice of a symbolic dim")
    n = int(n)
    start, stop, step = builtins.slice(start, end, step).indices(n)
    if step <= 0:
        raise Unsupported("slice step")
    length = max(0, (stop - start + step - 1) // step)
    out = TensorValue(x.shape[:d] + (length,) + x.shape[d + 1:], x.dtype,
                      lambda idx: x.load(idx[:d] + [start + step * idx[d]] + idx[d + 1:]), origin="slice")
    return _with_layout(out, x, lambda sh, st, off: (st[:d] + [st[d] * step] + st[d + 1:], off + start * st[d]))


@register("narrow")
def _narrow(ctx, x, dim, start, length):
    d = _wrap(dim, x.ndim)
    return _slice(ctx, x, d, start, int(start) + int(length), 1)


@register("alias")
def _alias(ctx, x):
    x = ctx.use(x)
    return _with_layout(TensorValue(x.shape, x.dtype, x.loader, origin="alias"), x, lambda sh, st, off: (st, off))

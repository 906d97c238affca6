"""Translations of views, reshapes, joins, factories and reductions (see ``_translations``)."""

from __future__ import annotations

import numpy as np

import ember

from ._builder import onnx_dtype
from ._translations import arg, dtype_of, register, shape_of


def _norm_dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


@register("view", "reshape", "_unsafe_view")
def _view(b, node):
    return b.emit("Reshape", [b.value(node.args[0]), _reshape_target(b, shape_of(node.args[0]), shape_of(node))])


def _reshape_target(b, in_shape, out_shape):
    """Reshape's shape input without run-time size arithmetic where possible: a symbolic size
    equal to the input's at the same position is 0 (copy), and one other symbolic size is -1."""
    from ember.export._ranges import as_expr

    out = [as_expr(s) for s in out_shape]
    ins = [as_expr(s) for s in in_shape]
    if any(s == 0 for s in out if isinstance(s, int)):
        return b.ints(out)
    target = []
    for i, s in enumerate(out):
        if not isinstance(s, int) and i < len(ins) and ins[i] == s:
            target.append(0)
        else:
            target.append(s)
    symbolic = [i for i, s in enumerate(target) if not isinstance(s, int)]
    if len(symbolic) == 1:
        target[symbolic[0]] = -1
    return b.ints(target)


@register("expand")
def _expand(b, node):
    return b.emit("Expand", [b.value(node.args[0]), b.ints(shape_of(node))])


def _transposed(b, x, perm):
    src = b.value(x)
    folded = b.folded_transpose(src, perm)  # a weight: transpose it once, at export time
    return folded if folded is not None else b.emit("Transpose", [src], perm=perm)


@register("permute")
def _permute(b, node):
    rank = len(shape_of(node))
    return _transposed(b, node.args[0], [_norm_dim(d, rank) for d in node.args[1]])


@register("transpose")
def _transpose(b, node):
    rank = len(shape_of(node))
    d0, d1 = _norm_dim(node.args[1], rank), _norm_dim(node.args[2], rank)
    perm = list(range(rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return _transposed(b, node.args[0], perm)


@register("unsqueeze")
def _unsqueeze(b, node):
    rank = len(shape_of(node))
    return b.emit("Unsqueeze", [b.value(node.args[0]), b.const(np.array([_norm_dim(node.args[1], rank)]))])


@register("squeeze")
def _squeeze(b, node):
    # The result's shape says which dims went away; reshaping to it is exact.
    return b.emit("Reshape", [b.value(node.args[0]), _reshape_target(b, shape_of(node.args[0]), shape_of(node))])


@register("slice")
def _slice(b, node):
    x, dim = node.args[0], node.args[1]
    start, end, step = arg(node, 2, "start", 0), arg(node, 3, "end", None), arg(node, 4, "step", 1)
    rank = len(shape_of(x))
    big = np.iinfo(np.int64).max
    start = 0 if start is None else start
    end = big if end is None or (isinstance(end, int) and end >= big) else end
    return b.emit("Slice", [b.value(x), b.ints([start]), b.ints([end]), b.const(np.array([_norm_dim(dim, rank)])),
                            b.ints([step])])


@register("narrow")
def _narrow(b, node):
    x, dim, start, length = node.args[:4]
    rank = len(shape_of(x))
    from ember.export._ranges import as_expr

    end = as_expr(start) + as_expr(length)
    return b.emit("Slice", [b.value(x), b.ints([start]), b.ints([end]), b.const(np.array([_norm_dim(dim, rank)]))])


@register("select")
def _select(b, node):
    x, dim, index = node.args[:3]
    rank = len(shape_of(x))
    # Gather accepts negative indices, counted from the end, as select does.
    idx = b.emit("Reshape", [b.ints([index]), b.const(np.array([], dtype=np.int64))])
    return b.emit("Gather", [b.value(x), idx], axis=_norm_dim(dim, rank))


@register("cat")
def _cat(b, node):
    tensors = [t for t in node.args[0]]
    rank = len(shape_of(node))
    dim = _norm_dim(arg(node, 1, "dim", 0), rank)
    # torch.cat skips 1-d empty tensors; so does this.
    inputs = [b.value(t) for t in tensors if not (len(shape_of(t)) == 1 and shape_of(t)[0] == 0)]
    return b.emit("Concat", inputs, axis=dim)


@register("flip")
def _flip(b, node):
    x, dims = node.args[0], node.args[1]
    out = b.value(x)
    rank = len(shape_of(x))
    big = np.iinfo(np.int64).max
    for d in dims:
        out = b.emit("Slice", [out, b.const(np.array([-1])), b.const(np.array([-big])),
                               b.const(np.array([_norm_dim(d, rank)])), b.const(np.array([-1]))])
    return out


@register("constant_pad_nd")
def _pad(b, node):
    x, pad = node.args[0], node.args[1]
    value = arg(node, 2, "value", 0)
    rank = len(shape_of(x))
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return b.emit("Pad", [b.value(x), b.ints(begins + ends), b.const(value, dtype_of(node))], mode="constant")


@register("index_select")
def _index_select(b, node):
    x, dim, index = node.args[:3]
    return b.emit("Gather", [b.value(x), b.value(index)], axis=_norm_dim(dim, len(shape_of(x))))


@register("embedding")
def _embedding(b, node):
    return b.emit("Gather", [b.value(node.args[0]), b.value(node.args[1])], axis=0)


@register("gather")
def _gather(b, node):
    x, dim, index = node.args[:3]
    return b.emit("GatherElements", [b.value(x), b.value(index)], axis=_norm_dim(dim, len(shape_of(x))))


# ------------------------------------------------------------------ factories


@register("full")
def _full(b, node):
    value = node.args[1]
    dt = dtype_of(node)
    from onnx import numpy_helper

    from ._builder import NUMPY_DTYPES

    if hasattr(value, "op"):  # a size computed at run time (a symbolic cond predicate's operand)
        fill = b.value(value)
        if dt is not ember.int64:
            fill = b.emit("Cast", [fill], to=onnx_dtype(dt))
        return b.emit("Expand", [fill, b.ints(shape_of(node))])
    fill = numpy_helper.from_array(np.array([value], dtype=NUMPY_DTYPES[dt]), "value")
    return b.emit("ConstantOfShape", [b.ints(shape_of(node))], value=fill)


@register("empty")
def _zeros(b, node):
    from onnx import numpy_helper

    from ._builder import NUMPY_DTYPES

    fill = numpy_helper.from_array(np.zeros(1, dtype=NUMPY_DTYPES[dtype_of(node)]), "value")
    return b.emit("ConstantOfShape", [b.ints(shape_of(node))], value=fill)


@register("arange_affine")
def _arange(b, node):
    n, start, step = node.args[:3]
    dt = dtype_of(node)
    from ember.export._ranges import as_expr

    count = b.emit("Cast", [b.sym(as_expr(n)) if not isinstance(n, int) else b.const(np.array([n]))],
                   to=onnx_dtype(dt))
    count = b.emit("Reshape", [count, b.const(np.array([], dtype=np.int64))])
    s, st = b.const(start, dt), b.const(step, dt)
    limit = b.emit("Add", [s, b.emit("Mul", [count, st])])
    return b.emit("Range", [s, limit, st])


# ------------------------------------------------------------------ reductions


def _dims(node, x, index=1):
    dims = arg(node, index, "dim", None)
    rank = len(shape_of(x))
    if dims is None or dims == []:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return [_norm_dim(d, rank) for d in dims]


def _reduce(onnx_op):
    def translate(b, node):
        x = node.args[0]
        keep = arg(node, 2, "keepdim", False)
        src = b.value(x)
        if dtype_of(x) != dtype_of(node):
            src = b.emit("Cast", [src], to=onnx_dtype(dtype_of(node)))
        return b.emit(onnx_op, [src, b.const(np.array(_dims(node, x), dtype=np.int64))], keepdims=int(bool(keep)))

    return translate


register("sum")(_reduce("ReduceSum"))
register("mean")(_reduce("ReduceMean"))
register("amax")(_reduce("ReduceMax"))
register("amin")(_reduce("ReduceMin"))
register("prod")(_reduce("ReduceProd"))


@register("var", "std")
def _var(b, node):
    x = node.args[0]
    dims = _dims(node, x)
    # correction and keepdim are keyword-only in the schema but may be recorded positionally
    keep = arg(node, 3, "keepdim", False)
    correction = arg(node, 2, "correction", 1)
    correction = 1 if correction is None else correction
    dt = dtype_of(node)
    axes = b.const(np.array(dims, dtype=np.int64))
    xv = b.value(x)
    centered = b.emit("Sub", [xv, b.emit("ReduceMean", [xv, axes], keepdims=1)])
    total = b.emit("ReduceSum", [b.emit("Mul", [centered, centered]), axes], keepdims=int(bool(keep)))
    shape = shape_of(x)
    count = 1
    for d in dims:
        count = count * shape[d]
    denom = b.emit("Cast", [b.emit("Reshape", [b.ints([count]), b.const(np.array([], dtype=np.int64))])],
                   to=onnx_dtype(dt))
    denom = b.emit("Sub", [denom, b.const(correction, dt)])
    var = b.emit("Div", [total, denom])
    return b.emit("Sqrt", [var]) if node.target.name == "std" else var


@register("softmax", "log_softmax")
def _softmax(b, node):
    x = node.args[0]
    rank = len(shape_of(x))
    src = b.value(x)
    if dtype_of(x) != dtype_of(node):
        src = b.emit("Cast", [src], to=onnx_dtype(dtype_of(node)))
    kind = "Softmax" if node.target.name == "softmax" else "LogSoftmax"
    return b.emit(kind, [src], axis=_norm_dim(node.args[1], rank))


@register("max_dim", "min_dim")
def _max_dim(b, node):
    x, dim = node.args[0], node.args[1]
    keep = arg(node, 2, "keepdim", False)
    d = _norm_dim(dim, len(shape_of(x)))
    kind = "Max" if node.target.name == "max_dim" else "Min"
    values = b.emit(f"Reduce{kind}", [b.value(x), b.const(np.array([d], dtype=np.int64))], keepdims=int(bool(keep)))
    indices = b.emit(f"Arg{kind}", [b.value(x)], axis=d, keepdims=int(bool(keep)), select_last_index=0)
    return [values, indices]


@register("argmax", "argmin")
def _argmax(b, node):
    x = node.args[0]
    dim = arg(node, 1, "dim", None)
    keep = arg(node, 2, "keepdim", False)
    src = b.value(x)
    if dim is None:
        src = b.emit("Reshape", [src, b.const(np.array([-1], dtype=np.int64))])
        dim = 0
    kind = "ArgMax" if node.target.name == "argmax" else "ArgMin"
    return b.emit(kind, [src], axis=_norm_dim(dim, len(shape_of(x)) or 1), keepdims=int(bool(keep)))

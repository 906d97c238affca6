"""Translations of interpolation, non-constant padding, cumulative sums, top-k/sort and integer
floor division (``F.interpolate``, ``F.pad(mode="reflect")``, ``cumsum``, ``topk``, ``sort``, ``//``)."""

from __future__ import annotations

import numpy as np

from ._builder import UnsupportedOp, onnx_dtype
from ._translations import arg, dtype_of, operand, register, shape_of


def _norm_dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


@register("_upsample")
def _upsample(b, node):
    """``_upsample(x, output_size, mode, align_corners, scales)`` as ``Resize`` with PyTorch's
    coordinate conventions (legacy ``nearest`` floors, ``nearest-exact`` rounds half pixels)."""
    x, output_size, mode, align_corners = node.args[:4]
    scales = arg(node, 4, "scales", None)
    attrs = {}
    if mode == "nearest":
        attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    elif mode == "nearest-exact":
        attrs = {"mode": "nearest", "coordinate_transformation_mode": "half_pixel",
                 "nearest_mode": "round_prefer_ceil"}
    elif mode in ("linear", "bilinear", "trilinear", "bicubic"):
        attrs = {"mode": "cubic" if mode == "bicubic" else "linear",
                 "coordinate_transformation_mode": "align_corners" if align_corners else "pytorch_half_pixel"}
        if mode == "bicubic":
            attrs["cubic_coeff_a"] = -0.75
    else:
        raise UnsupportedOp(f"interpolate mode {mode!r} has no ONNX translation")
    src = b.value(x)
    dt = dtype_of(x)
    if not dt.is_floating_point:
        src = b.emit("Cast", [src], to=onnx_dtype(_float32()))
    if scales is not None and len(scales) and all(s is not None for s in scales):
        # A given scale factor maps coordinates by itself (as PyTorch without recompute_scale_factor).
        factors = b.const(np.array([1.0, 1.0, *[float(s) for s in scales]], dtype=np.float32))
        out = b.emit("Resize", [src, "", factors], **attrs)
    else:
        leading = b.emit("Shape", [src], start=0, end=2)
        sizes = b.emit("Concat", [leading, b.ints(list(output_size))], axis=0)
        out = b.emit("Resize", [src, "", "", sizes], **attrs)
    if not dt.is_floating_point:
        out = b.emit("Cast", [b.emit("Round", [out])], to=onnx_dtype(dt))
    return out


def _float32():
    import ember

    return ember.float32


@register("_pad_enum")
def _pad_enum(b, node):
    """reflect (1), replicate (2) and circular (3) padding; circular as slices and a Concat (ONNX's
    ``wrap`` needs opset 19)."""
    x, pad, mode = node.args[:3]
    rank = len(shape_of(x))
    src = b.value(x)
    if mode in (1, 2):
        begins, ends = [0] * rank, [0] * rank
        for i in range(len(pad) // 2):
            begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
        return b.emit("Pad", [src, b.ints(begins + ends)], mode="reflect" if mode == 1 else "edge")
    if mode != 3:
        raise UnsupportedOp(f"padding mode {mode} has no ONNX translation")
    out = src
    for i in range(len(pad) // 2):
        axis = rank - 1 - i
        lo, hi = int(pad[2 * i]), int(pad[2 * i + 1])
        if lo < 0 or hi < 0:
            raise UnsupportedOp("circular padding with a negative amount has no ONNX translation")
        axes = b.const(np.array([axis], dtype=np.int64))
        parts = []
        if lo:
            parts.append(b.emit("Slice", [out, b.const(np.array([-lo], dtype=np.int64)),
                                          b.const(np.array([np.iinfo(np.int64).max], dtype=np.int64)), axes]))
        parts.append(out)
        if hi:
            parts.append(b.emit("Slice", [out, b.const(np.array([0], dtype=np.int64)),
                                          b.const(np.array([hi], dtype=np.int64)), axes]))
        out = b.emit("Concat", parts, axis=axis) if len(parts) > 1 else out
    return out


@register("cumsum")
def _cumsum(b, node):
    x, dim = node.args[0], node.args[1]
    src = b.value(x)
    if dtype_of(x) != dtype_of(node):
        src = b.emit("Cast", [src], to=onnx_dtype(dtype_of(node)))
    axis = b.const(np.array(_norm_dim(dim, len(shape_of(x)) or 1), dtype=np.int64))
    return b.emit("CumSum", [src, axis])


@register("topk")
def _topk(b, node):
    x, k = node.args[0], node.args[1]
    dim = arg(node, 2, "dim", -1)
    largest = arg(node, 3, "largest", True)
    rank = len(shape_of(x))
    values, indices = b.emit("TopK", [b.value(x), b.ints([k])], n_out=2, axis=_norm_dim(dim, rank),
                             largest=int(bool(largest)), sorted=1)
    return [values, indices]


@register("sort")
def _sort(b, node):
    x = node.args[0]
    dim = arg(node, 2, "dim", node.kwargs.get("dim", -1))
    descending = arg(node, 3, "descending", node.kwargs.get("descending", False))
    rank = len(shape_of(x))
    axis = _norm_dim(dim, rank)
    count = b.emit("Shape", [b.value(x)], start=axis, end=axis + 1)
    values, indices = b.emit("TopK", [b.value(x), count], n_out=2, axis=axis, largest=int(bool(descending)),
                             sorted=1)
    return [values, indices]


@register("floor_divide", "div_rounding")
def _floor_divide(b, node):
    """``//`` and ``div(rounding_mode="floor" | "trunc")``."""
    x, y = node.args[0], node.args[1]
    mode = arg(node, 2, "rounding_mode", "floor") if node.target.name == "div_rounding" else "floor"
    like = x if hasattr(x, "op") else y
    dt = dtype_of(node)
    xs, ys = operand(b, x, like), operand(b, y, like)
    xs = b.emit("Cast", [xs], to=onnx_dtype(dt)) if hasattr(x, "op") and dtype_of(x) != dt else xs
    ys = b.emit("Cast", [ys], to=onnx_dtype(dt)) if hasattr(y, "op") and dtype_of(y) != dt else ys
    if dt.is_floating_point:
        quotient = b.emit("Div", [xs, ys])
        if mode == "trunc":  # toward zero: floor of |q| with q's sign
            return b.emit("Mul", [b.emit("Sign", [quotient]), b.emit("Floor", [b.emit("Abs", [quotient])])])
        if mode is None:
            return quotient
        return b.emit("Floor", [quotient])
    if mode == "trunc":
        return b.emit("Div", [xs, ys])  # ONNX's integer Div truncates
    # Integers, floor: (x - x mod y) / y divides exactly, and Mod(fmod=0) takes the divisor's sign.
    remainder = b.emit("Mod", [xs, ys], fmod=0)
    return b.emit("Div", [b.emit("Sub", [xs, remainder]), ys])


@register("adaptive_max_pool2d")
def _adaptive_max_pool(b, node):
    """Global max pooling, or MaxPool where the output size divides the (static) input size."""
    x, out_size = node.args[0], list(node.args[1])
    if all(int(s) == 1 for s in out_size):
        return [b.emit("GlobalMaxPool", [b.value(x)]), None]
    in_h, in_w = shape_of(x)[-2:]
    if not all(isinstance(s, int) for s in (in_h, in_w)) or in_h % out_size[0] or in_w % out_size[1]:
        raise UnsupportedOp("adaptive_max_pool2d to a size that does not divide the (static) input size")
    kernel = [in_h // out_size[0], in_w // out_size[1]]
    return [b.emit("MaxPool", [b.value(x)], kernel_shape=kernel, strides=kernel), None]


@register("index")
def _index(b, node):
    """``x[..., idx]`` with one integer index tensor (the other positions full slices): Gather."""
    x, indices = node.args[0], list(node.args[1])
    given = [(d, t) for d, t in enumerate(indices) if t is not None]
    if len(given) != 1 or not hasattr(given[0][1], "op"):
        raise UnsupportedOp("indexing with more than one index tensor has no ONNX translation")
    dim, index = given[0]
    index_dtype = dtype_of(index)
    if index_dtype.is_floating_point or str(index_dtype).endswith("bool"):
        raise UnsupportedOp("indexing with a boolean mask has a data-dependent shape (no ONNX translation)")
    return b.emit("Gather", [b.value(x), b.value(index)], axis=dim)


@register("as_strided")
def _as_strided(b, node):
    """``as_strided`` that only permutes a contiguous input's dims and adds or drops size-1 dims
    (what ``einsum`` decomposes into): Reshape, Transpose, Reshape. Other strides (a diagonal,
    overlapping windows) have no ONNX translation."""
    from ember.export._ranges import as_expr as _as_expr

    def as_expr(v):  # sizes compared by their text: a symbol may carry other assumptions
        e = _as_expr(v)
        return e if type(e) is int else str(getattr(e, "node", e))  # (a SymInt is an int subclass)

    x, size, stride = node.args[0], list(node.args[1]), list(node.args[2])
    offset = arg(node, 3, "storage_offset", 0) or 0
    val = x.meta.get("val")
    if val is None or offset != 0 or int(getattr(val, "_offset", 0)) != 0:
        raise UnsupportedOp("as_strided with a storage offset has no ONNX translation")
    in_shape = [as_expr(s) for s in val.shape]
    in_stride = [as_expr(s) for s in val.stride()]
    if not val.is_contiguous():
        raise UnsupportedOp("as_strided of a non-contiguous tensor has no ONNX translation")
    kept = [d for d, s in enumerate(in_shape) if s != 1]
    order = []
    for s, st in zip(size, stride):
        s, st = as_expr(s), as_expr(st)
        if s == 1:
            continue
        match = [d for d in kept if in_shape[d] == s and in_stride[d] == st and d not in order]
        if len(match) != 1:
            raise UnsupportedOp("as_strided that is not a permutation of the input's dims has no ONNX translation")
        order.append(match[0])
    if sorted(order) != kept:
        raise UnsupportedOp("as_strided that drops or repeats a dim has no ONNX translation")
    kept_sizes = [_as_expr(val.shape[d]) for d in kept]
    kept_sizes = [s if type(s) is int else getattr(s, "node", s) for s in kept_sizes]  # SymInt -> its symbol
    out = b.emit("Reshape", [b.value(x), b.ints(kept_sizes)])
    if order != kept:
        out = b.emit("Transpose", [out], perm=[kept.index(d) for d in order])
    return b.emit("Reshape", [out, b.ints(size)])

"""In-place ops left in an exported graph, as ONNX values: each write makes a new version.

``x.fill_(v)``, ``x.masked_fill_(m, v)``, ``x.copy_(src)`` and ``x.add_(y)``-style ops on a
fresh value ``x`` give it a new ONNX value that later readers of ``x`` use. A write through
one ``select``/``slice``/``narrow`` view (``mask[:, -1] = True``) becomes a ``Where`` over
the base, with a boolean mask of the view's region built from ``Range`` comparisons. Every
other case (a write through a chain of views, a view of the base read after the write, a
slice written with non-scalar data) fails the export naming the op: never a wrong model.
"""

from __future__ import annotations

import numpy as np

from ember.export._functionalize import is_view, mutated_inputs
from ember.export._ranges import as_expr

from ._builder import UnsupportedOp, onnx_dtype
from ._translations import _BINARY, _UNARY, dtype_of, shape_of


def _scalar(b, value) -> str:
    """A 0-d int64 tensor holding an int or a symbolic size."""
    if isinstance(value, int):
        return b.const(np.array(value, dtype=np.int64))
    return b.emit("Reshape", [b.sym(as_expr(value)), b.const(np.array([], dtype=np.int64))])


def _region_mask(b, view, root_rank: int) -> str:
    """A bool tensor, broadcastable to the base, true inside ``view``'s region of it."""
    name = view.target.name
    base = view.args[0]
    dim = view.args[1] % root_rank
    size = shape_of(base)[dim]
    positions = b.emit("Range", [_scalar(b, 0), _scalar(b, size), _scalar(b, 1)])
    if name == "select":
        index = view.args[2]
        if isinstance(index, int) and index < 0:
            index = as_expr(size) + index
        mask = b.emit("Equal", [positions, _scalar(b, index)])
    else:
        if name == "narrow":
            start, end, step = view.args[2], as_expr(view.args[2]) + as_expr(view.args[3]), 1
        else:
            start, end, step = view.args[2], view.args[3], view.args[4] if len(view.args) > 4 else 1
        start, end = (0 if start is None else start), (size if end is None else end)
        if isinstance(end, int) and end > 2**62:
            end = size
        if step != 1:
            raise UnsupportedOp("a write through a strided slice")
        lo = b.emit("GreaterOrEqual", [positions, _scalar(b, start)])
        hi = b.emit("Less", [positions, _scalar(b, end)])
        mask = b.emit("And", [lo, hi])
    shape = [1] * root_rank
    shape[dim] = -1
    return b.emit("Reshape", [mask, b.const(np.array(shape, dtype=np.int64))])


def _new_view_value(b, node, dst) -> str:
    """The value the written view holds after ``node``."""
    name = node.target.name
    dt = dtype_of(dst)
    if name == "fill_":
        return b.value(node.args[1], dt)
    if name == "masked_fill_":
        return b.where(b.value(node.args[1]), b.value(node.args[2], dt), b.value(dst), dt)
    if name == "copy_":
        src = b.value(node.args[1], dt)
        if dtype_of(node.args[1]) not in (None, dt) and hasattr(node.args[1], "op"):
            src = b.emit("Cast", [src], to=onnx_dtype(dt))
        return src
    if name in ("scatter_", "scatter_add_"):
        return _scatter(b, node, dst, dt)
    base = name[:-1]
    if base in _UNARY:
        return b.emit(_UNARY[base], [b.value(dst)])
    if base in _BINARY and len(node.args) >= 2:
        return b.emit(_BINARY[base], [b.value(dst), b.value(node.args[1], dt)])
    raise UnsupportedOp(f"ember.ops.{name} (an in-place op) has no ONNX translation")


def _scatter(b, node, dst, dt) -> str:
    """``scatter_(dim, index, src)`` / ``scatter_add_`` as ``ScatterElements``: a number ``src``
    is expanded to the index's shape; a tensor ``src`` must have the index's shape (PyTorch also
    reads a larger one's leading part, which ONNX cannot)."""
    dim, index, src = node.args[1], node.args[2], node.args[3]
    reduce = node.kwargs.get("reduce", node.args[4] if len(node.args) > 4 else None)
    if node.target.name == "scatter_add_":
        reduce = "add"
    reductions = {None: "none", "add": "add", "sum": "add", "multiply": "mul", "prod": "mul"}
    if reduce not in reductions:
        raise UnsupportedOp(f"scatter with reduce={reduce!r}")
    indices = b.value(index)
    if hasattr(src, "op"):
        if tuple(shape_of(src)) != tuple(shape_of(index)):
            raise UnsupportedOp("scatter from a src larger than its index")
        updates = b.value(src, dt)
        if dtype_of(src) not in (None, dt):
            updates = b.emit("Cast", [updates], to=onnx_dtype(dt))
    else:
        updates = b.emit("Expand", [b.value(src, dt), b.emit("Shape", [indices])])
    axis = dim % len(shape_of(dst))
    return b.emit("ScatterElements", [b.value(dst), indices, updates], axis=axis, reduction=reductions[reduce])


def translate_inplace(b, node, order: dict) -> None:
    written = mutated_inputs(node)
    if len(written) != 1:
        raise UnsupportedOp(f"ember.ops.{node.target.name} writes {len(written)} tensors in place")
    (dst,) = written
    chain = []
    root = dst
    while is_view(root):
        chain.append(root)
        root = root.args[0]
    if root.op == "placeholder":
        raise UnsupportedOp(f"ember.ops.{node.target.name} writes the graph input {root.name}")
    if len(chain) > 1 or (chain and chain[0].target.name not in ("select", "slice", "narrow")):
        raise UnsupportedOp(f"ember.ops.{node.target.name} writes through the view chain "
                            f"{[v.target.name for v in reversed(chain)]}")
    for user in root.users:
        if is_view(user) and user not in chain and order[user] < order[node] and any(
                order[u] > order[node] for u in user.users):
            raise UnsupportedOp(f"the view {user.name} of {root.name} is read after ember.ops.{node.target.name} "
                                "writes it")
    new = _new_view_value(b, node, dst)
    root_shape = shape_of(root)
    if not chain:
        b.names[root] = b.emit("Expand", [new, b.ints(root_shape)]) if node.target.name == "fill_" else new
    else:
        view = chain[0]
        placed = new
        if view.target.name == "select" and node.target.name != "fill_":
            axis = view.args[1] % len(root_shape)
            placed = b.emit("Unsqueeze", [new, b.const(np.array([axis], dtype=np.int64))])
        elif view.target.name != "select" and node.target.name != "fill_":
            raise UnsupportedOp(f"ember.ops.{node.target.name} writes non-scalar data through a slice")
        mask = _region_mask(b, view, len(root_shape))
        b.names[root] = b.where(mask, placed, b.value(root), dtype_of(root))
    b.names[node] = new

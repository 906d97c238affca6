"""ONNX translations of the reductions that are not one Reduce* op of the same name: vector norms
(``F.normalize``, ``x.norm(p, dim)``), ``logsumexp`` and ``any``/``all``."""

from __future__ import annotations

import math

import numpy as np

from onnx import TensorProto

from ._builder import UnsupportedOp, onnx_dtype
from ._translations import arg, dtype_of, register, shape_of


def _axes(b, node, x, index: int):
    """The reduced dims as an int64 initializer (every dim when the argument is None or [])."""
    dims = arg(node, index, "dim", None)
    rank = len(shape_of(x))
    if dims is None or dims == [] or dims == ():
        dims = list(range(rank))
    elif isinstance(dims, int):
        dims = [dims]
    return b.const(np.array([d + rank if d < 0 else d for d in dims], dtype=np.int64))


@register("norm")
def _norm(b, node):
    """``norm(x, p, dim, keepdim, dtype=)``: ReduceL2 / ReduceL1, max or min of |x| for +-inf,
    the count of nonzeros for p=0, and (sum |x|^p)^(1/p) otherwise."""
    x = node.args[0]
    p = arg(node, 1, "p", 2)
    if p == "nuc":
        raise UnsupportedOp("the nuclear norm (norm(p='nuc'))")
    p = 2.0 if p is None or p == "fro" else float(p)
    keep = int(bool(arg(node, 3, "keepdim", False)))
    axes = _axes(b, node, x, 2)
    dt = dtype_of(node)
    src = b.value(x)
    if dtype_of(x) != dt:
        src = b.emit("Cast", [src], to=onnx_dtype(dt))
    if p == 2.0:
        return b.emit("ReduceL2", [src, axes], keepdims=keep)
    if p == 1.0:
        return b.emit("ReduceL1", [src, axes], keepdims=keep)
    magnitude = b.emit("Abs", [src])
    if math.isinf(p):
        return b.emit("ReduceMax" if p > 0 else "ReduceMin", [magnitude, axes], keepdims=keep)
    if p == 0.0:
        nonzero = b.emit("Not", [b.emit("Equal", [src, b.const(0.0, dt)])])
        return b.emit("ReduceSum", [b.emit("Cast", [nonzero], to=onnx_dtype(dt)), axes], keepdims=keep)
    total = b.emit("ReduceSum", [b.emit("Pow", [magnitude, b.const(p, dt)]), axes], keepdims=keep)
    return b.emit("Pow", [total, b.const(1.0 / p, dt)])


@register("logsumexp")
def _logsumexp(b, node):
    """max + log(sum(exp(x - max))): stable where ONNX's ReduceLogSumExp may overflow."""
    x = node.args[0]
    keep = int(bool(arg(node, 2, "keepdim", False)))
    axes = _axes(b, node, x, 1)
    src = b.value(x)
    if dtype_of(x) != dtype_of(node):
        src = b.emit("Cast", [src], to=onnx_dtype(dtype_of(node)))
    peak = b.emit("ReduceMax", [src, axes], keepdims=1)
    # An all -inf slice would give -inf - -inf = nan: its max is replaced by 0 there.
    finite = b.emit("IsInf", [peak])
    peak = b.emit("Where", [finite, b.const(0.0, dtype_of(node)), peak])
    total = b.emit("ReduceSum", [b.emit("Exp", [b.emit("Sub", [src, peak])]), axes], keepdims=keep)
    if not keep:
        peak = b.emit("Squeeze", [peak, axes])
    return b.emit("Add", [b.emit("Log", [total]), peak])


@register("any", "all")
def _any_all(b, node):
    """Any/all nonzero as ReduceMax/ReduceMin over 0/1 ints (opset 18 reduces no bool)."""
    x = node.args[0]
    keep = int(bool(arg(node, 2, "keepdim", False)))
    axes = _axes(b, node, x, 1)
    truth = b.emit("Cast", [b.value(x)], to=TensorProto.BOOL)
    as_int = b.emit("Cast", [truth], to=TensorProto.INT32)
    kind = "ReduceMax" if node.target.name == "any" else "ReduceMin"
    return b.emit("Cast", [b.emit(kind, [as_int, axes], keepdims=keep)], to=TensorProto.BOOL)


@register("_class_nll")
def _class_nll(b, node):
    """``(nll, smoothing term, target weight, row log-sum-exp)`` of nll_loss / cross_entropy: the
    target's (log-)probability gathered on the class dim, weighted, 0 where the target is ignored.
    The log-sum-exp (the op's output for its backward) is emitted as ReduceLogSumExp and pruned
    with the other unread results unless a graph reads it."""
    x, target, weight, ignore_index, log_probs, smooth = node.args[:6]
    if smooth:
        raise UnsupportedOp("cross_entropy with label_smoothing")
    dt = dtype_of(node.args[0])
    scores = b.value(x)
    logp = scores if log_probs else b.emit("LogSoftmax", [scores], axis=1)
    t = b.value(target)
    valid = b.emit("Not", [b.emit("Equal", [t, b.const(np.array(int(ignore_index), dtype=np.int64))])])
    safe = b.emit("Where", [valid, t, b.const(np.array(0, dtype=np.int64))])
    axis1 = b.const(np.array([1], dtype=np.int64))
    picked = b.emit("GatherElements", [logp, b.emit("Unsqueeze", [safe, axis1])], axis=1)
    picked = b.emit("Squeeze", [picked, axis1])
    zero = b.const(0.0, dt)
    if weight is None:
        weights = b.emit("Cast", [valid], to=onnx_dtype(dt))
    else:
        weights = b.emit("Where", [valid, b.emit("Gather", [b.value(weight), safe], axis=0), zero])
    nll = b.emit("Mul", [b.emit("Neg", [picked]), weights])
    empty = np.zeros((0,), dtype=np.float32 if str(dt).endswith("float32") else np.float64)
    if log_probs:
        lse = b.const(empty)
    else:
        # NaN where the row's max is infinite (the op's contract, PyTorch's log_softmax)
        total = b.emit("ReduceLogSumExp", [scores, axis1], keepdims=0)
        top = b.emit("ReduceMax", [scores, axis1], keepdims=0)
        lse = b.emit("Where", [b.emit("IsInf", [top]), b.const(float("nan"), dt), total])
    return [nll, b.const(empty), weights, lse]

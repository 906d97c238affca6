"""``torch.distributed.nn.functional``: collectives as autograd functions.

Each returns new tensors (the inputs are left alone) and its backward is the adjoint
collective: all_reduce <-> all_reduce (with the same op, as PyTorch's), broadcast <-> reduce to
the source, all_gather <-> reduce_scatter, gather <-> scatter, all_to_all <-> all_to_all back.
Used e.g. by contrastive losses that gather every rank's embeddings with their gradients.
"""

from __future__ import annotations

import ember
from ember.autograd import Function

from .. import _collectives as C
from .. import _groups
from .._backend import ReduceOp

__all__ = ["all_gather", "all_reduce", "all_to_all", "all_to_all_single", "broadcast", "gather", "reduce",
           "reduce_scatter", "scatter"]


def _rank(group) -> int:
    return _groups.get_rank(group)


def _size(group) -> int:
    return _groups.get_world_size(group)


class _Broadcast(Function):
    @staticmethod
    def forward(ctx, src, group, tensor):
        ctx.src, ctx.group = src, group
        out = tensor.clone()
        C.broadcast(out, src, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        # every rank's output came from src's input: src's gradient is their sum
        total = _Reduce.apply(ctx.src, ReduceOp.SUM, ctx.group, grad)
        if _groups.get_global_rank(ctx.group, _rank(ctx.group)) != ctx.src:
            total = ember.zeros_like(total)
        return None, None, total


class _Reduce(Function):
    @staticmethod
    def forward(ctx, dst, op, group, tensor):
        ctx.dst, ctx.group = dst, group
        out = tensor.clone()
        C.reduce(out, dst, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return None, None, None, _Broadcast.apply(ctx.dst, ctx.group, grad)


class _AllReduce(Function):
    @staticmethod
    def forward(ctx, op, group, tensor):
        ctx.op, ctx.group = op, group
        out = tensor.clone().contiguous()
        C.all_reduce(out, op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return None, None, _AllReduce.apply(ctx.op, ctx.group, grad)


class _AllGather(Function):
    @staticmethod
    def forward(ctx, group, tensor):
        ctx.group = group
        tensor = tensor.contiguous()
        outs = [ember.empty_like(tensor) for _ in range(_size(group))]
        C.all_gather(outs, tensor, group=group)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        # this rank's input reached every rank's output list: its gradient sums their pieces
        out = ember.empty_like(grads[_rank(ctx.group)])
        C.reduce_scatter(out, [g.contiguous() for g in grads], op=ReduceOp.SUM, group=ctx.group)
        return None, out


class _ReduceScatter(Function):
    @staticmethod
    def forward(ctx, op, group, output, *inputs):
        ctx.group = group
        out = ember.empty_like(output)
        C.reduce_scatter(out, [t.contiguous() for t in inputs], op=op, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return (None, None, None, *_AllGather.apply(ctx.group, grad))


class _Gather(Function):
    @staticmethod
    def forward(ctx, dst, group, tensor):
        ctx.dst, ctx.group = dst, group
        tensor = tensor.contiguous()
        outs = [ember.zeros_like(tensor) for _ in range(_size(group))]
        mine = _groups.get_global_rank(group, _rank(group)) == dst
        C.gather(tensor, outs if mine else None, dst, group=group)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        return None, None, _Scatter.apply(ctx.dst, ctx.group, *grads)


class _Scatter(Function):
    @staticmethod
    def forward(ctx, src, group, *tensors):
        ctx.src, ctx.group = src, group
        if any(t.shape != tensors[0].shape for t in tensors):
            raise ValueError("scatter: every tensor of the list must have the same shape")
        out = ember.zeros_like(tensors[0])
        mine = _groups.get_global_rank(group, _rank(group)) == src
        C.scatter(out, [t.contiguous() for t in tensors] if mine else None, src, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return (None, None, *_Gather.apply(ctx.src, ctx.group, grad))


class _AllToAll(Function):
    @staticmethod
    def forward(ctx, group, outputs, *tensors):
        ctx.group = group
        ctx.shapes = [t.shape for t in tensors]
        outs = [ember.empty_like(o) for o in outputs]
        C.all_to_all(outs, [t.contiguous() for t in tensors], group=group)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        back = [ember.empty(shape, dtype=grads[0].dtype, device=grads[0].device) for shape in ctx.shapes]
        return (None, None, *_AllToAll.apply(ctx.group, back, *grads))


class _AllToAllSingle(Function):
    @staticmethod
    def forward(ctx, group, output, output_split_sizes, input_split_sizes, tensor):
        ctx.group, ctx.shape = group, tensor.shape
        ctx.splits = (input_split_sizes, output_split_sizes)  # the way back
        out = ember.empty_like(output)
        C.all_to_all_single(out, tensor.contiguous(), output_split_sizes, input_split_sizes, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        back = ember.empty(ctx.shape, dtype=grad.dtype, device=grad.device)
        out_splits, in_splits = ctx.splits
        return None, None, None, None, _AllToAllSingle.apply(ctx.group, back, out_splits, in_splits,
                                                             grad.contiguous())


def broadcast(tensor, src, group=None):
    """``src``'s tensor on every rank; the gradient flows back to ``src``."""
    return _Broadcast.apply(src, group, tensor)


def gather(tensor, dst=0, group=None):
    """Every rank's tensor on ``dst`` (a tuple; zeros elsewhere)."""
    return _Gather.apply(dst, group, tensor)


def scatter(tensors, src=0, group=None):
    """This rank's piece of ``src``'s list."""
    return _Scatter.apply(src, group, *tensors)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None):
    return _Reduce.apply(dst, op, group, tensor)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None):
    """The reduction of every rank's ``input_list[rank]`` (a new tensor shaped as ``output``)."""
    return _ReduceScatter.apply(op, group, output, *input_list)


def all_gather(tensor, group=None):
    """Every rank's tensor, as a tuple in rank order."""
    return _AllGather.apply(group, tensor)


def all_to_all(output_tensor_list, input_tensor_list, group=None):
    return _AllToAll.apply(group, output_tensor_list, *input_tensor_list)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None):
    return _AllToAllSingle.apply(group, output, output_split_sizes, input_split_sizes, input)


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """The reduction over the ranks, as a new tensor; its backward all-reduces the gradient."""
    return _AllReduce.apply(op, group, tensor)

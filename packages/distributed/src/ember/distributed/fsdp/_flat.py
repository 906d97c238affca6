"""One all-gather and one reduce-scatter per ``fully_shard`` call, as FSDP2's flat buffers do.

The parameters a ``fully_shard`` call manages are gathered together: every rank copies its
shards (each padded to the longest ``torch.chunk`` piece, so every rank contributes the same
number of elements) back to back into one buffer, one ``all_gather_into_tensor`` collects all
ranks' buffers, and each whole parameter is copied out of the rank-major result. Gradients go
the other way in one ``reduce_scatter_tensor``. Fewer, larger collectives than one per parameter,
and the gather can start early (``start_gather``, ``async_op``) so it overlaps other work: the
prefetch of the next module's parameters.

Used when the layout allows it: a 1-D mesh and ``Shard(0)`` for every parameter (HSDP and custom
shard placements take the per-parameter path in ``_unshard``).
"""

from __future__ import annotations

import ember
from ember.autograd import Function

from .. import _collectives as C
from ..tensor._dtensor import DTensor
from ..tensor._layout import chunk_bounds
from ..tensor._placements import Shard


def eligible(params) -> bool:
    if not params:
        return False
    mesh = params[0].device_mesh
    return (mesh.ndim == 1 and all(p.device_mesh is mesh and tuple(p.placements) == (Shard(0),) for p in params)
            and len({p.dtype for p in params}) == 1 and all(p.dim() >= 1 for p in params))


class _Slot:
    """Where one parameter sits in the flat buffers."""

    __slots__ = ("param", "rows", "row", "longest", "offset", "mine")

    def __init__(self, param, pieces: int, me: int, offset: int):
        self.param = param
        self.rows = param.shape[0]
        self.row = param.numel() // self.rows if self.rows else 0
        self.longest = -(-self.rows // pieces) if self.rows else 0
        self.offset = offset
        start, end = chunk_bounds(self.rows, pieces, me)
        self.mine = end - start

    @property
    def padded(self) -> int:
        return self.longest * self.row


class PendingGather:
    """An all-gather in flight; ``result()`` waits and returns the whole parameters."""

    def __init__(self, flat, work, out, dtype):
        self.flat, self.work, self.out, self.dtype = flat, work, out, dtype

    def wait(self) -> None:
        if self.work is not None:
            self.work.wait()
            self.work = None

    def result(self) -> list:
        self.wait()
        return self.flat._copy_out(self.out)


class FlatParams:
    """The flat layout of one ``fully_shard`` call's (sharded) parameters."""

    def __init__(self, params):
        self.params = list(params)
        self.mesh = self.params[0].device_mesh
        self.group = self.mesh.get_group(0)
        self.pieces = self.mesh.size(0)
        me = self.mesh.get_coordinate()[0]
        self.slots, offset = [], 0
        for p in self.params:
            slot = _Slot(p, self.pieces, me, offset)
            self.slots.append(slot)
            offset += slot.padded
        self.total = offset

    def start_gather(self, dtype=None, async_op: bool = True) -> PendingGather:
        dtype = dtype or self.params[0].dtype
        send = ember.zeros(self.total, dtype=dtype)
        for slot in self.slots:
            if slot.mine:
                send[slot.offset:slot.offset + slot.mine * slot.row].copy_(slot.param._local.reshape(-1))
        out = ember.empty(self.total * self.pieces, dtype=dtype)
        work = C.all_gather_single(out, send, group=self.group, async_op=async_op)
        return PendingGather(self, work, out, dtype)

    def _copy_out(self, out) -> list:
        by_rank = out.view(self.pieces, self.total)
        fulls = []
        for slot in self.slots:
            p = slot.param
            piece = by_rank[:, slot.offset:slot.offset + slot.padded]
            full = piece.reshape(self.pieces * slot.longest, *p.shape[1:])
            if self.pieces == 1 and len(self.slots) > 1:
                full = full.clone()  # its own storage: saved-tensor hooks tell parameters apart by it
            fulls.append(full[:slot.rows] if self.pieces * slot.longest != slot.rows else full)
        return fulls

    def reduce_scatter(self, grads, dtype) -> list:
        """Each whole gradient (``None``: zeros) -> this rank's shard of the group's sum."""
        inp = ember.zeros(self.pieces, self.total, dtype=dtype)
        for slot, grad in zip(self.slots, grads):
            if grad is None or not slot.padded:
                continue
            grad = grad.to(dtype) if grad.dtype != dtype else grad
            if self.pieces * slot.longest != slot.rows:
                padded = ember.zeros(self.pieces * slot.longest, *grad.shape[1:], dtype=dtype)
                padded[:slot.rows].copy_(grad)
                grad = padded
            inp[:, slot.offset:slot.offset + slot.padded].copy_(grad.reshape(self.pieces, slot.padded))
        out = ember.empty(self.total, dtype=dtype)
        C.reduce_scatter_single(out, inp.view(-1), group=self.group)
        return [out[slot.offset:slot.offset + slot.mine * slot.row].view(slot.mine, *slot.param.shape[1:])
                for slot in self.slots]

    def shard_grads(self, grads, reduce_dtype) -> list:
        """The sharded parameters' gradients (DTensors): the mean over the ranks, as PyTorch's default."""
        dtype = reduce_dtype or self.params[0].dtype
        out = []
        for p, piece in zip(self.params, self.reduce_scatter(grads, dtype)):
            piece = piece.div(self.pieces)
            if piece.dtype != p.dtype:
                piece = piece.to(p.dtype)
            out.append(DTensor._wrap(piece, self.mesh, p.placements, p.shape))
        return out


class UnshardFlat(Function):
    """``apply(*sharded_params, state)`` -> the whole parameters (one all-gather, or the prefetched
    one); backward: one reduce-scatter of all their gradients (``_fully_shard._State`` decides
    whether to reduce now or to accumulate while gradient sync is off)."""

    @staticmethod
    def forward(ctx, *args):
        state = args[-1]
        ctx.state = state
        return tuple(full.view_as(full) for full in state.take_gathered())

    @staticmethod
    def backward(ctx, *grads):
        return (*ctx.state.grads_for_shards(grads), None)

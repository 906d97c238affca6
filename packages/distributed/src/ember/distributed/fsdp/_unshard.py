"""Gathering a sharded parameter for compute, and reduce-scattering its gradient back.

``Unshard.apply(param)`` gives the whole parameter as a plain tensor (all-gathered, cast to the
mixed-precision ``param_dtype``); its backward turns the whole gradient into this rank's shard:
a reduce-scatter (in ``reduce_dtype``) averaged over the data-parallel ranks, handed back as a
DTensor with the parameter's placements, so autograd accumulates it into ``param.grad``.
"""

from __future__ import annotations

import ember
from ember.autograd import Function

from ..tensor._dtensor import DTensor
from ..tensor._layout import redistribute_local
from ..tensor._placements import Partial, Replicate


def gather_full(param: DTensor, dtype):
    local = param._local if dtype is None or param._local.dtype == dtype else param._local.to(dtype)
    mesh = param.device_mesh
    return redistribute_local(local, param._shape, mesh, param.placements, [Replicate()] * mesh.ndim)


class Unshard(Function):
    @staticmethod
    def forward(ctx, param, state):
        ctx.param_meta = (param.device_mesh, param.placements, param._shape, param.dtype)
        ctx.state = state
        full = gather_full(param, state.mp.param_dtype)
        return full if full is not param._local else full.view_as(full)

    @staticmethod
    def backward(ctx, grad):
        mesh, placements, shape, dtype = ctx.param_meta
        state = ctx.state
        state.forget_regathered()
        reduce_dtype = state.mp.reduce_dtype or state.mp.param_dtype
        if reduce_dtype is not None and grad.dtype != reduce_dtype:
            grad = grad.to(reduce_dtype)
        grad = grad.contiguous()
        piece = redistribute_local(grad, shape, mesh, [Partial()] * mesh.ndim, placements)
        piece = piece.div(mesh.size())  # the data-parallel mean, as PyTorch's default
        if piece.dtype != dtype:
            piece = piece.to(dtype)
        return DTensor._wrap(piece, mesh, placements, shape), None


def pack_unsharded(state):
    """saved_tensors_hooks for reshard_after_forward: a tensor saved for backward that is (a view
    of) a gathered parameter is kept as a recipe and gathered again when backward needs it."""
    storages = {id(full._storage): (param, full) for param, full in state.unsharded.values()}

    def pack(t):
        found = storages.get(id(t._storage))
        if found is None:
            return t
        param, _ = found
        return _Regather(state, param, t._shape, t._stride, t._offset)

    def unpack(packed):
        return packed.load() if isinstance(packed, _Regather) else packed

    return pack, unpack


class _Regather:
    __slots__ = ("state", "param", "geometry")

    def __init__(self, state, param, shape, stride, offset):
        self.state, self.param, self.geometry = state, param, (shape, stride, offset)

    def load(self):
        full = self.state.regathered.get(id(self.param))
        if full is None and self.state.flat is not None:
            self.state.regather()  # every parameter of the module in one all-gather
            full = self.state.regathered[id(self.param)]
        elif full is None:
            full = gather_full(self.param, self.state.mp.param_dtype)
            self.state.regathered[id(self.param)] = full
        shape, stride, offset = self.geometry
        return ember.as_strided(full, shape, stride, offset)

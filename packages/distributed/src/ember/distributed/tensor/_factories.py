"""DTensor factories (``ember.distributed.tensor.ones(4, 6, device_mesh=mesh, placements=[Shard(0)])``)."""

from __future__ import annotations

import ember

from ..device_mesh import _mesh_resources
from ._dtensor import DTensor, check_placements
from ._layout import local_shape, redistribute_local
from ._placements import Partial, Replicate


def _size(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (list, tuple, ember.Size)):
        size = tuple(size[0])
    return tuple(int(n) for n in size)


def _make(fill, size, dtype, requires_grad, device_mesh, placements, random: bool = False):
    shape = _size(size)
    mesh = device_mesh if device_mesh is not None else _mesh_resources.get_current_mesh()
    placements = check_placements(mesh, placements or [Replicate()] * mesh.ndim, len(shape))
    if any(isinstance(p, Partial) for p in placements):
        raise RuntimeError("DTensor factories do not take Partial placements")
    device = mesh.device_type
    if random:
        # the whole tensor drawn on every rank (the same seed everywhere), this rank's piece kept
        whole = fill(shape, dtype=dtype, device=device)
        local = redistribute_local(whole, shape, mesh, [Replicate()] * mesh.ndim, placements).contiguous()
    else:
        local = fill(local_shape(shape, mesh, placements), dtype=dtype, device=device)
    out = DTensor._wrap(local, mesh, placements, shape)
    if requires_grad:
        out.requires_grad_(True)
    return out


def ones(*size, requires_grad=False, dtype=None, layout=None, device_mesh=None, placements=None):
    return _make(ember.ones, size, dtype, requires_grad, device_mesh, placements)


def zeros(*size, requires_grad=False, dtype=None, layout=None, device_mesh=None, placements=None):
    return _make(ember.zeros, size, dtype, requires_grad, device_mesh, placements)


def empty(*size, requires_grad=False, dtype=None, layout=None, device_mesh=None, placements=None):
    return _make(ember.empty, size, dtype, requires_grad, device_mesh, placements)


def full(size, fill_value, *, requires_grad=False, dtype=None, layout=None, device_mesh=None, placements=None):
    def fill(shape, dtype, device):
        return ember.full(shape, fill_value, dtype=dtype, device=device)

    return _make(fill, (size,), dtype, requires_grad, device_mesh, placements)


def rand(*size, requires_grad=False, dtype=None, layout=None, device_mesh=None, placements=None):
    return _make(ember.rand, size, dtype, requires_grad, device_mesh, placements, random=True)


def randn(*size, requires_grad=False, dtype=None, layout=None, device_mesh=None, placements=None):
    return _make(ember.randn, size, dtype, requires_grad, device_mesh, placements, random=True)

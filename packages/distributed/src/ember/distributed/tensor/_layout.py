"""Where a DTensor's pieces lie, and moving a local piece between placements.

Pure helpers on (local tensor, mesh, global shape, placements); ``DTensor`` and the op kernels
build on them. Redistribution goes mesh dimension by mesh dimension: gathering undoes the
innermost (last) mesh dimension first, sharding applies the outermost first, so nested shards of
one tensor dim come out in PyTorch's order.
"""

from __future__ import annotations

import ember
from ember._src.device import device as _device_class

from .. import _collectives as C
from ._placements import Partial, Replicate, Shard


def chunk_bounds(size: int, pieces: int, index: int) -> tuple[int, int]:
    """[start, end) of piece ``index`` when ``torch.chunk`` splits ``size`` into ``pieces``."""
    step = -(-size // pieces) if size else 0
    start = min(index * step, size)
    return start, min(start + step, size)


def contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def local_bounds(shape, mesh, placements, coordinate=None) -> list[tuple[int, int]]:
    """[start, end) per tensor dim of the piece at ``coordinate`` (this rank's by default)."""
    coordinate = mesh.get_coordinate() if coordinate is None else coordinate
    bounds = [(0, n) for n in shape]
    for mesh_dim, p in enumerate(placements):
        if isinstance(p, Shard):
            start, end = bounds[p.dim]
            a, b = chunk_bounds(end - start, mesh.size(mesh_dim), coordinate[mesh_dim])
            bounds[p.dim] = (start + a, start + b)
    return bounds


def local_shape(shape, mesh, placements, coordinate=None) -> tuple:
    return tuple(b - a for a, b in local_bounds(shape, mesh, placements, coordinate))


# -- the device of a DTensor --------------------------------------------------------------
# A DTensor's ``_device`` has type "dtensor": ops on it find the kernel registered under that type
# (``_dispatch``), never a CPU kernel that would read its storage with the global shape. One device
# object per (mesh, placements, local device), so factory ops called with it (``zeros_like``,
# ``new_zeros`` in autograd formulas) know the layout to create and where its pieces live.

_LAYOUTS: list = []
_LAYOUT_INDEX: dict = {}


def dtensor_device(mesh, placements, local_device="cpu"):
    key = (mesh, tuple(placements), str(local_device))
    index = _LAYOUT_INDEX.get(key)
    if index is None:
        index = len(_LAYOUTS)
        _LAYOUTS.append(key)
        _LAYOUT_INDEX[key] = index
    dev = object.__new__(_device_class)
    object.__setattr__(dev, "type", "dtensor")
    object.__setattr__(dev, "index", index)
    return dev


def layout_of_device(dev):
    """(mesh, placements) a "dtensor" device stands for."""
    return _LAYOUTS[dev.index][:2]


def local_device_of(dev):
    """Where the local pieces of DTensors on ``dev`` live ("cpu", "cuda:0", ...)."""
    return ember.device(_LAYOUTS[dev.index][2])


# -- redistribution of one local piece ----------------------------------------------------


def _extent(shape, mesh, placements, mesh_dim: int, tensor_dim: int) -> int:
    """Length along ``tensor_dim`` of the piece this rank holds above ``mesh_dim`` (outer shards)."""
    size = shape[tensor_dim]
    coordinate = mesh.get_coordinate()
    for outer in range(mesh_dim):
        p = placements[outer]
        if isinstance(p, Shard) and p.dim == tensor_dim:
            start, end = chunk_bounds(size, mesh.size(outer), coordinate[outer])
            size = end - start
    return size


def _gather_dim(local, shape, mesh, placements, mesh_dim: int):
    dim = placements[mesh_dim].dim
    group = mesh.get_group(mesh_dim)
    pieces = mesh.size(mesh_dim)
    total = _extent(shape, mesh, placements, mesh_dim, dim)
    longest = -(-total // pieces) if total else 0
    # all_gather needs equal sizes: pad each piece to the longest, trim after.
    padded_shape = list(local.shape)
    padded_shape[dim] = longest
    if list(local.shape) == padded_shape:
        padded = local.contiguous()
    else:
        padded = ember.zeros(padded_shape, dtype=local.dtype, device=local.device)
        if local.shape[dim]:
            padded.narrow(dim, 0, local.shape[dim]).copy_(local)
    if dim == 0:
        out = ember.empty([pieces * longest, *padded_shape[1:]], dtype=local.dtype, device=local.device)
        C.all_gather_single(out, padded, group=group)
        if pieces * longest == total:
            return out
        kept = [out.narrow(0, i * longest, b - a) for i, (a, b) in
                enumerate(chunk_bounds(total, pieces, i) for i in range(pieces))]
        return ember.cat(kept, dim=0)
    out = [ember.empty(padded_shape, dtype=local.dtype, device=local.device) for _ in range(pieces)]
    C.all_gather(out, padded, group=group)
    kept = []
    for i, piece in enumerate(out):
        start, end = chunk_bounds(total, pieces, i)
        kept.append(piece.narrow(dim, 0, end - start))
    return ember.cat(kept, dim=dim)


def _chunk(local, mesh, mesh_dim: int, dim: int):
    start, end = chunk_bounds(local.shape[dim], mesh.size(mesh_dim), mesh.get_coordinate()[mesh_dim])
    return local.narrow(dim, start, end - start).contiguous()


def _red_op(partial):
    return getattr(C.ReduceOp, partial.reduce_op.upper())


def _partition(local, partial, first: bool):
    """Replicate -> Partial: this rank's term of the value (the first rank of the line holds the
    value; where the reduction of equal values is that value, every rank does)."""
    op = partial.reduce_op
    if first or op in ("avg", "max", "min", "band", "bor"):
        return local
    if op == "product":
        return ember.ones_like(local)
    return ember.zeros_like(local)  # sum, bxor


def _reduce_scatter_dim0(local, mesh, mesh_dim: int, op=C.ReduceOp.SUM):
    """Partial -> Shard(0) in one reduce-scatter (padded to even pieces)."""
    pieces = mesh.size(mesh_dim)
    total = local.shape[0]
    longest = -(-total // pieces) if total else 0
    if longest * pieces != total:
        padded = ember.zeros([longest * pieces, *local.shape[1:]], dtype=local.dtype, device=local.device)
        padded.narrow(0, 0, total).copy_(local)
    else:
        padded = local.contiguous()
    out = ember.empty([longest, *local.shape[1:]], dtype=local.dtype, device=local.device)
    C.reduce_scatter_single(out, padded, op=op, group=mesh.get_group(mesh_dim))
    start, end = chunk_bounds(total, pieces, mesh.get_coordinate()[mesh_dim])
    return out.narrow(0, 0, end - start).contiguous() if end - start != longest else out


def redistribute_local(local, shape, mesh, current, target):
    """This rank's piece of the global tensor ``shape`` laid out as ``target`` instead of ``current``."""
    current, target = list(current), tuple(target)
    if tuple(current) == target:
        return local
    # Partial -> Shard(0) on a 1-D mesh: one reduce-scatter instead of all-reduce + chunk.
    if mesh.ndim == 1 and isinstance(current[0], Partial) and target[0] == Shard(0):
        return _reduce_scatter_dim0(local, mesh, 0, _red_op(current[0]))
    # Gather: innermost mesh dimension first, for every dimension whose placement changes - and
    # for a shard nested inside a changing outer mesh dimension's shard of the same tensor dim
    # ([Replicate(), Shard(0)] <-> [Shard(0), Shard(0)]: the inner piece is a piece of the outer
    # one, so it is gathered first and cut again after).
    changed = [current[m] != target[m] for m in range(mesh.ndim)]
    for mesh_dim in reversed(range(mesh.ndim)):
        now, wanted = current[mesh_dim], target[mesh_dim]
        nested = isinstance(now, Shard) and any(
            changed[outer] and now in (current[outer], target[outer]) for outer in range(mesh_dim))
        if not nested and (now == wanted or (isinstance(wanted, Partial) and isinstance(now, Replicate))):
            continue
        if isinstance(now, Shard):
            local = _gather_dim(local, shape, mesh, current, mesh_dim)
        elif isinstance(now, Partial):
            local = local.clone()
            C.all_reduce(local, op=_red_op(now), group=mesh.get_group(mesh_dim))
        current[mesh_dim] = Replicate()
    # Shard (outermost mesh dimension first) or hand the value to one rank of the line (Partial).
    for mesh_dim in range(mesh.ndim):
        wanted = target[mesh_dim]
        if current[mesh_dim] == wanted:
            continue
        if isinstance(wanted, Shard):
            local = _chunk(local, mesh, mesh_dim, wanted.dim)
        elif isinstance(wanted, Partial):
            # Replicate -> Partial: the first rank of the line keeps the value, the others the
            # reduction's neutral term (zeros for a sum).
            local = _partition(local, wanted, mesh.get_coordinate()[mesh_dim] == 0)
        current[mesh_dim] = wanted
    return local

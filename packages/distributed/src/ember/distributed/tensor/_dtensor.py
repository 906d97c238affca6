"""``DTensor``: a global tensor laid out over a ``DeviceMesh`` by one placement per mesh dimension.

``Shard(d)``: split along tensor dim ``d`` as ``torch.chunk`` splits (pieces of ceil(n / k), the
last ones shorter or empty). ``Replicate()``: every rank holds all of it. ``Partial()``: every
rank holds a summand. Redistribution goes mesh dimension by mesh dimension: gathering undoes the
innermost (last) mesh dimension first, sharding applies the outermost first, so nested shards
of one tensor dim come out in PyTorch's order.

Scope: placements, ``distribute_tensor``, ``from_local``/``to_local``, ``redistribute`` and
``full_tensor``. Operators on DTensors (sharding propagation) are not implemented: a DTensor is
not an ``ember.Tensor``, and arithmetic on it raises ``NotImplementedError``.
"""

from __future__ import annotations

import ember

from .. import _collectives as C
from ..device_mesh import DeviceMesh
from ._placements import Partial, Placement, Replicate, Shard


class _NotSupported(NotImplementedError, AttributeError):
    """An operator DTensor does not implement (an AttributeError too, so ``hasattr`` stays False)."""


def chunk_bounds(size: int, pieces: int, index: int) -> tuple[int, int]:
    """[start, end) of piece ``index`` when ``torch.chunk`` splits ``size`` into ``pieces``."""
    step = -(-size // pieces) if size else 0
    start = min(index * step, size)
    return start, min(start + step, size)


def _check_placements(mesh: DeviceMesh, placements, ndim: int) -> tuple:
    placements = tuple(placements)
    if len(placements) != mesh.ndim:
        raise ValueError(f"`placements` must have the same length as `device_mesh.ndim`! Found placements "
                         f"length: {len(placements)}, and device_mesh.ndim: {mesh.ndim}.")
    normal = []
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(f"placements must be Shard, Replicate or Partial, got {p!r}")
        if isinstance(p, Shard):
            if not -ndim <= p.dim < max(ndim, 1):
                raise IndexError(f"Shard({p.dim}) is out of range for a {ndim}-d tensor")
            p = Shard(p.dim % ndim)
        normal.append(p)
    return tuple(normal)


class DTensor:
    """A distributed tensor: ``to_local()`` is this rank's piece, ``shape`` the global shape."""

    def __init__(self, local, device_mesh: DeviceMesh, placements, shape):
        self._local = local
        self.device_mesh = device_mesh
        self.placements = tuple(placements)
        self._shape = ember.Size(shape) if hasattr(ember, "Size") else tuple(shape)

    # -- construction -------------------------------------------------------------------

    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *, run_check=False, shape=None, stride=None):
        """Wraps this rank's piece; the global shape is ``shape``, or the piece times the mesh."""
        mesh = device_mesh if device_mesh is not None else _default_mesh()
        placements = _check_placements(mesh, placements or [Replicate()] * mesh.ndim, local_tensor.dim())
        if shape is None:
            # As PyTorch: without ``shape`` the pieces are taken to be even (no communication).
            sizes = list(local_tensor.shape)
            for mesh_dim, p in enumerate(placements):
                if isinstance(p, Shard):
                    sizes[p.dim] *= mesh.size(mesh_dim)
            shape = sizes
        return DTensor(local_tensor, mesh, placements, shape)

    def to_local(self, *, grad_placements=None):
        return self._local

    # -- metadata -----------------------------------------------------------------------

    @property
    def shape(self):
        return self._shape

    def size(self, dim=None):
        return self._shape if dim is None else self._shape[dim]

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    @property
    def dtype(self):
        return self._local.dtype

    @property
    def device(self):
        return self._local.device

    def stride(self) -> tuple:
        strides, step = [], 1
        for n in reversed(self._shape):
            strides.append(step)
            step *= n
        return tuple(reversed(strides))

    def __repr__(self):
        return f"DTensor(local_tensor={self._local!r}, device_mesh={self.device_mesh!r}, placements={self.placements})"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise _NotSupported(
            f"DTensor.{name}: ember's DTensor supports placements and redistribution only; operators on "
            "DTensors are not implemented (call .full_tensor() or .to_local())"
        )

    def __array__(self, *args, **kwargs):
        raise NotImplementedError("DTensor: call .full_tensor() or .to_local() first")

    # -- redistribution -----------------------------------------------------------------

    def redistribute(self, device_mesh=None, placements=None, *, async_op=False, forward_dtype=None,
                     backward_dtype=None):
        """The same global tensor with ``placements`` (Shard/Replicate; Partial only as a no-op)."""
        mesh = device_mesh if device_mesh is not None else self.device_mesh
        if mesh != self.device_mesh:
            raise NotImplementedError("Cross device mesh comm not supported yet!")
        target = _check_placements(mesh, placements or [Replicate()] * mesh.ndim, self.ndim)
        for current, wanted in zip(self.placements, target):
            if isinstance(wanted, Partial) and not isinstance(current, Partial):
                raise RuntimeError(f"Can not redistribute from {current} to {wanted}, redistributing to Partial is "
                                   "for internal use only!")
        local = self._local
        placements = list(self.placements)
        # Gather: innermost mesh dimension first, for every dimension whose placement changes.
        for mesh_dim in reversed(range(mesh.ndim)):
            current, wanted = placements[mesh_dim], target[mesh_dim]
            if current == wanted:
                continue
            if isinstance(current, Shard):
                local = self._gather_dim(local, placements, mesh_dim)
            elif isinstance(current, Partial):
                local = local.clone()
                C.all_reduce(local, group=mesh.get_group(mesh_dim))
            placements[mesh_dim] = Replicate()
        # Shard: outermost mesh dimension first.
        for mesh_dim in range(mesh.ndim):
            wanted = target[mesh_dim]
            if isinstance(wanted, Shard) and placements[mesh_dim] != wanted:
                local = self._local_chunk(local, placements, mesh_dim, wanted.dim)
                placements[mesh_dim] = wanted
        return DTensor(local, mesh, target, self._shape)

    def full_tensor(self, *, grad_placements=None):
        """The whole tensor on every rank."""
        return self.redistribute(self.device_mesh, [Replicate()] * self.device_mesh.ndim).to_local()

    def _extent(self, placements, mesh_dim: int, tensor_dim: int) -> int:
        """Length along ``tensor_dim`` of the piece this rank holds above ``mesh_dim`` (outer shards only)."""
        size = self._shape[tensor_dim]
        coordinate = self.device_mesh.get_coordinate()
        for outer in range(mesh_dim):
            p = placements[outer]
            if isinstance(p, Shard) and p.dim == tensor_dim:
                start, end = chunk_bounds(size, self.device_mesh.size(outer), coordinate[outer])
                size = end - start
        return size

    def _gather_dim(self, local, placements, mesh_dim: int):
        dim = placements[mesh_dim].dim
        group = self.device_mesh.get_group(mesh_dim)
        pieces = self.device_mesh.size(mesh_dim)
        total = self._extent(placements, mesh_dim, dim)
        longest = -(-total // pieces) if total else 0
        # all_gather needs equal sizes: pad each piece to the longest, trim after.
        padded_shape = list(local.shape)
        padded_shape[dim] = longest
        padded = ember.zeros(padded_shape, dtype=local.dtype)
        if local.shape[dim]:
            padded.narrow(dim, 0, local.shape[dim]).copy_(local)
        out = [ember.empty(padded_shape, dtype=local.dtype) for _ in range(pieces)]
        C.all_gather(out, padded, group=group)
        kept = []
        for i, piece in enumerate(out):
            start, end = chunk_bounds(total, pieces, i)
            kept.append(piece.narrow(dim, 0, end - start))
        return ember.cat(kept, dim=dim)

    def _local_chunk(self, local, placements, mesh_dim: int, dim: int):
        total = local.shape[dim]
        index = self.device_mesh.get_coordinate()[mesh_dim]
        start, end = chunk_bounds(total, self.device_mesh.size(mesh_dim), index)
        return local.narrow(dim, start, end - start).contiguous()


def _coordinate_of(layout, rank: int):
    if not isinstance(layout, list):
        return [] if layout == rank else None
    for i, sub in enumerate(layout):
        found = _coordinate_of(sub, rank)
        if found is not None:
            return [i, *found]
    return None


def _default_mesh() -> DeviceMesh:
    from .. import _world
    from ..device_mesh import init_device_mesh

    return init_device_mesh("cpu", (_world.get_world_size(),))


def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0):
    """Lays ``tensor`` (the same on every rank, or taken from ``src_data_rank``) out over the mesh."""
    mesh = device_mesh if device_mesh is not None else _default_mesh()
    placements = _check_placements(mesh, placements or [Replicate()] * mesh.ndim, tensor.dim())
    if any(isinstance(p, Partial) for p in placements):
        raise RuntimeError("distribute_tensor does not take Partial placements")
    full = tensor.detach().contiguous().clone()
    if src_data_rank is not None:
        # Along mesh dim 0, then 1, ...: after step d every rank that agrees with the source's
        # coordinates past d holds the data, so each line's root at step d+1 has it.
        layout = mesh.mesh.tolist()
        source = _coordinate_of(layout, src_data_rank)
        if source is None:
            raise ValueError(f"src_data_rank {src_data_rank} is not in the mesh {mesh}")
        for mesh_dim, index in enumerate(source):
            C.broadcast(full, group=mesh.get_group(mesh_dim), group_src=index)
    replicated = DTensor(full, mesh, [Replicate()] * mesh.ndim, full.shape)
    return replicated.redistribute(mesh, placements)

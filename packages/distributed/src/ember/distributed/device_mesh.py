"""``DeviceMesh`` and ``init_device_mesh`` (``torch.distributed.device_mesh``).

A mesh lays the world's ranks out as an n-dimensional array; each dimension gets one process
group per line of ranks along it (e.g. ``(dp=2, tp=2)``: ``tp`` groups {0,1} and {2,3}, ``dp``
groups {0,2} and {1,3}). Every rank creates every group in the same order, as ``new_group``
requires; a rank keeps the groups it belongs to. ``mesh["tp"]`` is the 1-D sub-mesh of this
rank's ``tp`` line, reusing that group.
"""

from __future__ import annotations

import numpy as np

import ember

from . import _world

__all__ = ["DeviceMesh", "init_device_mesh"]


class _MeshEnv:
    """The meshes made current by ``with mesh:`` (innermost last), as PyTorch's ``_mesh_resources``."""

    def __init__(self):
        self.mesh_stack: list = []

    def get_current_mesh(self) -> DeviceMesh:
        if not self.mesh_stack:
            raise RuntimeError("No device mesh is currently active!")
        return self.mesh_stack[-1]


_mesh_resources = _MeshEnv()


class DeviceMesh:
    """An n-dimensional layout of ranks with one process group per dimension for this rank.

    ``with mesh:`` makes it the current mesh: DTensor calls given no mesh use it.
    """

    def __init__(self, device_type: str, mesh, *, mesh_dim_names=None, _init_backend: bool = True, _groups=None,
                 _strides=None, _root=None, _root_dims=None):
        if not _world.is_initialized():
            _world.init_process_group()
        layout = np.asarray(mesh.tolist() if isinstance(mesh, ember.Tensor) else mesh, dtype=np.int64)
        if layout.ndim == 0:
            raise ValueError("mesh must have at least one dimension")
        if sorted(layout.reshape(-1).tolist()) != sorted(set(layout.reshape(-1).tolist())):
            raise RuntimeError(f"DeviceMesh cannot have duplicate values, but found {layout.tolist()}")
        world = _world.get_world_size()
        if layout.max() >= world or layout.min() < 0:
            raise RuntimeError(f"DeviceMesh ranks {layout.tolist()} do not fit a world of size {world}")
        if mesh_dim_names is not None:
            mesh_dim_names = tuple(mesh_dim_names)
            if len(mesh_dim_names) != layout.ndim:
                raise RuntimeError(
                    f"mesh_dim_names {mesh_dim_names} must have one name per mesh dimension ({layout.ndim})"
                )
            if len(set(mesh_dim_names)) != len(mesh_dim_names):
                raise RuntimeError(f"Each mesh_dim_name must be unique, got {mesh_dim_names}")
        self.device_type = device_type
        self._layout = layout
        # Row-major strides of each dimension in the mesh it was cut from (its own for a new mesh);
        # only shown by repr, as PyTorch's layout strides are.
        self._strides = tuple(_strides) if _strides is not None else tuple(
            int(np.prod(layout.shape[d + 1:])) for d in range(layout.ndim))
        self.mesh_dim_names = mesh_dim_names
        self._rank = _world.get_rank()
        found = np.argwhere(layout == self._rank)
        self._coordinate = [int(c) for c in found[0]] if len(found) else None
        self._groups = list(_groups) if _groups is not None else (self._make_groups() if _init_backend else [])
        # The mesh this one was cut from and the dims of it this one keeps (``_flatten`` makes the
        # groups of every rank's slice, so it needs the whole layout); flattened dims by name.
        self._root = _root if _root is not None else self
        self._root_dims = list(_root_dims) if _root_dims is not None else list(range(layout.ndim))
        self._flattened: dict = {}

    @staticmethod
    def from_group(group, device_type: str, mesh=None, *, mesh_dim_names=None):
        """A mesh on existing process groups: one group (a 1-D mesh over its ranks, or ``mesh``),
        or one group per dimension of ``mesh`` (this rank's line along each)."""
        if not isinstance(group, (list, tuple)):
            ranks = _world.get_process_group_ranks(group)
            layout = ranks if mesh is None else (mesh.tolist() if isinstance(mesh, ember.Tensor) else mesh)
            if np.asarray(layout).ndim != 1 or sorted(np.asarray(layout).tolist()) != sorted(ranks):
                raise ValueError(f"mesh {layout} must be 1-D and hold the ranks of the group {ranks}")
            return DeviceMesh(device_type, layout, mesh_dim_names=mesh_dim_names, _groups=[group])
        groups = list(group)
        if mesh is None:
            raise ValueError("Expects mesh to be specified if a list of groups is passed")
        layout = np.asarray(mesh.tolist() if isinstance(mesh, ember.Tensor) else mesh, dtype=np.int64)
        if layout.ndim != len(groups):
            raise ValueError(f"Expects as many groups ({len(groups)}) as mesh dimensions ({layout.ndim})")
        return DeviceMesh(device_type, layout, mesh_dim_names=mesh_dim_names, _groups=groups)

    def _flatten(self, mesh_dim_name=None):
        """This mesh's dims as one (``mesh["dp", "tp"]._flatten("dp_tp")``): a 1-D mesh over this rank's
        slice, reachable afterwards as ``root["dp_tp"]``. Every rank makes the group of every
        slice of the root, in the same order (``new_group``'s rule)."""
        root = self._root
        if mesh_dim_name is None:
            if self.mesh_dim_names is None:
                raise RuntimeError("Cannot flatten a DeviceMesh without mesh_dim_names unless given a name")
            mesh_dim_name = "_".join(self.mesh_dim_names)
        if mesh_dim_name in root._flattened:
            return root._flattened[mesh_dim_name]
        if root.mesh_dim_names is not None and mesh_dim_name in root.mesh_dim_names:
            raise RuntimeError(f"{mesh_dim_name} already exists for submesh of the {root}. The mesh_dim_names of "
                               "submesh and flattened mesh are conflicting.")
        if self.ndim == 1 and self is not root:
            flat_groups = [self._groups[0]]
        else:
            dims = self._root_dims
            rest = [d for d in range(root.ndim) if d not in dims]
            lines = np.transpose(root._layout, rest + dims).reshape(-1, int(self._layout.size)).tolist()
            mine = None
            for line in lines:
                group = _world.new_group(line)
                if self._rank in line:
                    mine = group
            flat_groups = [mine]
        flat = DeviceMesh(self.device_type, self._layout.reshape(-1), mesh_dim_names=(mesh_dim_name,),
                          _groups=flat_groups)
        root._flattened[mesh_dim_name] = flat
        return flat

    def _make_groups(self) -> list:
        groups = []
        for dim in range(self._layout.ndim):
            mine = None
            moved = np.moveaxis(self._layout, dim, -1).reshape(-1, self._layout.shape[dim])
            for line in moved.tolist():
                group = _world.new_group(line)
                if self._rank in line:
                    mine = group
            groups.append(mine)
        return groups

    @property
    def mesh(self):
        return ember.tensor(self._layout.tolist(), dtype=ember.int64)

    @property
    def ndim(self) -> int:
        return self._layout.ndim

    @property
    def shape(self) -> tuple:
        return tuple(self._layout.shape)

    def size(self, mesh_dim=None) -> int:
        if mesh_dim is None:
            return int(self._layout.size)
        return int(self._layout.shape[self._dim(mesh_dim)])

    def _dim(self, mesh_dim) -> int:
        if isinstance(mesh_dim, str):
            if self.mesh_dim_names is None or mesh_dim not in self.mesh_dim_names:
                raise KeyError(f"Mesh dimension '{mesh_dim}' does not exist. Available: {self.mesh_dim_names}")
            return self.mesh_dim_names.index(mesh_dim)
        if not -self.ndim <= mesh_dim < self.ndim:
            raise IndexError(f"mesh_dim {mesh_dim} out of range for a {self.ndim}-d mesh")
        return mesh_dim % self.ndim

    def get_group(self, mesh_dim=None):
        """The process group of this rank along ``mesh_dim`` (optional on a 1-D mesh)."""
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError(
                    f"Found the DeviceMesh have {self.ndim} dimensions. Optional kwarg `mesh_dim` needs to be "
                    "specified when device_mesh.ndim > 1."
                )
            mesh_dim = 0
        return self._groups[self._dim(mesh_dim)]

    def get_all_groups(self) -> list:
        return list(self._groups)

    def get_rank(self) -> int:
        return self._rank

    def get_local_rank(self, mesh_dim=None) -> int:
        """This rank's index along ``mesh_dim``."""
        if mesh_dim is None and self.ndim != 1:
            raise RuntimeError("Optional kwarg `mesh_dim` needs to be specified when device_mesh.ndim > 1.")
        return _world.get_rank(self.get_group(mesh_dim))

    def get_coordinate(self):
        """This rank's coordinates in the mesh, or None when it is not part of it."""
        return None if self._coordinate is None else tuple(self._coordinate)  # PyTorch 2.13: a tuple

    def __enter__(self) -> DeviceMesh:
        _mesh_resources.mesh_stack.append(self)
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        _mesh_resources.mesh_stack.pop()

    def __getitem__(self, mesh_dim_names):
        names = (mesh_dim_names,) if isinstance(mesh_dim_names, str) else tuple(mesh_dim_names)
        flattened = self._root._flattened
        if len(names) == 1 and names[0] in flattened and (self.mesh_dim_names is None
                                                         or names[0] not in self.mesh_dim_names):
            return flattened[names[0]]
        if self.mesh_dim_names is None:
            raise RuntimeError("Cannot slice a DeviceMesh without mesh_dim_names")
        dims = [self._dim(name) for name in names]
        if dims != sorted(dims):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. Mesh dim indices should be in ascending order.")
        if self._coordinate is None:
            raise RuntimeError("This rank is not part of the mesh it slices")
        # Fix the other dimensions at this rank's coordinate.
        index = tuple(slice(None) if d in dims else self._coordinate[d] for d in range(self.ndim))
        sub = self._layout[index]
        return DeviceMesh(self.device_type, sub, mesh_dim_names=names, _groups=[self._groups[d] for d in dims],
                          _strides=[self._strides[d] for d in dims], _root=self._root,
                          _root_dims=[self._root_dims[d] for d in dims])

    def __eq__(self, other):
        return (isinstance(other, DeviceMesh) and self._layout.shape == other._layout.shape
                and bool((self._layout == other._layout).all()) and self.mesh_dim_names == other.mesh_dim_names)

    def __hash__(self):
        return hash((self._layout.tobytes(), self._layout.shape, self.mesh_dim_names))

    def __repr__(self):
        # PyTorch's form: sizes (named when the dims are), then each dim's stride, () for size 1.
        shape = self._layout.shape
        if self.mesh_dim_names:
            sizes = "(" + ", ".join(f"{n}={s}" for n, s in zip(self.mesh_dim_names, shape)) + ")"
        else:
            sizes = repr(tuple(shape))
        strides = tuple(() if size == 1 else stride for size, stride in zip(shape, self._strides))
        return f"DeviceMesh({sizes}, '{self.device_type}', stride={strides!r})"


def init_device_mesh(device_type: str, mesh_shape, *, mesh_dim_names=None, backend_override=None) -> DeviceMesh:
    """A mesh of ``mesh_shape`` over ranks ``0 .. prod(mesh_shape) - 1`` in row-major order."""
    mesh_shape = tuple(mesh_shape)
    if mesh_dim_names is not None and len(mesh_dim_names) != len(mesh_shape):
        raise RuntimeError(
            "mesh_shape and mesh_dim_names should have same length! "
            f"Found len(mesh_dim_names): {len(mesh_dim_names)} and len(mesh_shape):{len(mesh_shape)}."
        )
    if device_type not in ("cpu", "cuda"):
        raise RuntimeError(f"ember's process groups serve CPU and CUDA meshes only, got device_type={device_type!r}")
    if not _world.is_initialized():
        _world.init_process_group("nccl" if device_type == "cuda" else None)
    total = int(np.prod(mesh_shape))
    if total != _world.get_world_size():
        raise RuntimeError(
            f"init_device_mesh: mesh shape {mesh_shape} holds {total} ranks but the world has "
            f"{_world.get_world_size()}"
        )
    layout = np.arange(total, dtype=np.int64).reshape(mesh_shape)
    return DeviceMesh(device_type, layout, mesh_dim_names=mesh_dim_names)

"""Process groups and the queries about them: ``ProcessGroup``, ``GroupMember``, ``new_group``,
``new_subgroups``, ``get_rank``/``get_world_size``/..., and the process's distributed state
(``_world``) that ``_world.init_process_group`` fills and ``destroy_process_group`` empties.

Every group runs on an MPI communicator of its own (``new_group``: ``MPI_Comm_create_group`` of
the world's control communicator), so the collectives of different groups never match each other.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from . import _mpi
from ._backend import Backend, backend_label, device_backends, engine_factory
from ._errors import DistBackendError
from ._mpi_engine import MPIEngine
from ._store import PrefixStore
from ._work import Health

if TYPE_CHECKING:
    from ._control import ControlServer, Watch


class _Internal(threading.local):
    cpu = False  # object collectives of an NCCL-only group move their bytes through MPI


_INTERNAL = _Internal()


@contextlib.contextmanager
def internal_cpu():
    """Lets CPU tensors through a group without a CPU backend (its MPI engine carries them)."""
    previous = _INTERNAL.cpu
    _INTERNAL.cpu = True
    try:
        yield
    finally:
        _INTERNAL.cpu = previous


class ProcessGroup:
    """A set of ranks that run collectives together (``torch.distributed.ProcessGroup``).

    ``_engine`` is the group's MPI communicator (CPU tensors, liveness, object collectives);
    ``_devices`` maps device types to backends, whose engines are made on first use.
    """

    def __init__(self, engine: MPIEngine, global_ranks: list[int], devices: dict, name: str, store):
        self._engine = engine
        self._ranks = global_ranks
        self._devices = dict(devices)
        self._backend = backend_label(self._devices)
        self._engines: dict = {}
        self._sync_plans: dict = {}  # (dtype, op number) -> the synchronous all_reduce fast path's plan
        self.group_name = name
        self.group_desc = name
        self.store = store
        # The device ``init_process_group(device_id=...)`` bound the default group to (None: none)
        self.bound_device_id = None

    def rank(self) -> int:
        return self._engine.rank

    def size(self) -> int:
        return self._engine.size

    def name(self) -> str:
        return backend_label(self._devices)  # the backend that runs it ("gloo"), as PyTorch's

    @property
    def pg_name(self) -> str:
        return self.group_name

    def engine_for(self, tensor=None):
        """The engine for ``tensor``'s device type (made on first use)."""
        kind = "cpu" if tensor is None else tensor.device.type
        backend = self._devices.get(kind)
        if backend is None:
            if kind == "cpu" and _INTERNAL.cpu:
                return self._engine
            raise RuntimeError(f"No backend type associated with device type {kind}")
        if kind == "cpu":
            return self._engine
        engine = self._engines.get(kind)
        if engine is None:
            engine = self._engines[kind] = engine_factory(backend, kind)(self)
        return engine

    def _device_engines(self) -> list:
        return list(self._engines.values())

    def __repr__(self):
        return f"ProcessGroup(name={self.group_name!r}, backend={self._backend!r}, ranks={self._ranks})"

    # -- PyTorch's ProcessGroup methods (always asynchronous: each returns a ``Work``), which
    # comm hooks in PyTorch's documentation call: ``process_group.allreduce(t).get_future()``.

    def allreduce(self, tensors, opts=None, op=None):
        """``allreduce(tensors, opts=AllreduceOptions())``, ``allreduce(tensor[s], op)``."""
        from ._collectives import all_reduce

        op = op if op is not None else getattr(opts, "reduceOp", None) if not _is_op(opts) else opts
        tensor = _single("allreduce", tensors)
        return all_reduce(tensor, op=op if op is not None else _sum(), group=self, async_op=True)

    def broadcast(self, tensors, opts=None):
        """``broadcast(tensors, opts=BroadcastOptions())``, ``broadcast(tensor, root)`` (a rank of this group)."""
        from ._collectives import broadcast

        root = opts if isinstance(opts, int) else getattr(opts, "rootRank", 0)
        return broadcast(_single("broadcast", tensors), group=self, async_op=True, group_src=root)

    def allgather(self, output_tensors, input_tensors, opts=None):
        """``allgather([[out per rank]], [input])`` or ``allgather([out per rank], input)``."""
        from ._collectives import all_gather

        if isinstance(input_tensors, (list, tuple)):
            if len(input_tensors) != 1 or len(output_tensors) != 1:
                raise RuntimeError("ProcessGroup.allgather: ember takes one input tensor per rank")
            return all_gather(list(output_tensors[0]), input_tensors[0], group=self, async_op=True)
        return all_gather(list(output_tensors), input_tensors, group=self, async_op=True)

    def barrier(self, opts=None):
        from ._collectives import barrier

        return barrier(group=self, async_op=True)


def _is_op(value) -> bool:
    from ._backend import RedOpType, ReduceOp

    return isinstance(value, (RedOpType, ReduceOp))


def _sum():
    from ._backend import ReduceOp

    return ReduceOp.SUM


def _single(what: str, tensors):
    if isinstance(tensors, (list, tuple)):
        if len(tensors) != 1:
            raise RuntimeError(f"ProcessGroup.{what}: ember takes one tensor per rank, got {len(tensors)}")
        return tensors[0]
    return tensors


class AllreduceOptions:
    """``torch.distributed.AllreduceOptions``: the options of ``ProcessGroup.allreduce``."""

    def __init__(self):
        from ._backend import ReduceOp

        self.reduceOp = ReduceOp.SUM
        self.timeout = None
        self.asyncOp = True


class BroadcastOptions:
    """``torch.distributed.BroadcastOptions``: the options of ``ProcessGroup.broadcast``."""

    def __init__(self):
        self.rootRank = 0
        self.rootTensor = 0
        self.timeout = None
        self.asyncOp = True


class BarrierOptions:
    """``torch.distributed.BarrierOptions``."""

    def __init__(self):
        self.device = None
        self.device_ids = []
        self.timeout = None
        self.asyncOp = True


class GroupMember:
    WORLD = None
    NON_GROUP_MEMBER = -100  # PyTorch's value: what ``new_group`` gives a rank outside the group


def is_non_member(group) -> bool:
    """``group`` is ``GroupMember.NON_GROUP_MEMBER`` (an int, compared by value as PyTorch does)."""
    return type(group) is int and group == GroupMember.NON_GROUP_MEMBER


class group:  # noqa: N801 - PyTorch's name: ``dist.group.WORLD``
    WORLD = None


class _World:
    def __init__(self):
        self.default_pg: ProcessGroup | None = None
        self.groups: list[ProcessGroup] = []
        self.health = Health()
        self.watch: Watch | None = None
        self.server: ControlServer | None = None
        self.store = None
        self.generation = 0
        self.group_count = 0
        self.world_comm = None
        self.control_comm = None  # makes communicators, runs no collective (``init_process_group``)
        # PyTorch keys a group's ranks by the group, and every group a rank is not in is the one
        # NON_GROUP_MEMBER key: the rank queries on it answer for the last such group made
        self.non_member_ranks: list[int] | None = None


_world = _World()


def _world_state() -> _World:
    return _world


def _require_init() -> ProcessGroup:
    if _world.default_pg is None:
        raise ValueError(
            "Default process group has not been initialized, please make sure to call init_process_group."
        )
    return _world.default_pg


def is_initialized() -> bool:
    return _world.default_pg is not None


def resolve(group) -> ProcessGroup:
    """The group a call means: ``None`` -> the default group."""
    pg = _require_init()
    if group is None or group is GroupMember.WORLD:
        return pg
    if is_non_member(group):
        raise ValueError("Invalid process group specified: this rank is not a member of the group")
    if not isinstance(group, ProcessGroup):  # PyTorch's check: a ValueError
        raise ValueError(f"Process group {group} is not initialized in the world group map. Please initialize the "
                         "group first.")
    if group.size() == 0 or group._engine.comm is None:
        raise ValueError("Invalid process group specified: it was destroyed")
    return group


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of ``ranks`` (every rank calls it, in the same order); non-members get
    ``GroupMember.NON_GROUP_MEMBER``."""
    pg = _require_init()
    world_size = pg.size()
    if ranks is not None and len(set(ranks)) != len(ranks):
        raise ValueError(f"ranks list must not contain duplicate entries, got {list(ranks)}")
    ranks = sorted(range(world_size) if ranks is None else {int(r) for r in ranks})
    for r in ranks:
        if not 0 <= r < world_size:
            raise ValueError(
                f"Rank {r} is out of range. Valid ranks are 0 to {world_size - 1} (world_size={world_size})"
            )
    tag = _world.group_count
    _world.group_count += 1
    me = pg.rank()
    if me not in ranks:
        _world.non_member_ranks = list(ranks)
        return GroupMember.NON_GROUP_MEMBER
    MPI = _mpi.mpi()
    parent = _world.control_comm
    everyone = parent.Get_group()
    members = everyone.Incl(ranks)
    try:
        comm = parent.Create_group(members, tag=tag)
    except MPI.Exception as err:  # e.g. MPICH's 2048 communicators per process
        raise DistBackendError(f"new_group({ranks}) failed in MPI: {err}") from None
    finally:
        members.Free()
        everyone.Free()
    seconds = timeout.total_seconds() if timeout is not None else pg._engine.timeout_seconds
    engine = MPIEngine(comm, ranks, _world, seconds)
    devices = device_backends(backend) if backend is not None else pg._devices
    sub = ProcessGroup(engine, ranks, devices, group_desc or str(tag), PrefixStore(f"group/{tag}", _world.store))
    if backend is None:
        sub._backend = pg._backend  # get_backend() of a group that inherited the default's, as PyTorch's
    _world.groups.append(sub)
    del MPI
    return sub


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None, group_desc=None):
    """Splits ``group`` (the world) into consecutive groups of ``group_size`` (default: the CUDA
    devices of a node): ``(my_subgroup, all_subgroups)``. PyTorch's checks and messages."""
    _require_init()
    if group_size is None:
        import ember

        if not ember.cuda.is_available():
            raise ValueError(
                "Default group size only takes effect when CUDA is available."
                "If your subgroup using a backend that does not depend on CUDA,"
                "please pass in 'group_size' correctly."
            )
        group_size = ember.cuda.device_count()
    if group_size <= 0:
        raise ValueError(f"The arg 'group_size' ({group_size}) must be positive")
    ranks = resolve(group)._ranks
    world_size = len(ranks)
    if world_size < group_size:
        raise ValueError(f"The arg 'group_size' ({group_size}) must not exceed the world size ({world_size})")
    if world_size % group_size != 0:
        raise ValueError(f"The world size ({world_size}) must be divisible by '{group_size=}'")
    lists = [ranks[start:start + group_size] for start in range(0, world_size, group_size)]
    return new_subgroups_by_enumeration(lists, timeout, backend, pg_options)


def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None, group_desc=None, backend=None):
    """The group of this rank's split of ``parent_pg`` (``split_ranks`` lists group ranks; None for
    a rank in no split). As PyTorch, only with a default group bound to a device
    (``init_process_group(device_id=...)``, i.e. NCCL): CPU groups cannot be split."""
    if not split_ranks:
        raise ValueError("split_ranks cannot be None or empty")
    default = _require_init()
    if default.bound_device_id is None:
        raise RuntimeError("No device associated with the default pg, not safe to split any process groups")
    parent = default if parent_pg is None else resolve(parent_pg)
    if parent is not default:
        # new_group is collective over the world here: ranks outside the parent would not take part
        raise NotImplementedError("ember's split_group splits only the default process group")
    seen: set = set()
    for split in split_ranks:
        if seen.intersection(split):
            raise ValueError(f"split_ranks {split_ranks} must not overlap")
        seen.update(split)
    mine = None
    for split in split_ranks:
        sub = new_group([parent._ranks[r] for r in split], timeout, backend, pg_options, group_desc=group_desc)
        if sub is not GroupMember.NON_GROUP_MEMBER:
            mine = sub
    return mine


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None,
                                 group_desc=None):
    pg = _require_init()
    if not ranks_per_subgroup_list:
        raise ValueError("The arg 'ranks_per_subgroup_list' cannot be empty")
    mine, subgroups, seen = None, [], {}
    for ranks in ranks_per_subgroup_list:
        sub = new_group(ranks, timeout, backend, pg_options)
        subgroups.append(sub)
        for rank in ranks:  # PyTorch checks each list once its group is made, so every rank raises alike
            if rank in seen:
                raise ValueError(f"Rank {rank} has appeared in both subgroup {seen[rank]} and {ranks}")
            seen[rank] = ranks
        if pg.rank() in ranks:
            mine = sub
    return mine, subgroups


def _registered(group):
    """The rank queries' check (PyTorch looks the group up among those new_group made)."""
    if group is not None and group is not GroupMember.WORLD and not isinstance(group, ProcessGroup):
        raise ValueError(f"Group {group} is not registered, please create group with torch.distributed.new_group API")
    return group


def get_rank(group=None) -> int:
    if is_non_member(group):
        return -1
    return resolve(_registered(group)).rank()


def get_world_size(group=None) -> int:
    if is_non_member(group):
        return -1
    return resolve(_registered(group)).size()


def get_backend(group=None) -> str:
    return resolve(group)._backend


def _ranks_of(group) -> tuple:
    """(the group's ranks, the group as messages name it); a non-member's answer is PyTorch's."""
    if is_non_member(group):
        _require_init()
        if _world.non_member_ranks is None:
            raise ValueError(f"Group {group} is not registered, please create group with torch.distributed.new_group "
                             "API")
        return _world.non_member_ranks, group
    pg = resolve(_registered(group))
    return pg._ranks, pg


def get_process_group_ranks(group) -> list[int]:
    return list(_ranks_of(group)[0])


def get_global_rank(group, group_rank: int) -> int:
    if group is GroupMember.WORLD and group is not None:
        return group_rank  # PyTorch: the identity on the default group, unchecked
    ranks, named = _ranks_of(group)
    if not 0 <= group_rank < len(ranks):
        raise ValueError(f"Group rank {group_rank} is not part of group {named}")
    return ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    if group is GroupMember.WORLD and group is not None:
        return global_rank
    ranks, named = _ranks_of(group)
    if global_rank not in ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {named}")
    return list(ranks).index(global_rank)


def get_default_backend_for_device(device) -> str:
    kind = device if isinstance(device, str) else device.type
    return Backend.default_device_backend_map.get(kind.split(":")[0], "gloo")

"""Process groups: ``init_process_group``, ``new_group``, ``destroy_process_group`` and queries.

``init_process_group`` turns any way of starting processes into one MPI world:

1. launched by ``mpiexec`` (and no ``MASTER_ADDR``/store/init_method): MPI starts through the
   launcher's PMI; ranks come from MPI.
2. otherwise the ``init_method``/store rendezvous gives rank and world size; every rank
   announces its host in the store and waits for all (a timeout names the missing ranks);
   rank 0 starts the ``ControlServer`` and publishes its address; all start MPI against it.

Either way each rank then opens its liveness watch to the control server, and the default group
runs on a duplicate of ``MPI_COMM_WORLD`` (so a user's own MPI traffic never mixes with ours).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import threading
import time
from datetime import timedelta

from . import _mpi
from ._backend import Backend, backend_label, device_backends, engine_factory, register_engine
from ._control import ControlServer, Watch
from ._debug import read_debug_level
from ._errors import DistBackendError, DistStoreError
from ._mpi_engine import MPIEngine
from ._rendezvous import rendezvous
from ._store import PrefixStore, Store
from ._tcp_store import TCPStore
from ._work import Health, set_oversubscribed

default_pg_timeout = timedelta(minutes=30)

for _name in ("gloo", "mpi", "undefined"):
    register_engine(_name, "cpu", MPIEngine)


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
        self.group_name = name
        self.group_desc = name
        self.store = store

    def rank(self) -> int:
        return self._engine.rank

    def size(self) -> int:
        return self._engine.size

    def name(self) -> str:
        return self._backend

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


class _NonGroupMember:
    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    WORLD = None
    NON_GROUP_MEMBER = _NonGroupMember()


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


_world = _World()


def _world_state() -> _World:
    return _world


def _require_init() -> ProcessGroup:
    if _world.default_pg is None:
        raise ValueError(
            "Default process group has not been initialized, please make sure to call init_process_group."
        )
    return _world.default_pg


def _advertised_host(store) -> str:
    """An address other ranks can reach rank 0 at."""
    if "EMBER_CONTROL_ADDR" in os.environ:
        return os.environ["EMBER_CONTROL_ADDR"]
    base = store
    while isinstance(base, PrefixStore):
        base = base.underlying_store
    if isinstance(base, TCPStore) and base.host not in ("", "0.0.0.0"):
        return base.host
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def init_process_group(
    backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
    group_name="", pg_options=None, device_id=None,
):
    """Joins this process to the default process group (``torch.distributed.init_process_group``)."""
    if _world.default_pg is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if store is not None and init_method is not None:
        raise ValueError("Cannot specify both init_method and store.")
    if store is not None:
        if world_size <= 0:
            raise ValueError("world_size must be positive if using store")
        if rank < 0:
            raise ValueError("rank must be non-negative if using store")
    if timeout is not None and not isinstance(timeout, timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got {type(timeout)}")
    devices = device_backends(backend)
    read_debug_level()
    for kind, name in devices.items():  # an unknown or absent engine fails before any rendezvous
        engine_factory(name, kind)
    timeout = timeout or default_pg_timeout
    seconds = timeout.total_seconds()
    MPI = _mpi.mpi()
    if store is None and init_method is None and _mpi.launched_by_mpiexec() and "MASTER_ADDR" not in os.environ:
        rank, world_size, store = _join_from_launcher(seconds, timeout)
    else:
        if store is None:
            store, rank, world_size = rendezvous(init_method or "env://", rank, world_size, timeout)
        _join_with_store(store, rank, world_size, seconds)
    _world.store = store
    _world.world_comm = MPI.COMM_WORLD.Dup()
    set_oversubscribed(_ranks_on_this_node(_world.world_comm) > _cores())
    engine = MPIEngine(_world.world_comm, list(range(world_size)), _world, seconds)
    pg = ProcessGroup(engine, list(range(world_size)), devices, group_name or "0", store)
    _world.default_pg = pg
    _world.groups = [pg]
    _world.group_count = 1
    GroupMember.WORLD = group.WORLD = pg
    atexit.register(_say_goodbye)
    if device_id is not None and "cuda" in devices:
        # As PyTorch: a bound device makes the NCCL communicator now, not at the first collective.
        pg.engine_for(_cuda_probe(device_id)).bind(device_id)


def _ranks_on_this_node(comm) -> int:
    node = comm.Split_type(_mpi.mpi().COMM_TYPE_SHARED)
    try:
        return node.Get_size()
    finally:
        node.Free()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cuda_probe(device_id):
    import ember

    return ember.empty(0, device=device_id)


def _join_with_store(store: Store, rank: int, world_size: int, seconds: float) -> None:
    MPI = _mpi.mpi()
    generation = _world.generation
    _world.generation += 1
    rdzv = PrefixStore(f"ember_init/{generation}", store)
    keys = [f"host/{r}" for r in range(world_size)]
    deadline = time.monotonic() + seconds
    while True:
        # Re-announced every second: a store that restarted (same port, new job) still hears it.
        rdzv.set(f"host/{rank}", socket.gethostname())
        try:
            rdzv.wait(keys, timedelta(seconds=max(0.001, min(1.0, deadline - time.monotonic()))))
            break
        except DistStoreError:
            if time.monotonic() < deadline:
                continue
            missing = [r for r in range(world_size) if not rdzv.check([f"host/{r}"])]
            raise DistStoreError(
                f"Timed out after {seconds:g} seconds waiting for all ranks to join the process group: "
                f"{world_size - len(missing)}/{world_size} joined; missing ranks: {missing}"
            ) from None
    if rank == 0:
        hosts = [value.decode() for value in rdzv.multi_get(keys)]
        _world.server = ControlServer(world_size, hosts, timeout=seconds)
        rdzv.set("control", f"{_advertised_host(store)}:{_world.server.port}")
    try:
        host, _, port = rdzv.get("control").decode().rpartition(":")
        # The liveness connection opens before MPI_Init: a rank that dies from here on makes the
        # others' MPI_Init fail at its PMI barrier instead of waiting for it forever.
        _world.watch = Watch(host, int(port), rank, _world.health.on_exit, seconds)
    except (OSError, DistStoreError) as err:
        # Every rank joined, so rank 0 (the store's and the control server's host) was alive a
        # moment ago: unreachable now means it exited (on a busy machine it may die before a slow
        # peer gets here, which is the same failure as dying a little later, inside MPI_Init).
        if isinstance(err, DistStoreError) and "unreachable" not in str(err):
            raise
        raise DistBackendError(f"rank 0 exited before MPI initialization completed (unreachable: {err}); "
                               "MPI did not start in this process") from None
    if not _mpi.is_started():
        _mpi.start_with_pmi_server(host, int(port), rank, world_size, _peer_gone(world_size), seconds)
    world = MPI.COMM_WORLD
    if (world.Get_rank(), world.Get_size()) != (rank, world_size):
        raise RuntimeError(
            f"this process already belongs to an MPI world as rank {world.Get_rank()} of {world.Get_size()}; "
            f"MPI starts once per process, so it cannot rejoin as rank {rank} of {world_size}"
        )


def _peer_gone(world_size: int):
    def failure():
        gone = _world.health.first_exit_among(range(world_size))
        if gone is None:
            return None
        return f"rank {gone[0]} exited before MPI initialization completed"

    return failure


def _join_from_launcher(seconds: float, timeout: timedelta):
    _mpi.start_from_launcher()
    world = _mpi.mpi().COMM_WORLD
    rank, world_size = world.Get_rank(), world.Get_size()
    address = None
    if rank == 0:
        _world.server = ControlServer(world_size, None)
        store = TCPStore("0.0.0.0", 0, world_size, True, timeout, wait_for_workers=False)
        host = _advertised_host(None)
        address = (host, _world.server.port, store.port)
    host, control_port, store_port = world.bcast(address, root=0)
    if rank != 0:
        store = TCPStore(host, store_port, world_size, False, timeout, wait_for_workers=False)
    _world.watch = Watch(host, control_port, rank, _world.health.on_exit, seconds)
    return rank, world_size, store


def _say_goodbye() -> None:
    if _world.watch is not None:
        _world.watch.close()
        _world.watch = None


def destroy_process_group(group=None) -> None:
    """Destroys ``group`` (the default group and every other group when ``None``)."""
    pg = _require_init()
    if group is None or group is pg:
        for each in reversed(_world.groups):
            for device_engine in each._device_engines():
                device_engine.shutdown()
            each._engine.shutdown()
        _world.groups = []
        _world.default_pg = None
        GroupMember.WORLD = globals()["group"].WORLD = None
        _say_goodbye()
        if _world.server is not None:
            _world.server.close()
            _world.server = None
        store, _world.store = _world.store, None
        if hasattr(store, "close"):
            store.close()
        _world.health = Health()
        return
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    for device_engine in group._device_engines():
        device_engine.shutdown()
    group._engine.shutdown()
    if group in _world.groups:
        _world.groups.remove(group)


def is_initialized() -> bool:
    return _world.default_pg is not None


def resolve(group) -> ProcessGroup:
    """The group a call means: ``None`` -> the default group."""
    pg = _require_init()
    if group is None or group is GroupMember.WORLD:
        return pg
    if group is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("Invalid process group specified: this rank is not a member of the group")
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup, got {type(group).__name__}")
    if group.size() == 0 or group._engine.comm is None:
        raise ValueError("Invalid process group specified: it was destroyed")
    return group


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of ``ranks`` (every rank calls it, in the same order); non-members get
    ``GroupMember.NON_GROUP_MEMBER``."""
    pg = _require_init()
    world_size = pg.size()
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
        return GroupMember.NON_GROUP_MEMBER
    MPI = _mpi.mpi()
    world_comm = _world.world_comm
    comm = world_comm.Create_group(world_comm.Get_group().Incl(ranks), tag=tag)
    seconds = timeout.total_seconds() if timeout is not None else pg._engine.timeout_seconds
    engine = MPIEngine(comm, ranks, _world, seconds)
    devices = device_backends(backend) if backend is not None else pg._devices
    sub = ProcessGroup(engine, ranks, devices, group_desc or str(tag), PrefixStore(f"group/{tag}", _world.store))
    _world.groups.append(sub)
    del MPI
    return sub


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None, group_desc=None):
    """Splits the world into consecutive groups of ``group_size``: ``(my_subgroup, all_subgroups)``."""
    pg = _require_init()
    if group_size is None:
        raise ValueError("group_size must be given: there are no CUDA devices to count on CPU")
    if group_size <= 0:
        raise ValueError("The arg 'group_size' must be greater than 0")
    world_size = pg.size()
    if group_size > world_size:
        raise ValueError(f"The arg 'group_size' ({group_size}) must not exceed the world size ({world_size})")
    if world_size % group_size != 0:
        raise ValueError("The world size must be divisible by 'group_size'")
    lists = [list(range(start, start + group_size)) for start in range(0, world_size, group_size)]
    return new_subgroups_by_enumeration(lists, timeout, backend, pg_options)


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None,
                                 group_desc=None):
    pg = _require_init()
    mine, subgroups = None, []
    for ranks in ranks_per_subgroup_list:
        sub = new_group(ranks, timeout, backend, pg_options)
        subgroups.append(sub)
        if pg.rank() in ranks:
            mine = sub
    return mine, subgroups


def get_rank(group=None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return resolve(group).rank()


def get_world_size(group=None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return resolve(group).size()


def get_backend(group=None) -> str:
    return resolve(group)._backend


def get_process_group_ranks(group) -> list[int]:
    return list(resolve(group)._ranks)


def get_global_rank(group, group_rank: int) -> int:
    pg = resolve(group)
    if not 0 <= group_rank < pg.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {pg}")
    return pg._ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    pg = resolve(group)
    if global_rank not in pg._ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {pg}")
    return pg._ranks.index(global_rank)


def get_default_backend_for_device(device) -> str:
    kind = device if isinstance(device, str) else device.type
    return Backend.default_device_backend_map.get(kind.split(":")[0], "gloo")

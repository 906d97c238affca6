"""Joining and leaving: ``init_process_group`` and ``destroy_process_group``.

``init_process_group`` turns any way of starting processes into one MPI world:

1. launched by ``mpiexec`` (and no ``MASTER_ADDR``/store/init_method): MPI starts through the
   launcher's PMI; ranks come from MPI.
2. otherwise the ``init_method``/store rendezvous gives rank and world size; every rank
   announces its host in the store and waits for all (a timeout names the missing ranks);
   rank 0 starts the ``ControlServer`` and publishes its address; all start MPI against it.

Either way each rank then opens its liveness watch to the control server, and the default group
runs on a duplicate of ``MPI_COMM_WORLD`` (so a user's own MPI traffic never mixes with ours).
The groups themselves and the queries about them live in ``_groups`` (re-exported here).
"""

from __future__ import annotations

import atexit
import os
import socket
import time
from datetime import timedelta

from . import _groups, _mpi
from ._backend import device_backends, engine_factory, register_engine
from ._control import ControlServer, Watch
from ._debug import read_debug_level
from ._errors import DistBackendError, DistStoreError
from ._groups import (  # noqa: F401 - re-exported: the package and its modules reach them here
    GroupMember,
    ProcessGroup,
    _require_init,
    _world,
    _world_state,
    get_backend,
    get_default_backend_for_device,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    internal_cpu,
    is_initialized,
    new_group,
    new_subgroups,
    new_subgroups_by_enumeration,
    resolve,
)
from ._mpi_engine import MPIEngine
from ._rendezvous import rendezvous
from ._store import PrefixStore, Store
from ._tcp_store import TCPStore
from ._work import Health, set_oversubscribed, set_spare_core

default_pg_timeout = timedelta(minutes=30)

for _name in ("gloo", "mpi", "undefined"):
    register_engine(_name, "cpu", MPIEngine)


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
        raise AssertionError("Cannot specify both init_method and store.")  # PyTorch's assert
    if store is not None:
        if world_size <= 0:  # PyTorch's asserts
            raise AssertionError("world_size must be positive if using store")
        if rank < 0:
            raise AssertionError("rank must be non-negative if using store")
    if timeout is not None and not isinstance(timeout, timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got {timeout}")
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
    # Only for making communicators (``new_group``, a group's after a mismatch): no collective
    # ever runs on it, so it stays usable whatever breaks the groups' own.
    _world.control_comm = MPI.COMM_WORLD.Dup()
    _world.control_comm.Set_errhandler(MPI.ERRORS_RETURN)
    ranks, cores, one_group = _node_load(_world.world_comm)
    set_oversubscribed(ranks > cores, one_group)
    set_spare_core(cores >= 2 * ranks)
    engine = MPIEngine(_world.world_comm, list(range(world_size)), _world, seconds)
    pg = ProcessGroup(engine, list(range(world_size)), devices, group_name or "0", store)
    # get_backend() answers as PyTorch's: a "device:backend" string as given, and "undefined" for
    # no backend where only the CPU's is there (PyTorch's CPU build)
    if backend is None and devices == {"cpu": "gloo"}:
        pg._backend = "undefined"
    elif backend is not None and ":" in str(backend):
        pg._backend = str(backend).lower()
    _world.default_pg = pg
    _world.groups = [pg]
    _world.group_count = 1
    _world.non_member_ranks = None
    GroupMember.WORLD = _groups.group.WORLD = pg
    atexit.register(_say_goodbye)
    if device_id is not None and "cuda" in devices:
        # As PyTorch: a bound device makes the NCCL communicator now, not at the first collective.
        pg.engine_for(_cuda_probe(device_id)).bind(device_id)
        pg.bound_device_id = device_id


def _node_load(comm) -> tuple[int, int, bool]:
    """The world's ranks on this node, the cores they may run on (the union of their CPU sets:
    ranks pinned one per core are not oversubscribed, nor unpinned ranks on a machine with cores
    to spare), and whether they share one scheduling group (``_work``: where a yield helps)."""
    node = comm.Split_type(_mpi.mpi().COMM_TYPE_SHARED)
    try:
        found = node.allgather((sorted(_cpus()), _sched_group()))
    finally:
        node.Free()
    cpus = [c for c, _ in found]
    return len(cpus), len(set().union(*map(set, cpus))), len({g for _, g in found}) == 1


def _sched_group() -> str:
    """The kernel's scheduling group of this process, where one can be told: its CPU cgroup when
    that is not the root (the kernel's autogroups only apply in the root), else its autogroup
    (one per session: ``mp.spawn``'s children share their parent's; ``mpiexec``, torchrun and
    ``ember-run`` start each rank in its own), else "" (autogroups off: every thread on its own,
    as in one group). Only the first guess of whether a yield reaches a peer (``_work``)."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "cpu" in controllers.split(",") and path not in ("", "/"):
                    return "cgroup:" + path
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            if f.read().strip() == "0":
                return ""
        with open("/proc/self/autogroup") as f:
            return f.read().split()[0]
    except (OSError, IndexError):
        return ""


def _cpus() -> set:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def _cuda_probe(device_id):
    import ember

    return ember.empty(0, device=device_id)


def _claim(store: Store, key: str, value: str) -> str:
    """Sets ``key`` to ``value`` unless it holds something already; what it holds now. A store
    without ``compare_set`` (a user's own ``Store`` subclass) claims nothing: ``value``.

    A TCP store client repeats only idempotent requests after its server went away (rank 0's
    store replaced on the same port by a re-init, while this client still held the old one):
    a failed claim reconnects through ``check`` and is made again, on the new server. (Made
    twice on one server it still answers ``value``: the key holds it.)"""
    for attempt in range(2):
        try:
            return store.compare_set(key, "", value).decode(errors="replace")
        except NotImplementedError:
            return value
        except DistStoreError:
            if attempt:
                raise
            store.check([key])
    return value


def _join_with_store(store: Store, rank: int, world_size: int, seconds: float) -> None:
    MPI = _mpi.mpi()
    generation = _world.generation
    _world.generation += 1
    rdzv = PrefixStore(f"ember_init/{generation}", store)
    keys = [f"host/{r}" for r in range(world_size)]
    deadline = time.monotonic() + seconds
    me = f"{socket.gethostname()}:{os.getpid()}"
    claim = f"{me}:{id(_world)}:{generation}"  # this process's join, distinct from any other's
    while True:
        # This rank's place, claimed before it is announced: a process of another job whose
        # MASTER_PORT a running job's store holds (its own rank 0 failed with EADDRINUSE) would
        # otherwise join that job's rendezvous, reach its control server as a rank it already has,
        # and on its own exit make that job's ranks fail as if their peer had died.
        size = _claim(rdzv, "world_size", str(world_size))
        if size != str(world_size):
            raise DistStoreError(
                f"the process group at this store has {size} ranks, this process was given world_size {world_size}: "
                "another job is using the same address and port (MASTER_ADDR/MASTER_PORT), or the ranks were "
                "given different world sizes")
        held = _claim(rdzv, f"claim/{rank}", claim)
        if held != claim:
            raise DistStoreError(
                f"rank {rank} already joined the process group at this store (process {held.rsplit(':', 2)[0]}; "
                f"this is {me}): another job is using the same address and port (MASTER_ADDR/MASTER_PORT), "
                "or two processes were given the same rank")
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
    if group is None and _world.default_pg is None:
        raise AssertionError("Process group cannot be None")  # PyTorch's type and words
    pg = _require_init()
    if group is None or group is pg:
        for each in reversed(_world.groups):
            for device_engine in each._device_engines():
                device_engine.shutdown()
            each._engine.shutdown()
        _world.groups = []
        _world.default_pg = None
        control, _world.control_comm = _world.control_comm, None
        if control is not None and _world.health.broken is None:
            try:
                control.Free()
            except Exception:  # noqa: BLE001 - MPI's state after a fault is unknown
                pass
        GroupMember.WORLD = _groups.group.WORLD = None
        _say_goodbye()
        if _world.server is not None:
            _world.server.close()
            _world.server = None
        store, _world.store = _world.store, None
        if hasattr(store, "close"):
            store.close()
        _world.health = Health()
        return
    if _groups.is_non_member(group):
        return
    for device_engine in group._device_engines():
        device_engine.shutdown()
    group._engine.shutdown()
    if group in _world.groups:
        _world.groups.remove(group)

"""``ember.distributed``: process groups, collectives and stores, as ``torch.distributed``.

The engine underneath is MPI (MPICH through mpi4py) for CPU tensors; ``"gloo"``, ``"mpi"`` and
``None`` all select it. CUDA tensors run on NVIDIA's NCCL (``"nccl"``, and ``None`` where the
``nvidia-nccl-cu13`` wheel is installed), loaded on the first CUDA collective. Processes started
by ``mpiexec``, by ``ember.multiprocessing.spawn``, by the ``ember-run`` launcher or by hand
(``env://``, ``tcp://``, ``file://``) form one MPI world.
"""

import os as _os

from . import _mpi
from ._backend import Backend, ReduceOp, _make_nccl_premul_sum, reduce_op
from ._backend import nccl_available as _nccl_available
from ._collectives import (
    P2POp,
    all_gather,
    all_gather_into_tensor,
    all_gather_single,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    batch_isend_irecv,
    broadcast,
    gather,
    irecv,
    isend,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_single,
    reduce_scatter_tensor,
    scatter,
    send,
)
from ._errors import DistBackendError, DistError, DistNetworkError, DistStoreError, QueueEmptyError
from ._file_store import FileStore
from ._groups import (
    AllreduceOptions,
    BarrierOptions,
    BroadcastOptions,
    GroupMember,
    ProcessGroup,
    get_backend,
    get_default_backend_for_device,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    is_initialized,
    new_group,
    new_subgroups,
    new_subgroups_by_enumeration,
    split_group,
)
from ._object_collectives import (
    all_gather_object,
    broadcast_object_list,
    gather_object,
    monitored_barrier,
    recv_object_list,
    scatter_object_list,
    send_object_list,
)
from ._reducer import GradBucket
from ._store import HashStore, PrefixStore, Store
from ._tcp_store import TCPStore
from ._work import Future, Work
from ._world import default_pg_timeout, destroy_process_group, init_process_group


def is_available() -> bool:
    """True when the MPI engine can be loaded."""
    return _mpi.is_available()


def is_mpi_available() -> bool:
    return _mpi.is_available()


def is_gloo_available() -> bool:
    # "gloo" names the CPU engine, which is MPI here.
    return _mpi.is_available()


def is_backend_available(backend: str) -> bool:
    """Whether ``init_process_group``/``new_group`` can run ``backend`` here ("gloo" and "mpi": the
    MPI engine; "nccl": NCCL's library; a name registered with ``Backend.register_backend``)."""
    name = str(backend).lower()
    if name in ("gloo", "mpi"):
        return _mpi.is_available()
    if name == "nccl":
        return _nccl_available()
    from ._backend import _ENGINES

    return any(engine == name for engine, _ in _ENGINES)


def get_pg_count() -> int:
    """Process groups created since ``init_process_group`` (the default one included; a
    ``new_group`` call counts on every rank, member or not), 0 without a default group, as PyTorch."""
    from ._groups import _world

    return _world.group_count if _world.default_pg is not None else 0


def is_nccl_available() -> bool:
    """True when NCCL's library (the ``nvidia-nccl-cu13`` wheel) is installed; nothing is loaded."""
    return _nccl_available()


def is_ucc_available() -> bool:
    return False


def is_xccl_available() -> bool:
    return False


def is_torchelastic_launched() -> bool:
    """True in processes started by ``ember-run`` (it sets ``TORCHELASTIC_RUN_ID`` as torchrun does)."""
    return _os.getenv("TORCHELASTIC_RUN_ID") is not None


def get_node_local_rank(fallback_rank=None) -> int:
    if "LOCAL_RANK" in _os.environ:
        return int(_os.environ["LOCAL_RANK"])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError(
        "LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
        "`get_node_local_rank` to work, assuming you are not running in a multi-device context and "
        "want the code to run locally instead."
    )

"""The tensor collectives and point-to-point calls of ``torch.distributed``.

Each function checks its arguments the way PyTorch does, turns global ranks (``src``/``dst``)
into group ranks, lays lists of tensors out as one flat buffer where MPI needs one, and lets the
group's engine start the operation: ``async_op=True`` returns the ``Work``, otherwise it is
waited on here (``None`` is returned, as PyTorch does). A rank outside ``group`` returns at once.
"""

from __future__ import annotations

import warnings

import ember
from ember._src.layouts import strided as _STRIDED
from ember.nn import Parameter

from ._backend import RedOpType, ReduceOp, as_red_op
from ._buffers import check_tensor
from ._debug import check_fingerprint, debug_level
from ._groups import _world as _WORLD
from ._groups import is_non_member
from ._matching import issue
from ._world import GroupMember, resolve

_SUM = ReduceOp.SUM
_PLAIN = frozenset({ember.Tensor, Parameter})
_UNPLANNED = object()


def _finish(work, async_op: bool):
    if async_op:
        # An engine may hand back an operation not started yet, so that a synchronous call can
        # run it in this thread (the MPI engine's CollectiveWork): this one must start now.
        launch = getattr(work, "launch", None)
        if launch is not None:
            launch()
        return work
    work.wait()
    return None


def _group_rank(pg, global_rank, group_rank, name: str) -> int:
    if group_rank is not None:
        if global_rank is not None:  # PyTorch refuses both even when they agree
            raise ValueError("Can't specify both group_rank and global_rank")
        rank = int(group_rank)
    else:
        if global_rank not in pg._ranks:
            if pg is GroupMember.WORLD:  # gloo checks the root itself
                raise RuntimeError(f"invalid root rank: {global_rank}")
            raise ValueError(f"Global rank {global_rank} is not part of group {pg}")
        return pg._ranks.index(global_rank)
    if not 0 <= rank < pg.size():
        raise ValueError(f"Group rank {rank} is not part of group {pg}")
    return rank


def _not_member(group) -> bool:
    return is_non_member(group)


def _flat(tensors):
    """One contiguous 1-D tensor holding ``tensors`` back to back."""
    return ember.cat([t.reshape(-1) for t in tensors]) if tensors else None


def _check_same(tensors, like, what: str) -> None:
    for i, t in enumerate(tensors):
        check_tensor(t, what)
        if t.dtype != like.dtype:
            raise ValueError(f"Invalid usage of tensors with different dtypes: found {t.dtype} and {like.dtype}")
        if t.numel() != like.numel():
            raise RuntimeError(f"{what}: invalid tensor size at index {i} (expected {tuple(like.shape)}, "
                               f"got {tuple(t.shape)})")


def _scatter_back(flat, tensors):
    """Copies consecutive pieces of ``flat`` into ``tensors``."""
    start = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[start:start + n].reshape(t.shape))
        start += n


def _sync_plan(pg, tensor, op):
    """The engine's plan for a synchronous all_reduce of ``tensor``'s dtype with ``op`` on ``pg``
    (``MPIEngine.sync_allreduce_plan``), worked out once per group, dtype and op; None: the
    general path (CUDA or no CPU backend, debug checks on, types MPI cannot reduce directly)."""
    key = (tensor.dtype, op._value_)
    plans = pg._sync_plans
    plan = plans.get(key, _UNPLANNED)
    if plan is _UNPLANNED:
        plan = None
        if "cpu" in pg._devices and debug_level() == "OFF":
            plan = pg._engine.sync_allreduce_plan(tensor.dtype, op)
        plans[key] = plan
    return plan


def all_reduce(tensor, op=_SUM, group=None, async_op=False):
    if group is not None and is_non_member(group):
        return None
    if not async_op and tensor.__class__ in _PLAIN and type(op) is RedOpType:
        # The common case - a plain contiguous CPU tensor, waited on at once - goes straight to
        # MPI: no Work, no staging, the checks done once per (group, dtype, op). Python's cost
        # per call was most of a small all_reduce's time.
        pg = _WORLD.default_pg if group is None else None
        if pg is None:
            pg = resolve(group)
        # keyed by the op's number: an Enum member hashes in Python (~0.15 us)
        plan = pg._sync_plans.get((tensor.dtype, op._value_), _UNPLANNED)
        if plan is _UNPLANNED:
            plan = _sync_plan(pg, tensor, op)
        if (plan is not None and tensor._layout is _STRIDED and tensor._device.type == "cpu"
                and tensor.is_contiguous()):
            pg._engine.allreduce_now(tensor, plan)
            return None
    check_tensor(tensor)
    pg = resolve(group)
    check_fingerprint(pg, "allreduce", [tensor])
    work = issue(async_op, pg.engine_for(tensor).allreduce, tensor, as_red_op(op))
    return _finish(work, async_op)


def start_all_reduce(tensor, group=None):
    """``all_reduce(tensor, SUM, group, async_op=True)`` whose started request stays with the
    calling thread (DDP's reducer): its ``is_completed()``/``wait()`` drive MPI from this thread
    rather than handing the request to the group's worker (``Work.launch()`` still can)."""
    if _not_member(group):
        return None
    pg = resolve(group)
    check_fingerprint(pg, "allreduce", [tensor])
    return pg.engine_for(tensor).allreduce(tensor, _SUM)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    if _not_member(group):
        return None
    check_tensor(tensor)
    pg = resolve(group)
    root = _group_rank(pg, src, group_src, "src")
    check_fingerprint(pg, "broadcast", [tensor])
    return _finish(issue(async_op, pg.engine_for(tensor).broadcast, tensor, root), async_op)


def reduce(tensor, dst=None, op=_SUM, group=None, async_op=False, group_dst=None):
    if _not_member(group):
        return None
    check_tensor(tensor)
    pg = resolve(group)
    root = _group_rank(pg, dst, group_dst, "dst")
    check_fingerprint(pg, "reduce", [tensor])
    return _finish(issue(async_op, pg.engine_for(tensor).reduce, tensor, root, as_red_op(op)), async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    if _not_member(group):
        return None
    check_tensor(tensor)
    pg = resolve(group)
    # DETAIL's fingerprint first, as PyTorch's wrapper checks before its backend does: a rank whose
    # output list is wrong then fails with the others instead of leaving them in the exchange.
    check_fingerprint(pg, "allgather", [tensor])
    if not isinstance(tensor_list, list) or len(tensor_list) != pg.size():
        got = len(tensor_list) if isinstance(tensor_list, list) else type(tensor_list).__name__
        raise RuntimeError(f"all_gather: invalid output tensor list (expected length {pg.size()}, got {got})")
    _check_same(tensor_list, tensor, "tensor_list")
    flat = ember.empty(tensor.numel() * pg.size(), dtype=tensor.dtype, device=tensor.device)
    work = issue(async_op, pg.engine_for(tensor).allgather, flat, tensor)
    work._finish = _chain(work._finish, lambda: _scatter_back(flat, tensor_list))
    work._outputs = tensor_list
    return _finish(work, async_op)


def _chain(first, second):
    def both():
        if first is not None:
            first()
        second()
    return both


def _pair(group, output, input, names: tuple, dtype_message: str):
    """The group of a collective from ``input`` into ``output``, which must share a dtype."""
    check_tensor(output, names[0])
    check_tensor(input, names[1])
    pg = resolve(group)
    if output.dtype != input.dtype:
        raise ValueError(dtype_message)
    return pg


_SAME_TYPE = "input tensor must be the same type as the output tensor"


def all_gather_single(output_tensor, input_tensor, group=None, async_op=False):
    if _not_member(group):
        return None
    pg = _pair(group, output_tensor, input_tensor, ("output_tensor", "input_tensor"),
               "output tensor must have the same type as input tensor")
    check_fingerprint(pg, "allgather_into_tensor", [input_tensor])
    if output_tensor.numel() != input_tensor.numel() * pg.size():
        raise RuntimeError("output tensor size must be equal to world_size times input tensor size")
    return _finish(issue(async_op, pg.engine_for(input_tensor).allgather, output_tensor, input_tensor), async_op)


def _rooted(pg, tensor, tensors, rank, group_rank, name: str, list_name: str, role: str) -> int:
    """The root's group rank of a gather/scatter (default: 0); ``tensors`` must be given on the
    root (one per rank, like ``tensor``) and only there."""
    if rank is None and group_rank is None:
        rank = 0
    root = _group_rank(pg, rank, group_rank, name)
    if pg.rank() == root:
        if not tensors:
            raise ValueError(f"Argument ``{list_name}`` must be specified on {role} rank.")
        if len(tensors) != pg.size():  # gloo's check (RuntimeError), named as gloo names it
            what, side = ("scatter", "input") if role == "source" else ("gather", "output")
            raise RuntimeError(f"ProcessGroup::{what}: Incorrect {side} list size {len(tensors)}. {side.capitalize()} "
                               f"list size should be {pg.size()}, same as size of the process group.")
        _check_same(tensors, tensor, list_name)
    elif tensors:
        raise ValueError(f"Argument ``{list_name}`` must NOT be specified on non-{role} ranks.")
    return root


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    if _not_member(group):
        return None
    check_tensor(tensor)
    pg = resolve(group)
    root = _rooted(pg, tensor, gather_list, dst, group_dst, "dst", "gather_list", "destination")
    check_fingerprint(pg, "gather", [tensor])
    flat = None
    if pg.rank() == root:
        flat = ember.empty(tensor.numel() * pg.size(), dtype=tensor.dtype, device=tensor.device)
    work = issue(async_op, pg.engine_for(tensor).gather, flat, tensor, root)
    if flat is not None:
        work._finish = _chain(work._finish, lambda: _scatter_back(flat, gather_list))
    return _finish(work, async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    if _not_member(group):
        return None
    check_tensor(tensor)
    pg = resolve(group)
    root = _rooted(pg, tensor, scatter_list, src, group_src, "src", "scatter_list", "source")
    check_fingerprint(pg, "scatter", [tensor])
    flat = _flat(scatter_list) if pg.rank() == root else None
    return _finish(issue(async_op, pg.engine_for(tensor).scatter, tensor, flat, root), async_op)


def reduce_scatter(output, input_list, op=_SUM, group=None, async_op=False):
    if _not_member(group):
        return None
    check_tensor(output, "output")
    pg = resolve(group)
    if len(input_list) != pg.size():
        raise RuntimeError(f"invalid input tensor list size, must be world size ({pg.size()}), got {len(input_list)}")
    _check_same(input_list, output, "input_list")
    check_fingerprint(pg, "reduce_scatter", [output])
    work = issue(async_op, pg.engine_for(output).reduce_scatter, output, _flat(input_list), as_red_op(op))
    return _finish(work, async_op)


def reduce_scatter_single(output, input, op=_SUM, group=None, async_op=False):
    if _not_member(group):
        return None
    pg = _pair(group, output, input, ("output", "input"), _SAME_TYPE)
    check_fingerprint(pg, "reduce_scatter_tensor", [output])
    if input.numel() != output.numel() * pg.size():
        raise RuntimeError("input tensor must be the same size as output size times world size")
    return _finish(issue(async_op, pg.engine_for(output).reduce_scatter, output, input, as_red_op(op)), async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    if _not_member(group):
        return None
    pg = _pair(group, output, input, ("output", "input"), _SAME_TYPE)
    check_fingerprint(pg, "alltoall_base", [input])
    size = pg.size()

    def splits(tensor, given, name):
        row = tensor.numel() // tensor.shape[0] if tensor.dim() and tensor.shape[0] else 0
        if given is None or len(given) == 0:
            if tensor.dim() == 0 or tensor.shape[0] % size:
                raise RuntimeError(f"{name}: dimension 0 of size {tensor.shape[0] if tensor.dim() else 0} "
                                 f"is not divisible by the group size {size}")
            return [tensor.numel() // size] * size
        if len(given) != size:
            raise RuntimeError(f"Number of tensor splits not equal to group size: {name} has {len(given)} "
                               f"entries, the group {size} ranks")
        if sum(given) != (tensor.shape[0] if tensor.dim() else 0):
            raise RuntimeError(f"Split sizes doesn't match total dim 0 size: {sum(given)} vs {tensor.shape[0]}")
        return [int(n) * row for n in given]

    out_splits = splits(output, output_split_sizes, "output_split_sizes")
    in_splits = splits(input, input_split_sizes, "input_split_sizes")
    return _finish(issue(async_op, pg.engine_for(input).alltoall, output, input, out_splits, in_splits), async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    if _not_member(group):
        return None
    pg = resolve(group)
    size = pg.size()
    if len(output_tensor_list) != size or len(input_tensor_list) != size:
        raise ValueError(f"all_to_all: both lists must hold {size} tensors (the group size)")
    like = input_tensor_list[0]
    check_fingerprint(pg, "alltoall", list(input_tensor_list))
    for t in list(output_tensor_list) + list(input_tensor_list):
        check_tensor(t)
        if t.dtype != like.dtype:
            raise ValueError("all_to_all: every tensor must have the same dtype")
    flat_in = _flat(input_tensor_list)
    flat_out = ember.empty(sum(t.numel() for t in output_tensor_list), dtype=like.dtype, device=like.device)
    work = issue(async_op, pg.engine_for(like).alltoall, flat_out, flat_in,
                 [t.numel() for t in output_tensor_list], [t.numel() for t in input_tensor_list])
    work._finish = _chain(work._finish, lambda: _scatter_back(flat_out, output_tensor_list))
    work._outputs = output_tensor_list
    return _finish(work, async_op)


def barrier(group=None, async_op=False, device_ids=None):
    if _not_member(group):
        return None
    pg = resolve(group)
    check_fingerprint(pg, "barrier", [])
    if "cpu" not in pg._devices and "cuda" in pg._devices:
        # An NCCL-only group synchronizes through NCCL, on device_ids[0] if given, as PyTorch.
        index = device_ids[0] if device_ids else None
        return _finish(issue(async_op, pg.engine_for(_cuda_flag()).barrier, index), async_op)
    if not async_op:
        pg._engine.barrier_now()
        return None
    return _finish(issue(async_op, pg._engine.barrier), async_op)


def _cuda_flag():
    return ember.empty(0, device="cuda")


# -- point to point ------------------------------------------------------------------------


def _peer(pg, peer, group_peer, name):
    rank = _group_rank(pg, peer, group_peer, name)
    if rank == pg.rank():
        which = "destination" if name == "dst" else "source"
        # PyTorch checks a send's destination (ValueError); a receive from itself reaches gloo, whose
        # unconnected pair raises RuntimeError
        error = ValueError if name == "dst" else RuntimeError
        raise error(f"Invalid {which} rank: {which} rank should not be the same as the rank of the "
                    "current process.")
    return rank


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    if _not_member(group):
        return None
    check_tensor(tensor)
    pg = resolve(group)
    return pg.engine_for(tensor).send(tensor, _peer(pg, dst, group_dst, "dst"), tag)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    if _not_member(group):
        return None
    check_tensor(tensor)
    pg = resolve(group)
    peer = None if src is None and group_src is None else _peer(pg, src, group_src, "src")
    return pg.engine_for(tensor).recv(tensor, peer, tag)


def send(tensor, dst=None, group=None, tag=0, group_dst=None) -> None:
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None) -> int:
    """Receives into ``tensor``; returns the sender's global rank (-1 outside the group)."""
    work = irecv(tensor, src, group, tag, group_src)
    if work is None:
        return -1
    return work.source_rank()


class P2POp:
    """One send or receive for ``batch_isend_irecv``: ``P2POp(isend, tensor, peer)``."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or "
                             "``torch.distributed.irecv``.")
        check_tensor(tensor)
        self.op, self.tensor, self.peer = op, tensor, peer
        self.group, self.tag, self.group_peer = group, tag, group_peer


def batch_isend_irecv(p2p_op_list):
    """Starts every send and receive of the list at once; returns their ``Work``s."""
    if not isinstance(p2p_op_list, list) or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type ``torch.distributed.P2POp``.")
    if p2p_op_list and p2p_op_list[0].tensor.device.type == "cuda":
        return _batch_nccl(p2p_op_list)
    works = []
    for p in p2p_op_list:
        if p.op is isend:
            works.append(isend(p.tensor, p.peer, p.group, p.tag, p.group_peer))
        else:
            works.append(irecv(p.tensor, p.peer, p.group, p.tag, p.group_peer))
    return works


def _batch_nccl(p2p_op_list):
    """NCCL needs the sends and receives of one batch in one group call (or paired ranks
    deadlock): one ``Work`` for the whole batch, as PyTorch's coalesced NCCL batch."""
    first = p2p_op_list[0]
    if _not_member(first.group):
        return []
    pg = resolve(first.group)
    ops = []
    for p in p2p_op_list:
        if resolve(p.group) is not pg:
            raise ValueError("All ops need to use the same group.")
        if p.tensor.device != first.tensor.device:
            raise ValueError("batch_isend_irecv: every tensor of an NCCL batch must be on the same device")
        peer = _peer(pg, p.peer, p.group_peer, "dst" if p.op is isend else "src")
        ops.append((p.op is isend, p.tensor, peer))
    return [pg.engine_for(first.tensor).batch_p2p(ops)]


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"`torch.distributed.{old}` is deprecated. Please use `torch.distributed.{new}` instead.",
                  FutureWarning, stacklevel=3)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Deprecated in PyTorch 2.13 for ``all_gather_single`` (with its FutureWarning)."""
    _deprecated("all_gather_into_tensor", "all_gather_single")
    return all_gather_single(output_tensor, input_tensor, group, async_op)


def reduce_scatter_tensor(output, input, op=_SUM, group=None, async_op=False):
    """Deprecated in PyTorch 2.13 for ``reduce_scatter_single`` (with its FutureWarning)."""
    _deprecated("reduce_scatter_tensor", "reduce_scatter_single")
    return reduce_scatter_single(output, input, op, group, async_op)

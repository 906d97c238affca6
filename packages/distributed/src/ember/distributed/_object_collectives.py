"""Collectives of picklable Python objects, and ``monitored_barrier``.

Objects travel as pickled bytes in uint8 tensors: sizes first (so every rank can allocate), then
the bytes. As in PyTorch, unpickling runs code the sender chose: only use these calls with
processes you trust.
"""

from __future__ import annotations

import functools
import pickle
import time
from datetime import timedelta

import numpy as np

import ember

from ._collectives import _group_rank, _not_member, all_gather, broadcast, gather, recv, scatter, send
from ._world import internal_cpu, resolve


def _bytes_through_mpi(fn):
    """Object collectives move pickled bytes in CPU tensors: through the group's MPI engine
    even where the group's backend is NCCL only (PyTorch stages them through the GPU)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with internal_cpu():
            return fn(*args, **kwargs)
    return run

_PICKLE_WARNING = """
    .. warning::
        Object collectives use ``pickle``, which runs code while unpickling: only call this
        with processes you trust, as with PyTorch's.
"""


def _to_tensor(obj) -> tuple:
    data = pickle.dumps(obj)
    return ember.from_numpy(np.frombuffer(data, dtype=np.uint8).copy()), len(data)


def _from_tensor(tensor, size: int):
    return pickle.loads(tensor[:size].numpy().tobytes())


def _sizes(pg, size: int) -> list[int]:
    mine = ember.tensor([size], dtype=ember.int64)
    out = [ember.zeros(1, dtype=ember.int64) for _ in range(pg.size())]
    all_gather(out, mine, group=pg)
    return [int(t.item()) for t in out]


@_bytes_through_mpi
def all_gather_object(object_list, obj, group=None):
    """Fills ``object_list`` with ``obj`` from every rank of the group."""
    if _not_member(group):
        return
    pg = resolve(group)
    tensor, size = _to_tensor(obj)
    sizes = _sizes(pg, size)
    longest = max(sizes)
    padded = ember.zeros(longest, dtype=ember.uint8)
    padded[:size] = tensor
    out = [ember.empty(longest, dtype=ember.uint8) for _ in sizes]
    all_gather(out, padded, group=pg)
    for i, (t, n) in enumerate(zip(out, sizes)):
        object_list[i] = _from_tensor(t, n)


@_bytes_through_mpi
def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """``obj`` from every rank into ``object_gather_list`` on ``dst``."""
    if _not_member(group):
        return
    pg = resolve(group)
    if dst is None and group_dst is None:
        dst = 0
    root = _group_rank(pg, dst, group_dst, "dst")
    is_root = pg.rank() == root
    # checked before any communication, with PyTorch's messages (they name gather's argument)
    if is_root and not object_gather_list:
        raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    if not is_root and object_gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    tensor, size = _to_tensor(obj)
    sizes = _sizes(pg, size)
    longest = max(sizes)
    padded = ember.zeros(longest, dtype=ember.uint8)
    padded[:size] = tensor
    out = [ember.empty(longest, dtype=ember.uint8) for _ in sizes] if is_root else None
    gather(padded, out, group=pg, group_dst=root)
    if is_root:
        for i, (t, n) in enumerate(zip(out, sizes)):
            object_gather_list[i] = _from_tensor(t, n)


@_bytes_through_mpi
def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Replaces ``object_list``'s items on every rank by those of ``src``."""
    if _not_member(group):
        return
    pg = resolve(group)
    if src is None and group_src is None:
        src = 0
    root = _group_rank(pg, src, group_src, "src")
    is_root = pg.rank() == root
    count = len(object_list)
    if is_root:
        pieces = [_to_tensor(obj) for obj in object_list]
        sizes = ember.tensor([n for _, n in pieces], dtype=ember.int64)
    else:
        sizes = ember.zeros(count, dtype=ember.int64)
    broadcast(sizes, group=pg, group_src=root)
    total = int(sizes.sum().item()) if count else 0
    if is_root:
        payload = ember.cat([t for t, _ in pieces]) if pieces else ember.empty(0, dtype=ember.uint8)
    else:
        payload = ember.empty(total, dtype=ember.uint8)
    broadcast(payload, group=pg, group_src=root)
    if not is_root:
        offset = 0
        for i in range(count):
            n = int(sizes[i].item())
            object_list[i] = _from_tensor(payload[offset:offset + n], n)
            offset += n


@_bytes_through_mpi
def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None):
    """Puts ``scatter_object_input_list[i]`` of ``src`` into rank i's ``scatter_object_output_list[0]``."""
    if _not_member(group):
        return
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    pg = resolve(group)
    if src is None and group_src is None:
        src = 0
    root = _group_rank(pg, src, group_src, "src")
    is_root = pg.rank() == root
    if is_root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != pg.size():
            raise ValueError("scatter_object_input_list must hold one object per rank on the source rank")
        pieces = [_to_tensor(obj) for obj in scatter_object_input_list]
        longest = ember.tensor([max(n for _, n in pieces)], dtype=ember.int64)
    else:
        longest = ember.zeros(1, dtype=ember.int64)
    broadcast(longest, group=pg, group_src=root)
    width = int(longest.item())
    inputs = None
    if is_root:
        inputs = []
        for t, n in pieces:
            padded = ember.zeros(width + 8, dtype=ember.uint8)
            padded[:8] = ember.from_numpy(np.frombuffer(np.int64(n).tobytes(), dtype=np.uint8).copy())
            padded[8:8 + n] = t
            inputs.append(padded)
    out = ember.empty(width + 8, dtype=ember.uint8)
    scatter(out, inputs, group=pg, group_src=root)
    n = int(np.frombuffer(out[:8].numpy().tobytes(), dtype=np.int64)[0])
    scatter_object_output_list[0] = _from_tensor(out[8:], n)




@_bytes_through_mpi
def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier through the store that names the ranks that did not arrive in time.

    Rank 0 of the group waits for every other rank's check-in and raises ``RuntimeError`` naming
    the first missing rank (or all of them with ``wait_all_ranks``); the others wait for rank 0.
    """
    if _not_member(group):
        return
    pg = resolve(group)
    seconds = (timeout if timeout is not None else timedelta(seconds=pg._engine.timeout_seconds)).total_seconds()
    store = pg.store
    round_no = getattr(pg, "_monitored_round", 0)
    pg._monitored_round = round_no + 1
    me = pg.rank()
    key = f"monitored_barrier/{round_no}"
    if me != 0:
        store.set(f"{key}/in/{me}", "1")
        try:
            store.wait([f"{key}/out"], timedelta(seconds=seconds))
        except RuntimeError:
            raise RuntimeError(f"Rank {pg._ranks[me]} timed out in monitoredBarrier waiting for rank 0") from None
        return
    deadline = time.monotonic() + seconds
    missing = list(range(1, pg.size()))
    while missing and time.monotonic() < deadline:
        missing = [r for r in missing if not store.check([f"{key}/in/{r}"])]
        if missing:
            time.sleep(0.01)
    if missing:
        global_missing = [pg._ranks[r] for r in missing]
        ms = round(seconds * 1000)
        me_global = pg._ranks[me]
        if wait_all_ranks:
            listed = ", ".join(map(str, global_missing))
            raise RuntimeError(f"[Rank {me_global}]: Ranks {listed} failed to pass monitoredBarrier in {ms} ms")
        raise RuntimeError(f"[Rank {me_global}]: Rank {global_missing[0]} failed to pass monitoredBarrier in {ms} ms")
    store.set(f"{key}/out", "1")


@_bytes_through_mpi
def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None):
    """Sends the picklable objects of ``object_list`` to ``dst`` (which calls ``recv_object_list``)."""
    if _not_member(group):
        return
    pieces = [_to_tensor(obj) for obj in object_list]
    sizes = ember.tensor([n for _, n in pieces], dtype=ember.int64)
    send(sizes, dst=dst, group=group, group_dst=group_dst)
    payload = ember.cat([t for t, _ in pieces]) if pieces else ember.empty(0, dtype=ember.uint8)
    send(payload, dst=dst, group=group, group_dst=group_dst)


@_bytes_through_mpi
def recv_object_list(object_list, src=None, group=None, device=None, group_src=None) -> int:
    """Fills ``object_list`` (of the sender's length) from ``src``; returns the sender's rank."""
    if _not_member(group):
        return -1
    sizes = ember.zeros(len(object_list), dtype=ember.int64)
    sender = recv(sizes, src=src, group=group, group_src=group_src)
    payload = ember.empty(int(sizes.sum().item()), dtype=ember.uint8)
    recv(payload, src=sender, group=group)
    offset = 0
    for i, n in enumerate(sizes.tolist()):
        object_list[i] = _from_tensor(payload[offset:offset + n], n)
        offset += n
    return sender


for _fn in (all_gather_object, gather_object, broadcast_object_list, scatter_object_list, send_object_list,
            recv_object_list):
    _fn.__doc__ = (_fn.__doc__ or "") + _PICKLE_WARNING

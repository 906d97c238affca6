"""Mismatched collectives without debug mode (issue 15): each case on a fresh group of every
rank, so a case that breaks its group leaves the next one a working group. argv: the cases."""

import sys
import time

from prelude import dist, init, torch, write

rank, world = init(timeout_s=30)
R = {}


def run(case, group):
    if case in ("shape", "many_groups"):  # the synchronous all_reduce of a plain tensor (ember's fast path)
        t = torch.ones(4 if rank == 0 else 8)
        dist.all_reduce(t, group=group)
    elif case == "shape_large":  # over 64 KB: its data starts beside the signatures, mismatched
        t = torch.ones(20000 if rank == 0 else 40000)
        dist.all_reduce(t, group=group)
    elif case == "dtype":  # the same byte count: gloo reduces reinterpreted bytes
        t = torch.ones(4, dtype=torch.float32 if rank == 0 else torch.int32)
        dist.all_reduce(t, group=group)
    elif case == "op":
        t = torch.ones(4)
        dist.all_reduce(t, op=dist.ReduceOp.SUM if rank == 0 else dist.ReduceOp.MAX, group=group)
    elif case == "kind":  # gloo: both ranks wait for the timeout
        t = torch.ones(4)
        if rank == 0:
            dist.all_reduce(t, group=group)
        else:
            dist.broadcast(t, 0, group=group)
    elif case == "barrier_kind":  # a barrier against the synchronous all_reduce (both ember's fast paths)
        if rank == 0:
            dist.barrier(group=group)
        else:
            dist.all_reduce(torch.ones(4), group=group)
    elif case == "async":
        t = torch.ones(4 if rank == 0 else 8)
        dist.all_reduce(t, group=group, async_op=True).wait()
    elif case == "mixed_async":  # one rank's call async: mismatched, the group cannot go on
        t = torch.ones(4)
        if rank == 0:
            dist.all_reduce(t, group=group, async_op=True).wait()
        else:
            dist.broadcast(t, 0, group=group)
    elif case == "async_then_more":  # a later collective started before the async one is waited on
        work = dist.all_reduce(torch.ones(4 if rank == 0 else 8), group=group, async_op=True)
        t = torch.ones(2)
        dist.all_reduce(t, group=group)
        work.wait()
    elif case == "scatter_gather":  # synchronous general-path calls of different kinds
        t = torch.ones(4)
        if rank == 0:
            dist.scatter(t, [torch.ones(4)] * world, src=0, group=group)
        else:
            dist.all_gather([torch.zeros(4) for _ in range(world)], t, group=group)
    elif case == "gather_into":
        t = torch.ones(4 if rank == 0 else 8)
        dist.all_gather_single(torch.zeros(t.numel() * world), t, group=group)
    elif case == "recv_smaller":
        if rank == 0:
            dist.send(torch.ones(8), 1, group=group)
        else:
            dist.recv(torch.zeros(4), 0, group=group)
    elif case == "same_numel":  # a different shape of the same elements is no mismatch
        t = torch.ones((2, 4) if rank == 0 else (4, 2))
        dist.all_reduce(t, group=group)
        return t.reshape(-1)
    return None


for case in sys.argv[1:]:
    group = dist.new_group(list(range(world)))
    if case == "many_groups":  # more groups than fitted under MPICH's 2048 communicators with a spare each
        extra = [dist.new_group(list(range(world))) for _ in range(1100)]
        group = extra[-1]
    start = time.monotonic()
    try:
        out = run(case, group)
        got = {"error": None, "out": out}
    except Exception as err:  # noqa: BLE001 - what the test compares
        got = {"error": type(err).__name__, "runtime": isinstance(err, RuntimeError), "message": str(err)}
    got["seconds"] = time.monotonic() - start
    try:
        dist.barrier(group=group)
        t = torch.full((3,), float(rank + 1))
        dist.all_reduce(t, group=group)  # and it still reduces
        got["after"] = "ok" if t.tolist() == [world * (world + 1) / 2] * 3 else f"wrong: {t.tolist()}"
    except Exception as err:  # noqa: BLE001
        got["after"] = type(err).__name__
    R[case] = got
    write(rank, R)
dist.barrier()
R["world_after"] = "ok"
write(rank, R)

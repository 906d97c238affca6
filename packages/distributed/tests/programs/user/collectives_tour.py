"""torchrun-style tour of the collectives the docs and tutorials show: object collectives,
new_group subgroups, batch_isend_irecv rings, monitored_barrier, all_to_all_single with splits,
reduce_scatter_tensor, all_gather_into_tensor, ReduceOp.AVG / PREMUL_SUM, and what each refuses."""

import os
import sys
from datetime import timedelta

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist


def show(rank, label, value):
    if isinstance(value, torch.Tensor):
        value = f"{str(value.dtype).split('.')[-1]} {value.tolist()}"
    print(f"[rank {rank}] {label}: {value}")


def outcome(fn):
    try:
        result = fn()
    except Exception as err:  # noqa: BLE001 - the type is what the program prints
        return type(err).__name__
    return "ok" if result is None else result


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()

    objs = [{"config": "a", "lr": 0.1}, [1, 2, 3], None] if rank == 0 else [None, None, None]
    dist.broadcast_object_list(objs, src=0)
    show(rank, "broadcast_object_list", objs)
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "name": f"worker{rank}", "t": (rank, 2.5)})
    show(rank, "all_gather_object", gathered)
    out = [None]
    dist.scatter_object_list(out, [f"piece-{i}" for i in range(world)] if rank == 0 else None, src=0)
    show(rank, "scatter_object_list", out)
    into = [None] * world if rank == world - 1 else None
    dist.gather_object(rank * 10, into, dst=world - 1)
    show(rank, "gather_object", into)

    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    t = torch.tensor([float(rank + 1)])
    if rank % 2 == 0:
        dist.all_reduce(t, group=evens)
        show(rank, "evens group rank", dist.get_rank(evens))
    show(rank, "evens all_reduce", t)
    show(rank, "not in group rank", dist.get_rank(evens) if rank % 2 else "-")
    subgroup, subgroups = dist.new_subgroups(group_size=1)
    show(rank, "subgroups", [len(subgroups), dist.get_world_size(subgroup)])

    send = torch.arange(3, dtype=torch.float32) + 10 * rank
    recv = torch.zeros(3)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % world), dist.P2POp(dist.irecv, recv, (rank - 1) % world)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    show(rank, "batch_isend_irecv ring", recv)

    dist.monitored_barrier(timeout=timedelta(seconds=10))
    show(rank, "monitored_barrier", "passed")
    dist.monitored_barrier(timeout=timedelta(seconds=10), wait_all_ranks=True)

    # all_to_all_single with uneven splits: rank r sends r+1 elements to every peer
    in_splits = [rank + 1] * world
    out_splits = [r + 1 for r in range(world)]
    inp = torch.arange(sum(in_splits), dtype=torch.int64) + 100 * rank
    outp = torch.empty(sum(out_splits), dtype=torch.int64)
    dist.all_to_all_single(outp, inp, output_split_sizes=out_splits, input_split_sizes=in_splits)
    show(rank, "all_to_all_single splits", outp)
    even = torch.arange(2 * world, dtype=torch.float32) + rank
    even_out = torch.empty_like(even)
    dist.all_to_all_single(even_out, even)
    show(rank, "all_to_all_single even", even_out)
    outs = [torch.empty(2) for _ in range(world)]
    dist.all_to_all(outs, [torch.full((2,), float(rank * world + i)) for i in range(world)])
    show(rank, "all_to_all", [o.tolist() for o in outs])

    full = torch.arange(world * 3, dtype=torch.float32) * (rank + 1)
    part = torch.empty(3)
    dist.reduce_scatter_tensor(part, full)
    show(rank, "reduce_scatter_tensor", part)
    whole = torch.empty(world * 2, 2)
    dist.all_gather_into_tensor(whole, torch.full((2, 2), float(rank)))
    show(rank, "all_gather_into_tensor", whole)
    flat = torch.empty(world * 2)
    dist.all_gather_single(flat, torch.tensor([rank, -rank], dtype=torch.float32))
    show(rank, "all_gather_single", flat)
    dist.reduce_scatter_single(part, full)
    show(rank, "reduce_scatter_single", part)

    avg = torch.tensor([1.0, 2.0]) * (rank + 1)
    show(rank, "AVG", outcome(lambda: dist.all_reduce(avg, op=dist.ReduceOp.AVG)))
    show(rank, "AVG value", avg)
    for op in ("SUM", "PRODUCT", "MIN", "MAX"):
        v = torch.tensor([rank + 2, 5 - rank], dtype=torch.int32)
        dist.all_reduce(v, op=getattr(dist.ReduceOp, op))
        show(rank, f"int32 {op}", v)
    premul = torch.ones(2)
    show(rank, "PREMUL_SUM", outcome(lambda: dist.all_reduce(premul, op=dist.ReduceOp.PREMUL_SUM)))
    show(rank, "ReduceOp repr", [repr(dist.ReduceOp.SUM), str(dist.ReduceOp.AVG)])

    # reduce, broadcast from a rank other than 0, gather/scatter with lists (gloo reduces a
    # non-contiguous tensor into the wrong memory: docs/deviations.md)
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) * (rank + 1)
    row = base[1]
    dist.reduce(row, dst=0, op=dist.ReduceOp.MAX)
    show(rank, "reduce MAX to 0", base[1] if rank == 0 else "-")
    b = torch.tensor([rank * 1.5, 7.0]) if rank == 1 else torch.zeros(2)
    dist.broadcast(b, src=1)
    show(rank, "broadcast from 1", b)
    gl = [torch.zeros(2, dtype=torch.int64) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.tensor([rank, rank * rank]), gl, dst=0)
    show(rank, "gather", None if gl is None else [g.tolist() for g in gl])
    sc = torch.zeros(2)
    dist.scatter(sc, [torch.full((2,), float(i) + 0.5) for i in range(world)] if rank == 0 else None, src=0)
    show(rank, "scatter", sc)
    work = dist.all_reduce(torch.ones(4), async_op=True)
    show(rank, "async work", [work.wait(), work.is_completed(), work.is_success()])

    # refusals
    show(rank, "send to self", outcome(lambda: dist.send(torch.ones(1), dst=rank)))
    show(rank, "bad dst", outcome(lambda: dist.reduce(torch.ones(1), dst=world)))
    show(rank, "bad split sum",
         outcome(lambda: dist.all_to_all_single(torch.empty(3), torch.ones(3), input_split_sizes=[1] * (world + 1))))
    show(rank, "scatter_object_list bad out", outcome(lambda: dist.scatter_object_list([], [1] * world, src=0)))
    show(rank, "group outside", outcome(lambda: dist.all_reduce(torch.ones(1), group=evens)) if rank % 2 else "-")
    dist.barrier()
    dist.destroy_process_group()
    print(f"[rank {rank}] destroyed, initialized={dist.is_initialized()}")


if __name__ == "__main__":
    main()

"""Process groups and object collectives at 4 ranks (torchrun-style): new_subgroups in pairs,
new_subgroups_by_enumeration, collectives and object collectives inside a subgroup (group_src /
group_dst, tensors inside the objects), rank translation, a p2p ring inside a subgroup,
all_to_all_single with uneven and zero splits, bitwise reduce ops, and what each refuses."""

import os
import sys
from datetime import timedelta

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist


def outcome(fn):
    try:
        result = fn()
    except Exception as err:  # noqa: BLE001 - the type and message head are what the program prints
        return f"{type(err).__name__}: {str(err).splitlines()[0].split(' of group ')[0][:70] if str(err) else ''}"
    return "ok" if result is None else result


def main():
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()

    def say(label, value):
        if isinstance(value, torch.Tensor):
            value = f"{str(value.dtype).split('.')[-1]} {value.tolist()}"
        print(f"[rank {rank}] {label}: {value}")

    # pairs {0,1} {2,3}
    pair, pairs = dist.new_subgroups(group_size=2)
    say("pairs", [dist.get_process_group_ranks(g) for g in pairs])
    say("pair rank/size", [dist.get_rank(pair), dist.get_world_size(pair), dist.get_process_group_ranks(pair)])
    say("group rank of global", dist.get_group_rank(pair, rank))
    say("global rank of group 1", dist.get_global_rank(pair, 1))
    t = torch.tensor([rank + 1.0, 10.0 * rank])
    dist.all_reduce(t, group=pair)
    say("pair all_reduce", t)
    b = torch.tensor([float(rank)] * 2)
    dist.broadcast(b, group=pair, group_src=1)
    say("pair broadcast group_src=1", b)
    b2 = torch.tensor([float(rank)])
    dist.broadcast(b2, src=pairs[0].rank() if False else dist.get_global_rank(pair, 0), group=pair)
    say("pair broadcast src global", b2)

    # enumeration: {0,3} and {1,2}
    mine, groups = dist.new_subgroups_by_enumeration([[0, 3], [1, 2]])
    say("enum groups", [dist.get_process_group_ranks(g) for g in groups])
    say("enum rank", dist.get_rank(mine))
    e = torch.tensor([2 ** rank], dtype=torch.int64)
    dist.all_reduce(e, group=mine)
    say("enum all_reduce", e)
    got = [None, None]
    dist.all_gather_object(got, {"r": rank, "t": torch.tensor([rank, rank * 2])}, group=mine)
    say("enum all_gather_object", [(o["r"], o["t"].tolist()) for o in got])
    objs = [f"from {rank}", {"k": [rank]}] if dist.get_rank(mine) == 0 else [None, None]
    dist.broadcast_object_list(objs, group=mine, group_src=0)
    say("enum broadcast_object_list", objs)
    into = [None, None] if dist.get_rank(mine) == 1 else None
    dist.gather_object(("g", rank), into, group=mine, group_dst=1)
    say("enum gather_object", into)
    out = [None]
    scatter_in = [[rank, "a"], [rank, "b"]] if dist.get_rank(mine) == 0 else None
    dist.scatter_object_list(out, scatter_in, group=mine, group_src=0)
    say("enum scatter_object_list", out)

    # a ring inside each pair's complement: isend/irecv with global ranks and tags
    peer = dist.get_global_rank(mine, 1 - dist.get_rank(mine))
    send = torch.tensor([rank * 1.5, -rank])
    recv = torch.zeros(2)
    reqs = [dist.isend(send, peer, group=mine, tag=7), dist.irecv(recv, peer, group=mine, tag=7)]
    for r in reqs:
        r.wait()
    say("enum isend/irecv", recv)
    ops = [dist.P2POp(dist.isend, send * 2, group_peer=1 - dist.get_rank(mine), group=mine),
           dist.P2POp(dist.irecv, recv, group_peer=1 - dist.get_rank(mine), group=mine)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    say("enum batch_isend_irecv group_peer", recv)

    # all_to_all of tensors of different sizes: gloo refuses them ("invalid tensor size"), ember
    # takes them as NCCL does (docs/deviations.md); all_to_all_single with splits is the portable form
    in_splits = [(rank + j) % 3 for j in range(world)]
    out_splits = [(j + rank) % 3 for j in range(world)]
    src = torch.arange(sum(in_splits), dtype=torch.float32) + 100 * rank
    dst = torch.full((sum(out_splits),), -1.0)
    dist.all_to_all_single(dst, src, output_split_sizes=out_splits, input_split_sizes=in_splits)
    say("all_to_all_single with zero splits", dst)
    two_d = torch.arange(world * 2 * 3, dtype=torch.float32).reshape(world * 2, 3) + rank
    two_d_out = torch.empty_like(two_d)
    dist.all_to_all_single(two_d_out, two_d, group=None)
    say("all_to_all_single 2-d", two_d_out[:, 0])
    pair_out = torch.empty(4)
    dist.all_to_all_single(pair_out, torch.arange(4.0) + 10 * rank, group=pair)
    say("pair all_to_all_single", pair_out)

    # bitwise and other ops
    for op in ("BAND", "BOR", "BXOR", "MAX", "MIN", "PRODUCT"):
        v = torch.tensor([rank + 1, 0b1010 | rank, 255 - rank], dtype=torch.int64)
        dist.all_reduce(v, op=getattr(dist.ReduceOp, op), group=pair)
        say(f"pair {op}", v)
    f = torch.tensor([1.5 * rank, -rank])
    say("float BAND", outcome(lambda: dist.all_reduce(f, op=dist.ReduceOp.BAND)))
    avg = torch.tensor([float(rank), 3.0])
    dist.all_reduce(avg, op=dist.ReduceOp.AVG, group=mine)
    say("enum AVG", avg)
    bools = torch.tensor([rank % 2 == 0, True])
    say("bool MAX", outcome(lambda: dist.all_reduce(bools, op=dist.ReduceOp.MAX)))
    say("bool MAX value", bools)
    rsum = torch.empty(2)
    dist.reduce_scatter_tensor(rsum, torch.arange(4.0) * (rank + 1), op=dist.ReduceOp.MAX, group=pair)
    say("pair reduce_scatter_tensor MAX", rsum)
    gathered = torch.empty(2, 2)
    dist.all_gather_into_tensor(gathered, torch.tensor([[rank, -rank]], dtype=torch.float32), group=mine)
    say("enum all_gather_into_tensor", gathered)

    # refusals
    say("overlapping enumeration", outcome(lambda: dist.new_subgroups_by_enumeration([[0, 1], [1, 2]])))
    say("group_size not dividing", outcome(lambda: dist.new_subgroups(group_size=3)))
    say("group_size too big", outcome(lambda: dist.new_subgroups(group_size=world + 1)))
    say("group_size zero", outcome(lambda: dist.new_subgroups(group_size=0)))
    say("src and group_src", outcome(lambda: dist.broadcast(torch.ones(1), src=0, group=pair, group_src=0)))
    say("global rank not in group", outcome(lambda: dist.get_group_rank(mine, (rank + 1) % world)
                                            if dist.get_group_rank(mine, rank) == 0 and rank == 0 else "-"))
    say("group rank out of range", outcome(lambda: dist.get_global_rank(pair, 5)))
    other = pairs[1] if rank < 2 else pairs[0]
    say("collective on a group not mine", outcome(lambda: dist.all_reduce(torch.ones(1), group=other)))
    say("get_rank of a group not mine", dist.get_rank(other))
    say("get_world_size of a group not mine", outcome(lambda: dist.get_world_size(other)))
    dist.barrier()
    dist.destroy_process_group()
    print(f"[rank {rank}] done")


if __name__ == "__main__":
    main()

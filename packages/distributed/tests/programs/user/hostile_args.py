"""Arguments users get wrong around groups, point-to-point, object collectives and the sampler
(torchrun-style, 2 ranks): each call's exception type and message head, or "ok". Every bad call
fails on each rank before any communication (or on both alike), so the ranks stay in step.
argv[2] "ember_only": the calls where gloo waits out the timeout or leaves the ranks out of step
(ember raises at once: docs/deviations.md), run on ember alone."""

import os
import sys
from datetime import timedelta

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank, world = dist.get_rank(), dist.get_world_size()

    def say(label, fn, head=80):
        try:
            result = fn()
            text = "ok" if result is None else repr(result)
        except Exception as err:  # noqa: BLE001 - the type and message head are what the program prints
            text = f"{type(err).__name__}: {str(err).splitlines()[0].split(' at 0x')[0][:head] if str(err) else ''}"
        print(f"[rank {rank}] {label}: {text}", flush=True)

    t = torch.ones(2)
    solo = dist.new_group([0])
    if sys.argv[2:] == ["ember_only"]:
        say("send dst out of range", lambda: dist.send(t, dst=world))
        say("isend dst negative", lambda: dist.isend(t, dst=-1))
        say("batch_isend_irecv empty", lambda: dist.batch_isend_irecv([]))
        # gloo raises RuntimeError here too, and then its worker thread sometimes aborts the process
        # (a failed CHECK on the same sizes), so a live comparison with it is not repeatable.
        say("reduce_scatter_tensor wrong size", lambda: dist.reduce_scatter_tensor(torch.empty(2), torch.ones(3)))
        pair = dist.new_group([0, 1])
        dist.destroy_process_group(pair)
        say("collective on a destroyed group", lambda: dist.all_reduce(t, group=pair))
        say("world still works", lambda: dist.all_reduce(torch.ones(1)))
        dist.destroy_process_group()
        return
    say("broadcast src not in group", lambda: dist.broadcast(t, src=1, group=solo) if rank == 0 else None,
        head=35)  # then the group's repr
    say("reduce dst negative", lambda: dist.reduce(t, dst=-2), head=0)
    say("op as a string", lambda: dist.all_reduce(t, op="sum"), head=0)  # pybind's list of signatures
    say("group not a group", lambda: dist.all_reduce(t, group="world"))
    say("get_rank of a string", lambda: dist.get_rank("world"))
    say("new_group of an int", lambda: dist.new_group(3))
    say("new_group negative rank", lambda: dist.new_group([-1, 0]))
    say("P2POp with all_reduce", lambda: dist.P2POp(dist.all_reduce, t, 1 - rank))
    say("batch_isend_irecv not P2POp", lambda: dist.batch_isend_irecv([t]))
    say("all_gather_object short list", lambda: dist.all_gather_object([None], rank))
    say("gather_object list on a non-dst", lambda: dist.gather_object(rank, [None] * world if rank == 1 else None,
                                                                       dst=0))
    say("gather list on a non-dst", lambda: dist.gather(t, [torch.zeros(2)] * world if rank == 1 else None, dst=0))
    say("scatter list on a non-src", lambda: dist.scatter(t, [torch.zeros(2)] * world, src=0) if rank == 1 else None)
    say("scatter no list on src", lambda: dist.scatter(t, None, src=0) if rank == 0 else None)
    say("int tensor in float list", lambda: dist.all_gather([torch.zeros(2), torch.zeros(2, dtype=torch.int64)], t),
        head=46)
    pair = dist.new_group([0, 1])
    dist.destroy_process_group(pair)
    say("get_rank of a destroyed group", lambda: dist.get_rank(pair), head=0)
    say("world still works", lambda: dist.all_reduce(torch.ones(1)))

    data = list(range(7))
    say("sampler rank too big", lambda: DistributedSampler(data, num_replicas=2, rank=2))
    say("sampler rank negative", lambda: DistributedSampler(data, num_replicas=2, rank=-1))
    for kwargs in ({"num_replicas": 3, "rank": 2}, {"num_replicas": 3, "rank": 2, "drop_last": True},
                   {"num_replicas": 4, "rank": 3, "shuffle": True, "seed": 5}):
        sampler = DistributedSampler(data, **kwargs)
        orders = []
        for epoch in range(2):
            sampler.set_epoch(epoch)
            orders.append(list(sampler))
        say(f"sampler {sorted(kwargs.items())}", lambda sampler=sampler, orders=orders: (len(sampler), orders))
    say("sampler from the group", lambda: (len(DistributedSampler(data)), list(DistributedSampler(data))))
    dist.barrier()
    dist.destroy_process_group()
    say("sampler after destroy", lambda: DistributedSampler(data))


if __name__ == "__main__":
    main()

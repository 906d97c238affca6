"""mp.spawn when things go wrong, as readers meet it: a rank that raises (the parent gets
ProcessRaisedException naming the error), a rank that exits with a code, join=False with the
context's join(), and spawn's own argument checks. argv[1]: a port."""

import os
import sys

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def raises_on_one(rank, world_size, port):
    if rank == 1:
        raise ValueError("bad batch on rank 1")


def exits_on_one(rank):
    if rank == 1:
        sys.exit(3)


def trains(rank, world_size, port, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t)
    queue.put((rank, t.item()))
    dist.destroy_process_group()


def main():
    port = sys.argv[1]
    try:
        mp.spawn(raises_on_one, args=(2, port), nprocs=2)
    except mp.ProcessRaisedException as err:
        print("raised:", type(err).__name__, err.error_index, "ValueError: bad batch on rank 1" in str(err))
    try:
        mp.spawn(exits_on_one, nprocs=2)
    except mp.ProcessExitedException as err:
        print("exited:", type(err).__name__, err.error_index, err.exit_code)
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    context = mp.spawn(trains, args=(2, port, queue), nprocs=2, join=False)
    while not context.join():
        pass
    print("join=False results:", sorted(queue.get() for _ in range(2)))
    for kwargs in ({"nprocs": 0}, {"nprocs": 1, "start_method": "bogus"}):
        try:
            mp.spawn(exits_on_one, **kwargs)
            print(kwargs, "ok")
        except Exception as err:  # noqa: BLE001 - the type is what the program prints
            print(kwargs, type(err).__name__)


if __name__ == "__main__":
    main()

"""``mp.spawn`` two workers that meet at MASTER_ADDR/MASTER_PORT (PyTorch's usual flow)."""

import os
import sys

from prelude import dist, mp, torch, write


def worker(rank, world, mode):
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x = torch.ones(3) * (rank + 1)
    dist.all_reduce(x)
    write(rank, {"rank": rank, "sum": x})
    dist.barrier()  # both reports are written before worker 1 fails
    if mode == "raise" and rank == 1:
        raise ValueError("worker 1 failed on purpose")
    dist.destroy_process_group()


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    try:
        mp.spawn(worker, args=(2, mode), nprocs=2, join=True)
        outcome = "ok"
    except mp.ProcessRaisedException as err:
        outcome = ["ProcessRaisedException", err.error_index, "worker 1 failed on purpose" in str(err)]
    write(9, {"outcome": outcome})

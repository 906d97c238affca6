"""Under ember-run --max-restarts 1: the first attempt's rank 1 fails, the restarted group succeeds."""

import os

from prelude import LIB, dist, init, torch, write

if LIB == "torch":
    from torch.distributed.elastic.multiprocessing.errors import record
else:
    from ember.distributed.elastic.multiprocessing.errors import record


@record
def give_up():
    raise ValueError("rank 1 gives up")


restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank, world = init()
if restart == 0 and rank == 1:
    give_up()
x = torch.ones(2)
dist.all_reduce(x)
write(rank, {"restart": restart, "sum": x})
dist.destroy_process_group()

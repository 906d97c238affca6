"""Under ember-run --max-restarts 1: the first attempt's rank 1 fails, the restarted group succeeds."""

import os
import sys

from prelude import dist, init, torch, write

restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank, world = init()
if restart == 0 and rank == 1:
    sys.exit(3)
x = torch.ones(2)
dist.all_reduce(x)
write(rank, {"restart": restart, "sum": x})
dist.destroy_process_group()

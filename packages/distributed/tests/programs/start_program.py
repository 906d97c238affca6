"""Joins the group however this process was started, runs two collectives, reports.

``DIST_SLOW_GROUP_RANK``: the workers of that node (launcher) stay a while longer after the
collectives, so the other nodes' launchers finish first."""

import os
import time

from prelude import dist, init, torch, write

rank, world = init()
x = torch.arange(4.0) + rank
dist.all_reduce(x)
b = torch.full((2,), float(rank))
dist.broadcast(b, src=world - 1)
env = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                      "MASTER_PORT", "GROUP_RANK", "TORCHELASTIC_RUN_ID")}
write(rank, {"rank": rank, "world": world, "sum": x, "bcast": b, "env": env})
dist.destroy_process_group()
if os.environ.get("GROUP_RANK") is not None and os.environ.get("GROUP_RANK") == os.environ.get("DIST_SLOW_GROUP_RANK"):
    time.sleep(2.0)

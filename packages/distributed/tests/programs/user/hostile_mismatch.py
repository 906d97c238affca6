"""Ranks that disagree (torchrun-style env, 2 ranks, timeout=timedelta(seconds=4)); argv[2] the
case. Each rank prints the exception type it got (or "ok") and whether it came within the
timeout's margin - never a hang:
``shape``: all_reduce of 4 elements on rank 0 and 5 on rank 1;
``dtype``: all_reduce of float32 on rank 0 and float64 on rank 1;
``broadcast_shape``: a broadcast whose receiver's tensor is smaller than the source's;
``dead_rank``: rank 1 exits (os._exit) before an all_reduce rank 0 waits in;
``dead_rank_p2p``: rank 1 exits before the send rank 0's recv waits for."""

import os
import sys
import time
from datetime import timedelta

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist

TIMEOUT = 4.0
case = sys.argv[2]
rank = int(os.environ.get("RANK", "0"))


def timed(label, fn):
    start = time.monotonic()
    try:
        fn()
        outcome = "ok"
    except Exception as err:  # noqa: BLE001 - the type is what the program prints
        outcome = f"{type(err).__name__} ({'RuntimeError' if isinstance(err, RuntimeError) else 'other'})"
        if os.environ.get("SHOW_MESSAGE"):
            outcome += f" {str(err).splitlines()[0][:150]!r}"
    elapsed = time.monotonic() - start
    print(f"[rank {rank}] {label}: {outcome}, within the timeout's margin: {elapsed < TIMEOUT + 20}", flush=True)


dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT))
dist.barrier()
if case == "shape":
    timed("all_reduce", lambda: dist.all_reduce(torch.ones(4 + rank)))
elif case == "dtype":
    timed("all_reduce", lambda: dist.all_reduce(torch.ones(4, dtype=torch.float32 if rank == 0 else torch.float64)))
elif case == "broadcast_shape":
    timed("broadcast", lambda: dist.broadcast(torch.ones(6 if rank == 0 else 3), src=0))
elif case == "dead_rank":
    if rank == 1:
        os._exit(3)
    timed("all_reduce", lambda: dist.all_reduce(torch.ones(4)))
elif case == "dead_rank_p2p":
    if rank == 1:
        os._exit(3)
    timed("recv", lambda: dist.recv(torch.zeros(2), src=1))
sys.stdout.flush()
os._exit(0)  # leave without the group's teardown: the peer may be gone or stuck

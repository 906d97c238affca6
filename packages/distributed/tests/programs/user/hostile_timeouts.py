"""Timeouts a user meets (torchrun-style env, timeout=timedelta(seconds=3)); argv[2] the case:
``missing_rank``: started alone with WORLD_SIZE=2, init waits for a rank that never comes;
``skipped_collective``: at 2 ranks, rank 1 never calls an all_reduce rank 0 waits in;
``monitored_barrier``: at 2 ranks, rank 1 is late for rank 0's monitored_barrier;
``monitored_barrier_all``: at 3 ranks, ranks 1 and 2 are late (wait_all_ranks=True names both);
``wrong_world_size``: at 2 ranks, rank 1 believes the world has 3.
Each rank prints the exception type it got (with SHOW_MESSAGE set, its first line too) and whether
it came within the timeout's margin."""

import os
import sys
import time
from datetime import timedelta

if os.environ.get("DIST_LIB", "ember") != "torch":
    import ember

    sys.modules["torch"] = ember

import torch
import torch.distributed as dist

TIMEOUT = 3.0
case = sys.argv[2]
rank = int(os.environ.get("RANK", "0"))


def timed(label, fn):
    start = time.monotonic()
    try:
        fn()
        outcome = "ok"
    except Exception as err:  # noqa: BLE001 - the type is what the program prints
        outcome = type(err).__name__
        kind = "RuntimeError" if isinstance(err, RuntimeError) else "not RuntimeError"
        outcome += f" ({kind})"
        if os.environ.get("SHOW_MESSAGE"):
            outcome += f" {str(err).splitlines()[0][:120]!r}"
    elapsed = time.monotonic() - start
    print(f"[rank {rank}] {label}: {outcome}, within the timeout's margin: {elapsed < TIMEOUT + 20}")
    return outcome


if case == "missing_rank":
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1], RANK="0", WORLD_SIZE="2")
    timed("init", lambda: dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT)))
    print(f"[rank {rank}] initialized {dist.is_initialized()}")
elif case == "skipped_collective":
    dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT))
    if rank == 0:
        timed("all_reduce", lambda: dist.all_reduce(torch.ones(4)))
    else:
        time.sleep(TIMEOUT + 3)
        print(f"[rank {rank}] slept past the timeout")
elif case == "monitored_barrier":
    dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT * 4))
    if rank == 0:
        timed("monitored_barrier", lambda: dist.monitored_barrier(timeout=timedelta(seconds=TIMEOUT)))
    else:
        time.sleep(TIMEOUT + 3)
        print(f"[rank {rank}] slept past the timeout")
elif case == "monitored_barrier_all":  # at 3 ranks: ranks 1 and 2 are late, rank 0 waits for all
    dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT * 4))
    if rank == 0:
        timed("monitored_barrier", lambda: dist.monitored_barrier(timeout=timedelta(seconds=TIMEOUT),
                                                                  wait_all_ranks=True))
    else:
        time.sleep(TIMEOUT + 3)
        print(f"[rank {rank}] slept past the timeout")
elif case == "wrong_world_size":
    if rank == 1:
        os.environ["WORLD_SIZE"] = "3"
    timed("init", lambda: dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT)))
sys.stdout.flush()
os._exit(0)  # leave without the group's teardown: the peer may be gone or stuck

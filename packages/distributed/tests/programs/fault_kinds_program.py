"""A rank dies (SIGKILL) in the middle of one kind of operation; every survivor must raise in time.

argv[1]: the operation - all_gather, reduce_scatter, broadcast, send_recv (a ring: each rank sends
to the next and receives from the one before), barrier, all_to_all_single, all_reduce; argv[2]:
the group timeout; argv[3]: "during" (the victim starts its part with ``async_op=True``, lets the
transfer get going, then dies) or "before" (it dies before joining); argv[4]: elements per rank;
argv[5]: "async" (the survivors wait on ``async_op=True`` works: the group's worker thread sits in
``MPI_Wait``) or "sync"; argv[6]: "exit" (the survivors leave as a program that caught the error
would: destroy_process_group, then the interpreter's exit) or "_exit" (``os._exit``).
The victim is the last rank; it dies at the 4th operation. Survivors report the error type, how
long the failing call waited, and how a second call on the broken group ends.
"""

import os
import signal
import sys
import time

from prelude import dist, init, torch, write

kind, timeout_s, when = sys.argv[1], float(sys.argv[2]), sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 1 << 18
survivors_async = len(sys.argv) > 5 and sys.argv[5] == "async"
clean_exit = len(sys.argv) > 6 and sys.argv[6] == "exit"
rank, world = init(timeout_s=timeout_s)
victim = world - 1
x = torch.ones(n)
gathered = torch.zeros(n * world)
scattered = torch.zeros(n)
received = torch.zeros(n)
exchanged = torch.zeros(n * world)
spread = torch.ones(n * world)


def run(async_op=False):
    """Starts one operation of ``kind``; its works (a list: send/recv post two)."""
    if kind == "all_gather":
        return [dist.all_gather_into_tensor(gathered, x, async_op=async_op)]
    if kind == "reduce_scatter":
        return [dist.reduce_scatter_tensor(scattered, spread, async_op=async_op)]
    if kind == "broadcast":
        return [dist.broadcast(x, src=victim, async_op=async_op)]
    if kind == "send_recv":  # (isend/irecv: async whatever async_op says)
        return [dist.isend(x, (rank + 1) % world), dist.irecv(received, (rank - 1) % world)]
    if kind == "barrier":
        return [dist.barrier(async_op=async_op)]
    if kind == "all_to_all_single":
        return [dist.all_to_all_single(exchanged, spread, async_op=async_op)]
    if kind == "all_reduce":
        return [dist.all_reduce(x, async_op=async_op)]
    raise SystemExit(f"unknown operation {kind}")


def once():
    for work in run(survivors_async):
        if work is not None:
            work.wait()


result = {"completed": 0}
try:
    for step in range(50):
        if rank == victim and step == 3:
            if when == "during":
                run(async_op=True)
                time.sleep(0.005)
            os.kill(os.getpid(), signal.SIGKILL)
        start = time.monotonic()
        once()
        result["completed"] = step + 1
except Exception as err:  # noqa: BLE001 - the test looks at the type
    result.update(error=type(err).__name__, waited=time.monotonic() - start, message=str(err))
    again = time.monotonic()
    try:
        once()
        result["second"] = "ok"
    except Exception as err2:  # noqa: BLE001
        result["second"] = type(err2).__name__
    result["second_waited"] = time.monotonic() - again
write(rank, result)
sys.stdout.flush()
if clean_exit:
    dist.destroy_process_group()
    sys.exit(0)
os._exit(0)  # MPI state is broken: leave without finalizing

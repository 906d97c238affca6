"""NCCL failures that must end in an error, never a hang (``argv[1]`` picks the scenario).

- ``init_timeout`` (2 ranks, one GPU is enough): rank 0 starts a CUDA collective on a group with a
  4 s timeout; rank 1 never does. Rank 0 must raise ``DistBackendError`` naming rank 1, and
  every later call on that group must raise at once.
- ``stuck`` (1 rank): the current stream is held by a ``cuStreamWaitValue32`` on a host flag, so
  the all-reduce queued behind it cannot run: the watchdog must abort the communicator past the
  group's 3 s timeout, the work must report the error, the stream must drain once the flag is
  released, and a fresh group must work again.
- ``peer_dies`` (2 GPUs): both ranks loop over all-reduces until the test kills rank 1; rank 0
  must end with ``DistBackendError`` (liveness watch or NCCL's own error, then the abort).
- ``duplicate_gpu`` (2 ranks on one GPU): NCCL refuses two ranks on one device; both ranks
  must get an error (or, where NCCL allowed it, the right sum), within the harness's limit.
"""

import ctypes
import os
import sys
import time
from datetime import timedelta

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

from prelude import write  # noqa: E402

import ember as torch  # noqa: E402
import ember.distributed as dist  # noqa: E402

scenario = sys.argv[1]
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
dist.init_process_group("cpu:gloo,cuda:nccl", timeout=timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
R = {}


def attempt(fn):
    start = time.monotonic()
    try:
        fn()
        return {"error": None, "seconds": time.monotonic() - start}
    except Exception as err:  # noqa: BLE001 - the test checks the type and text
        return {"error": type(err).__name__, "text": str(err)[:600], "seconds": time.monotonic() - start}


if scenario == "init_timeout":
    group = dist.new_group(list(range(world)), timeout=timedelta(seconds=4))
    if rank == 0:
        R["first"] = attempt(lambda: dist.all_reduce(torch.ones(4, device="cuda"), group=group))
        R["again"] = attempt(lambda: dist.all_reduce(torch.ones(4, device="cuda"), group=group))
    dist.barrier()  # the world's CPU side is unharmed

elif scenario == "stuck":
    from cuda.bindings import driver as drv

    group = dist.new_group([0], timeout=timedelta(seconds=3))
    dist.all_reduce(torch.ones(1, device="cuda"), group=group)  # the communicator exists before the stall
    torch.cuda.synchronize()
    host = ctypes.c_uint32(0)
    # Pin the flag and give the GPU its address, then make the current stream wait for it to be 1.
    err, = drv.cuMemHostRegister(ctypes.addressof(host), 4, 0x02)  # CU_MEMHOSTREGISTER_DEVICEMAP
    R["register"] = int(err)
    err, dptr = drv.cuMemHostGetDevicePointer(ctypes.addressof(host), 0)
    stream = torch.cuda.current_stream()
    if stream.cuda_stream == 0:
        stream = torch.cuda.Stream()
        torch.cuda.set_stream(stream)
    err, = drv.cuStreamWaitValue32(stream.cuda_stream, dptr, 1, 0x0)  # CU_STREAM_WAIT_VALUE_GEQ
    R["wait_value"] = int(err)
    t = torch.ones(4, device="cuda")
    start = time.monotonic()
    work = dist.all_reduce(t, group=group, async_op=True)
    while not work.is_completed() and time.monotonic() - start < 30:
        time.sleep(0.05)
    R["reported_after"] = time.monotonic() - start
    R["completed"] = work.is_completed()
    exc = work.exception()
    R["exception"] = None if exc is None else [type(exc).__name__, str(exc)[:600]]
    R["wait"] = attempt(work.wait)
    host.value = 1  # let the stream go: queued work drains, nothing stays stuck
    R["drained"] = attempt(torch.cuda.synchronize)
    R["again"] = attempt(lambda: dist.all_reduce(torch.ones(2, device="cuda"), group=group))
    fresh = dist.new_group([0])
    u = torch.ones(3, device="cuda") * 5
    R["fresh"] = attempt(lambda: dist.all_reduce(u, group=fresh))
    R["fresh_value"] = u.cpu().tolist()

elif scenario == "duplicate_gpu":
    group = dist.new_group(list(range(world)), timeout=timedelta(seconds=20))
    t = torch.ones(4, device="cuda")

    def run():
        dist.all_reduce(t, group=group)
        torch.cuda.synchronize()

    R["result"] = attempt(run)
    R["value"] = t.cpu().tolist()
    dist.barrier()

elif scenario == "peer_dies":
    # The test kills rank 1 while both loop over all-reduces: rank 0 must get an error.
    group = dist.new_group(list(range(world)), timeout=timedelta(seconds=20))
    t = torch.ones(1 << 20, device="cuda")
    steps = [0]

    def loop():
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            dist.all_reduce(t, group=group)
            t.div_(world)
            float(t[0].item())  # the host waits for the GPU (it returns once the watchdog aborted)
            steps[0] += 1

    R["result"] = attempt(loop)
    R["steps"] = steps[0]

write(rank, R)
os._exit(0)  # an aborted communicator's threads must not hold the process at exit

"""Fault scenarios: the last rank dies (SIGKILL) or hangs mid-run; the others must raise in time.

argv[1]: "kill" (the victim SIGKILLs itself before the 4th all_reduce) or "hang" (it stops calling
collectives and stays alive until rank 0 has reported - so the survivors' only way out is their
timeout, however late a loaded machine runs them - or 60 s past the timeout at most);
argv[2]: the group timeout; argv[3]: the victim's rank (default: the last). Survivors report
the error type and how long they waited.
"""

import os
import signal
import sys
import time

from prelude import dist, init, torch, write

mode = sys.argv[1]
timeout_s = float(sys.argv[2])
rank, world = init(timeout_s=timeout_s)
victim = int(sys.argv[3]) if len(sys.argv) > 3 else world - 1
x = torch.ones(1000)
result = {"completed": 0}
try:
    for step in range(200):
        if rank == victim and step == 3:
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            report = os.path.join(os.environ["DIST_OUT"], "rank0.json")
            give_up = time.monotonic() + timeout_s + 60
            while not os.path.exists(report) and time.monotonic() < give_up:
                time.sleep(0.05)
            os._exit(0)
        start = time.monotonic()
        dist.all_reduce(x)
        result["completed"] = step + 1
except Exception as err:  # noqa: BLE001 - the test looks at the type
    result.update(
        error=type(err).__name__, mro=[c.__name__ for c in type(err).__mro__], waited=time.monotonic() - start,
        message=str(err),
    )
    # The group is broken now: a second call must fail at once, not hang.
    again = time.monotonic()
    try:
        dist.all_reduce(torch.ones(2))
        result["second"] = "ok"
    except Exception as err2:  # noqa: BLE001
        result["second"] = type(err2).__name__
    result["second_waited"] = time.monotonic() - again
write(rank, result)
sys.stdout.flush()
os._exit(0)  # MPI state is broken: leave without finalizing

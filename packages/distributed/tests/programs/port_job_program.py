"""One job of two that may share a port: joins, all_reduces rank + 1, writes ``joined<rank>``
into its output folder, then (argv[3] "after") waits for a file ``go`` there before a second
all_reduce of ones; reports the sums or the error.

argv[1]: the group timeout; argv[2]: unused (0); argv[3]: "after" to wait for ``go``.
"""

import os
import sys
import time

from prelude import dist, init, torch, write

start = time.monotonic()
result = {}
rank = int(os.environ["RANK"])
out = os.environ["DIST_OUT"]
try:
    rank, world = init(timeout_s=float(sys.argv[1]))
    x = torch.full((2,), float(rank + 1))
    dist.all_reduce(x)
    result["sum"] = x
    open(os.path.join(out, f"joined{rank}"), "w").close()
    if len(sys.argv) > 3 and sys.argv[3] == "after":
        give_up = time.monotonic() + 60
        while not os.path.exists(os.path.join(out, "go")) and time.monotonic() < give_up:
            time.sleep(0.05)
    y = torch.ones(2)
    dist.all_reduce(y)
    result.update(error=None, count=y)
    dist.destroy_process_group()
except Exception as err:  # noqa: BLE001 - the test looks at the type
    result.update(error=type(err).__name__, message=str(err))
result["seconds"] = time.monotonic() - start
write(rank, result)

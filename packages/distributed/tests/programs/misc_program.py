"""Debug-mode mismatch detection, subgroups, monitored_barrier (ember only: gloo has no DETAIL
fingerprints through this path). Run with EMBER_DISTRIBUTED_DEBUG=DETAIL."""

import time
from datetime import timedelta

from prelude import dist, init, torch, write

rank, world = init(timeout_s=30)
R = {}
# the same collective everywhere passes
x = torch.ones(3)
dist.all_reduce(x)
R["matched"] = x
# shapes differ between ranks: every rank raises, naming both fingerprints
try:
    dist.all_reduce(torch.ones(4 + rank))
    R["shape_mismatch"] = "none"
except RuntimeError as err:
    other = 4 + (1 if rank == 0 else 0)  # the first rank whose fingerprint differs from this one's
    R["shape_mismatch"] = ["RuntimeError", "Detected mismatch" in str(err), f"TensorShape=[[{4 + rank}]]" in str(err),
                           f"TensorShape=[[{other}]]" in str(err)]
# operations differ
try:
    if rank == 0:
        dist.all_reduce(torch.ones(2))
    else:
        dist.broadcast(torch.ones(2), src=0)
    R["op_mismatch"] = "none"
except RuntimeError as err:
    R["op_mismatch"] = ["RuntimeError", "OpType=ALLREDUCE" in str(err) and "OpType=BROADCAST" in str(err)]
# the last rank's all_gather input differs and so its output list does not fit: every rank
# raises the mismatch (the fingerprint comes before the local check), and the group goes on
try:
    n = 3 if rank == world - 1 else 2
    dist.all_gather([torch.zeros(2) for _ in range(world)], torch.ones(n))
    R["gather_mismatch"] = "none"
except RuntimeError as err:
    R["gather_mismatch"] = ["RuntimeError", "Detected mismatch" in str(err)]
dist.barrier()

# subgroups of 2
mine, groups = dist.new_subgroups(group_size=2)
t = torch.tensor([float(rank)])
dist.all_reduce(t, group=mine)
R["subgroup"] = [t, dist.get_process_group_ranks(mine), len(groups)]

# monitored_barrier: everyone arrives
dist.monitored_barrier(timeout=timedelta(seconds=10))
R["monitored_ok"] = True
# the last rank is late: rank 0 names it
if rank == world - 1:
    time.sleep(3)
try:
    dist.monitored_barrier(timeout=timedelta(seconds=1), wait_all_ranks=True)
    R["monitored_late"] = "ok"
except RuntimeError as err:
    R["monitored_late"] = str(err)
write(rank, R)
# The late rank's barrier may still be waiting for rank 0's release: leave without a teardown
# handshake (the test checks the reports).
__import__("os")._exit(0)

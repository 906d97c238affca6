"""A/B of ember's synchronous all_reduce waits beside MPICH alone, in the same processes.

    python benchmarks/bench_distributed_wait.py [--ranks 2] [--sizes 1M,4M,16M,64M] [--blocks-scale 2]

Per size, every block (a barrier, then a few calls) runs each variant in turn, the variant that
goes first rotating, so all of them see the machine at the same moments (on a shared, loaded
machine runs a minute apart differ more than the variants do). Variants, float32 SUM:

- ``mpich``: mpi4py's blocking ``Allreduce`` on a NumPy array of its own, on ember's communicator
  (MPICH alone, as its users call it; its wait spins with a ``sched_yield`` per progress poll);
- ``iwait``: ``Iallreduce`` on the ember tensor's memory and a blocking ``Wait`` (MPICH's
  nonblocking algorithm with its own wait);
- ``ember``: ``ember.distributed.all_reduce`` as it is;
- ``ember-nap``: the same with the large-message wait of a busy machine off (spin 1 ms, then
  nap: the wait before session 16).

Per variant: the median over blocks of the slowest rank's time per call, the 10th percentile
(the blocks where both ranks had their cores), and the median of the per-block ratios to
``mpich`` (paired: the steadiest comparison under load). Prints the load average before and
after: say it with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_distributed import _free_port, _parse_size  # this script's folder is on sys.path

WORKER = r'''
import json, os, sys, time
sizes, out, scale = [int(s) for s in sys.argv[1].split(",")], sys.argv[2], float(sys.argv[3])
import numpy as np
import ember, ember.distributed as dist
from ember.distributed import _mpi_engine
ember.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
comm = dist.group.WORLD._engine.comm
from mpi4py import MPI
results = {}
for nbytes in sizes:
    t = ember.ones(nbytes // 4)
    array = np.ones(nbytes // 4, dtype=np.float32)
    memory = [MPI.buffer.fromaddress(t._storage.data_ptr(), nbytes), MPI.FLOAT]

    def ember_nap():
        large, _mpi_engine._LARGE_BYTES = _mpi_engine._LARGE_BYTES, 1 << 62  # the large-message wait off
        try:
            dist.all_reduce(t)
        finally:
            _mpi_engine._LARGE_BYTES = large

    calls = {
        "mpich": lambda: comm.Allreduce(MPI.IN_PLACE, [array, MPI.FLOAT]),
        "iwait": lambda: comm.Iallreduce(MPI.IN_PLACE, memory, MPI.SUM).Wait(),
        "ember": lambda: dist.all_reduce(t),
        "ember-nap": ember_nap,
    }
    reps = max(1, min(20, int(2e7 // nbytes)))
    blocks = int(max(8, min(60, int(1.5e9 // nbytes // reps))) * scale)
    for call in calls.values():
        for _ in range(3):
            call()
    kinds = list(calls)
    samples = {kind: [] for kind in kinds}
    for block in range(blocks):
        for kind in kinds[block % len(kinds):] + kinds[:block % len(kinds)]:
            comm.Barrier()
            start = time.perf_counter()
            for _ in range(reps):
                calls[kind]()
            samples[kind].append((time.perf_counter() - start) / reps)
    for kind, values in samples.items():
        results[f"{kind}:{nbytes}"] = values
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump(results, f)
dist.destroy_process_group()
'''

KINDS = ("mpich", "iwait", "ember", "ember-nap")


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--sizes", default="1M,4M,16M,64M")
    parser.add_argument("--blocks-scale", type=float, default=1.0, help="more blocks per size (x)")
    args = parser.parse_args()
    sizes = [_parse_size(s) for s in args.sizes.split(",")]
    out = tempfile.mkdtemp(prefix="bench-wait-")
    script = os.path.join(out, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()), WORLD_SIZE=str(args.ranks))
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    # each rank in a session of its own, as mpiexec, torchrun and ember-run start them
    procs = [subprocess.Popen([sys.executable, script, ",".join(map(str, sizes)), out, str(args.blocks_scale)],
                              env=dict(env, RANK=str(r)), start_new_session=True) for r in range(args.ranks)]
    for p in procs:
        if p.wait(timeout=900) != 0:
            raise SystemExit("workers failed")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    per_rank = []
    for r in range(args.ranks):
        with open(os.path.join(out, f"rank{r}.json")) as f:
            per_rank.append(json.load(f))
    print(f"all_reduce float32 SUM, {args.ranks} ranks: median [10th percentile] per call, "
          "(median of per-block ratios to mpich)")
    for n in sizes:
        slowest = {k: [max(rank[f"{k}:{n}"][i] for rank in per_rank) for i in range(len(per_rank[0][f"{k}:{n}"]))]
                   for k in KINDS}
        base = slowest["mpich"]
        cells = []
        for k in KINDS:
            values = slowest[k]
            paired = statistics.median(v / b for v, b in zip(values, base))
            cells.append(f"{k} {_fmt(statistics.median(values))} [{_fmt(sorted(values)[len(values) // 10])}] "
                         f"({paired:.2f})")
        label = f"{n // 1024}K" if n < 1024 * 1024 else f"{n // (1024 * 1024)}M"
        print(f"{label:>5}: " + " | ".join(cells))


if __name__ == "__main__":
    main()

"""A/B of ember's synchronous all_reduce waits beside MPICH alone, in the same processes.

    python benchmarks/bench_distributed_wait.py [--ranks 2] [--sizes 1M,4M,16M,64M] [--blocks-scale 2]
        [--variants mpich,iwait,ember,ember-nap,ember-spin]

Per size, every block (a barrier, then a few calls) runs each variant in turn, the variant that
goes first rotating, so all of them see the machine at the same moments (on a shared, loaded
machine runs a minute apart differ more than the variants do). Variants, float32 SUM:

- ``mpich``: mpi4py's blocking ``Allreduce`` on a NumPy array of its own, on ember's communicator
  (MPICH alone, as its users call it; its wait spins with a ``sched_yield`` per progress poll);
  ``mpich-tensor``: the same on the ember tensor's memory;
- ``iwait``: ``Iallreduce`` on the ember tensor's memory and a blocking ``Wait`` (MPICH's
  nonblocking algorithm with its own wait); ``iwait-numpy``: the same on the NumPy array;
- ``ember``: ``ember.distributed.all_reduce`` as it is;
- ``ember-nap``: the same with the large-message wait of a busy machine off (spin 1 ms, then
  nap: the wait before session 16);
- ``ember-spin``: the small-message (<= 64 KB) wait of a busy machine as before session 17 (spin
  on; the data starts after the signatures); ``ember-yield<us>``: it yields after every test
  (session 17's wait) once <us> have passed (no number: ember's spin for the size; ``-always``:
  busy machine or not; ``-after``: data after the signatures);
- ``ember-nap<us>``: the small-message wait of a busy machine naps after its spin for the size
  (10 us doubling up to <us>) instead of yielding after every test (``-always``: busy or not);
- ``<variant>@<algorithm>``: MPICH's algorithm set through MPI_T around each call, for ``mpich``
  ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM``, for the others ``MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM``
  (e.g. ``ember@sched_reduce_scatter_allgather``);
- ``gloo``: PyTorch's gloo all_reduce in the same processes (its own group), as
  ``bench_distributed.py`` runs it: its waits sleep in the kernel, after which the kernel tends to
  put both ranks on one core.

Per variant: the median over blocks of the slowest rank's time per call, the 10th percentile
(the blocks where both ranks had their cores), and the median of the per-block ratios to the
first variant (paired: the steadiest comparison under load); and the share of blocks after which
ember's waits judged the machine busy (``_work._machine_busy``); with ``--breakdown``, per rank
where the calls' time went (the calling thread's time on a core and its time runnable but waiting
for one, /proc/thread-self/schedstat; its page faults; medians over blocks). Prints the load average before and
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
import json, os, resource, sys, time
sizes, out, scale = [int(s) for s in sys.argv[1].split(",")], sys.argv[2], float(sys.argv[3])
variants = sys.argv[4].split(",")
import numpy as np
import ember, ember.distributed as dist
from ember.distributed import _mpi_engine, _work
ember.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
comm = dist.group.WORLD._engine.comm
from mpi4py import MPI
# MPICH's values of MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM (read back through MPI_T with each name in
# the environment at MPI_Init; MPI_T knows the variable as a plain int)
IALLREDUCE_ALGORITHMS = (
    "auto", "sched_auto", "sched_naive", "sched_smp", "sched_recursive_doubling", "sched_reduce_scatter_allgather",
    "tsp_recexch_single_buffer", "tsp_recexch_multiple_buffer", "tsp_tree", "tsp_ring",
    "tsp_recexch_reduce_scatter_recexch_allgatherv")
ALLREDUCE_ALGORITHMS = (  # MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM's, the same way
    "auto", "nb", "smp", "recursive_doubling", "recursive_multiplying", "reduce_scatter_allgather", "tree",
    "recexch", "ring", "k_reduce_scatter_allgather", "ccl")


def cvar_writer(name):
    """A function that sets MPICH's control variable ``name`` (an int) through MPI_T, now."""
    import ctypes
    with open("/proc/self/maps") as f:
        path = next(line.split()[-1] for line in f if "/libmpi.so" in line)
    lib = ctypes.CDLL(path)
    provided, index, handle, count = ctypes.c_int(), ctypes.c_int(), ctypes.c_void_p(), ctypes.c_int()
    assert lib.MPI_T_init_thread(3, ctypes.byref(provided)) == 0  # MPI_THREAD_MULTIPLE in MPICH
    assert lib.MPI_T_cvar_get_index(name.encode(), ctypes.byref(index)) == 0
    assert lib.MPI_T_cvar_handle_alloc(index, None, ctypes.byref(handle), ctypes.byref(count)) == 0

    def write(value):
        box = ctypes.c_int(value)
        assert lib.MPI_T_cvar_write(handle, ctypes.byref(box)) == 0
    return write


if any("@" in v for v in variants):
    set_ialg = cvar_writer("MPIR_CVAR_IALLREDUCE_INTRA_ALGORITHM")
    set_alg = cvar_writer("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM")
if "gloo" in variants:
    import torch
    import torch.distributed as torch_dist
    torch.set_num_threads(1)
    torch_dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['GLOO_PORT']}", rank=rank,
                                  world_size=dist.get_world_size())
def schedstat():
    """This thread's time on a core and time runnable but waiting for one (ns), and its page
    faults (0s off Linux)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            ran, waited = f.read().split()[:2]
        usage = resource.getrusage(resource.RUSAGE_THREAD)
        return int(ran), int(waited), usage.ru_minflt + usage.ru_majflt
    except (OSError, ValueError, AttributeError):
        return 0, 0, 0


results = {}
for nbytes in sizes:
    t = ember.ones(nbytes // 4)
    array = np.ones(nbytes // 4, dtype=np.float32)
    memory = [MPI.buffer.fromaddress(t._storage.data_ptr(), nbytes), MPI.FLOAT]

    def patched(*changes):
        """ember's all_reduce with (module, name, value) changes made around the call."""
        def call():
            saved = [(module, name, getattr(module, name)) for module, name, _ in changes]
            for module, name, value in changes:
                setattr(module, name, value)
            try:
                dist.all_reduce(t)
            finally:
                for module, name, value in saved:
                    setattr(module, name, value)
        return call

    def variant(kind):
        if "@" in kind:  # MPICH's algorithm (blocking for mpich, else Iallreduce's) set around the call
            base, algorithm = kind.split("@")
            blocking = base == "mpich"
            call = variant(base)
            code = (ALLREDUCE_ALGORITHMS if blocking else IALLREDUCE_ALGORITHMS).index(algorithm)
            write = set_alg if blocking else set_ialg

            def with_algorithm():
                write(code)
                try:
                    call()
                finally:
                    write(0)
            return with_algorithm
        if kind == "mpich":
            return lambda: comm.Allreduce(MPI.IN_PLACE, [array, MPI.FLOAT])
        if kind == "iwait":
            return lambda: comm.Iallreduce(MPI.IN_PLACE, memory, MPI.SUM).Wait()
        if kind == "gloo":  # PyTorch's gloo in the same processes (its own group), as bench_distributed.py
            tensor = torch.ones(nbytes // 4)
            return lambda: torch_dist.all_reduce(tensor)
        if kind == "mpich-tensor":  # the blocking call on the ember tensor's memory
            return lambda: comm.Allreduce(MPI.IN_PLACE, memory, MPI.SUM)
        if kind == "iwait-numpy":  # the nonblocking call and wait on the NumPy array
            return lambda: comm.Iallreduce(MPI.IN_PLACE, [array, MPI.FLOAT], MPI.SUM).Wait()
        if kind == "ember":
            return lambda: dist.all_reduce(t)
        if kind == "ember-nap":  # the large-message wait of a busy machine off
            return patched((_mpi_engine, "_LARGE_BYTES", 1 << 62))
        if kind == "ember-spin":
            # the small-message wait of a busy machine as before session 17: it spins, and the data
            # starts after the signatures came back
            return patched((_work, "_SMALL_SPIN_PER_BYTE", float("inf")),
                           (_mpi_engine, "_SMALL_AT_ONCE_IF_BUSY", False))
        if kind.startswith("ember-nap") and kind != "ember-nap":
            # ember-nap<us>: the small-message wait of a busy machine naps after its spin (10 us
            # doubling up to <us>) instead of yielding; -always: busy machine or not
            cap, *flags = kind[len("ember-nap"):].split("-")
            changes = [(_work, "_SMALL_BUSY_NAP", float(cap) * 1e-6)]
            if "always" in flags:
                changes.append((_work, "_machine_busy", lambda now: True))
            return patched(*changes)
        if kind.startswith("ember-yield"):
            # ember-yield<us>: the small-message wait of a busy machine yields after this many us
            # (ember's own: as long as the size takes); -always: whether the machine is busy or not;
            # -after: the data starts after the signatures come back
            spin, *flags = kind[len("ember-yield"):].split("-")
            changes = [(_work, "_SMALL_BUSY_NAP", None)]
            if spin:
                changes.append((_work, "_SMALL_SPIN_PER_BYTE", float(spin) * 1e-6 / max(nbytes, 1)))
            if "always" in flags:
                changes.append((_work, "_machine_busy", lambda now: True))
            if "after" in flags:
                changes.append((_mpi_engine, "_SMALL_AT_ONCE_IF_BUSY", False))
            return patched(*changes)
        raise SystemExit(f"unknown variant {kind}")

    calls = {kind: variant(kind) for kind in variants}
    reps = max(1, min(20, int(2e7 // nbytes)))
    blocks = int(max(8, min(60, int(1.5e9 // nbytes // reps))) * scale)
    for call in calls.values():
        for _ in range(3):
            call()
    kinds = list(calls)
    samples = {kind: [] for kind in kinds}
    busy = []  # per block: whether ember's waits judged the machine busy (``_work._machine_busy``)
    cpu = {kind: [] for kind in kinds}  # per block: this thread's time on a core per call
    delay = {kind: [] for kind in kinds}  # and its time runnable but waiting for a core
    fault = {kind: [] for kind in kinds}  # and its page faults
    for block in range(blocks):
        for kind in kinds[block % len(kinds):] + kinds[:block % len(kinds)]:
            comm.Barrier()
            ran, waited, faults = schedstat()
            start = time.perf_counter()
            for _ in range(reps):
                calls[kind]()
            samples[kind].append((time.perf_counter() - start) / reps)
            ran2, waited2, faults2 = schedstat()
            cpu[kind].append((ran2 - ran) * 1e-9 / reps)
            delay[kind].append((waited2 - waited) * 1e-9 / reps)
            fault[kind].append((faults2 - faults) / reps)
        busy.append(_work._LOAD[1])
    for kind, values in samples.items():
        results[f"{kind}:{nbytes}"] = values
        results[f"cpu:{kind}:{nbytes}"] = cpu[kind]
        results[f"delay:{kind}:{nbytes}"] = delay[kind]
        results[f"faults:{kind}:{nbytes}"] = fault[kind]
    results[f"busy:{nbytes}"] = sum(busy) / len(busy)
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump(results, f)
dist.destroy_process_group()
'''

DEFAULT_VARIANTS = "mpich,iwait,ember,ember-nap,ember-spin"


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--sizes", default="1M,4M,16M,64M")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                        help="comma-separated; the first is the base of the ratios (see the module doc)")
    parser.add_argument("--blocks-scale", type=float, default=1.0, help="more blocks per size (x)")
    parser.add_argument("--breakdown", action="store_true",
                        help="also print each rank's time on a core and waiting for one per call (schedstat)")
    args = parser.parse_args()
    sizes = [_parse_size(s) for s in args.sizes.split(",")]
    kinds = args.variants.split(",")
    out = tempfile.mkdtemp(prefix="bench-wait-")
    script = os.path.join(out, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()), GLOO_PORT=str(_free_port()), WORLD_SIZE=str(args.ranks))
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    # each rank in a session of its own, as mpiexec, torchrun and ember-run start them
    argv = [sys.executable, script, ",".join(map(str, sizes)), out, str(args.blocks_scale), args.variants]
    procs = [subprocess.Popen(argv, env=dict(env, RANK=str(r)), start_new_session=True) for r in range(args.ranks)]
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
                   for k in kinds}
        base = slowest[kinds[0]]
        cells = []
        for k in kinds:
            values = slowest[k]
            paired = statistics.median(v / b for v, b in zip(values, base))
            cells.append(f"{k} {_fmt(statistics.median(values))} [{_fmt(sorted(values)[len(values) // 10])}] "
                         f"({paired:.2f})")
        label = f"{n // 1024}K" if n < 1024 * 1024 else f"{n // (1024 * 1024)}M"
        busy = " ".join(f"{rank[f'busy:{n}']:.0%}" for rank in per_rank)
        print(f"{label:>5}: " + " | ".join(cells) + f" (busy: {busy} of blocks)")
        if args.breakdown:
            # where a call's time goes, per rank (medians over blocks): on a core, runnable but
            # waiting for one (the kernel's run delay), and the rest (asleep, or not yet counted)
            parts = []
            for k in kinds:
                per = []
                for rank in per_rank:
                    wall = statistics.median(rank[f"{k}:{n}"])
                    cpu = statistics.median(rank[f"cpu:{k}:{n}"])
                    delay = statistics.median(rank[f"delay:{k}:{n}"])
                    faults = statistics.median(rank[f"faults:{k}:{n}"])
                    per.append(f"{_fmt(cpu)} + {_fmt(delay)} of {_fmt(wall)}, {faults:.0f} faults")
                parts.append(f"{k} " + " / ".join(per))
            print("       on a core + waiting for one, of the wall time (rank 0 / rank 1 ...): " + " | ".join(parts))


if __name__ == "__main__":
    main()

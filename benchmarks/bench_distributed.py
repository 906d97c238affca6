"""all_reduce (float32, SUM) at 2 and 4 ranks: ember beside PyTorch's gloo and beside MPICH alone;
then a DDP training step beside a single-process step and beside PyTorch's DDP.

    python benchmarks/bench_distributed.py [--ranks 2,4] [--sizes 4K,64K,1M,16M,64M]

One run starts, per rank count, three groups of processes one after the other on this machine:
ember (``init_process_group`` over env://, its MPI engine), PyTorch 2.13 with gloo (the same
program with ``import torch``), and mpi4py's blocking ``Comm.Allreduce`` on NumPy arrays under
``mpiexec`` (the engine with nothing on top). Every process runs one thread.

Timing: each size runs as many short blocks (a barrier, then a few calls); per block the slowest
rank's mean time per call counts. The table gives the median over blocks and, in brackets, the
fastest block: on a shared, loaded machine the median moves with the load between the three
runs, the minimum much less. The last two columns are the steadiest comparisons: inside the
ember run, every block of ember calls takes turns with a block of mpi4py's ``Allreduce`` on the
same communicator and a block of PyTorch's gloo (its own group) in the same processes, at the
same moment (MPICH on a NumPy array of its own, as mpi4py's users call it); ratios of the medians,
then the median of the per-block ratios (each block's ember time over the other's in the same
round: the pairing takes out most of the load's drift, which the ratio of medians keeps).

The DDP figure: an MLP (256 -> 1024 -> 1024 -> 10, 1.3 M parameters, 64 samples per rank), one
SGD step (forward, backward with the bucketed all-reduce, update), 30 steps. The FSDP2 figure:
the same model with ``fully_shard`` on every Linear and on the root (all-gather per layer in
forward and again in backward, reduce-scatter of each layer's gradients). Both run ember and
PyTorch in the same processes (each library with its own process group), alternating steps:
separate runs a minute apart measured the machine's load more than the libraries. Every step
of either library follows the same barrier (gloo's; ``--own-barriers``: each its own), so that
neither starts with the scheduler's wake-up credit the other lacks (see the worker).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

WORKER = r'''
import json, os, statistics, sys, time
lib, sizes, out = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3]
import numpy as np

def reps_for(nbytes):
    # calls per timed block: the first call after the barrier absorbs the ranks' exit skew
    # from it, so a block of ~20 calls up to 1 MB (2 calls of 1 MB swung 0.2-3 ms a block)
    return max(1, min(20, int(2e7 // max(nbytes, 1))))

if lib == "mpi":
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    def make(n):
        return np.ones(n, dtype=np.float32)
    def once(buf):
        comm.Allreduce(MPI.IN_PLACE, buf)
    barrier = comm.Barrier
else:
    if lib == "torch":
        import torch, torch.distributed as dist
        torch.set_num_threads(1)
    else:
        import ember as torch, ember.distributed as dist
        torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    def make(n):
        return torch.ones(n)
    def once(buf):
        dist.all_reduce(buf)
    barrier = dist.barrier

results = {}
same_procs = lib == "ember" and sizes
if same_procs:
    from mpi4py import MPI  # started by ember: the same world, on ember's own communicator
    comm = dist.group.WORLD._engine.comm
    # PyTorch's gloo in the same processes too (its own group, on GLOO_PORT)
    import torch as T, torch.distributed as TD
    T.set_num_threads(1)
    TD.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['GLOO_PORT']}", rank=rank,
                          world_size=dist.get_world_size())
for nbytes in sizes:
    buf = make(nbytes // 4)
    reps = reps_for(nbytes)
    blocks = max(8, min(60, int(1.5e9 // max(nbytes, 1) // reps)))
    calls = {"e": (lambda: once(buf), barrier)}
    if same_procs:
        # mpi4py as its users call it: on a NumPy array of its own (NumPy puts arrays from 4 MB on
        # huge pages, which MPICH's cross-process copies of large messages run 2x faster on)
        array, tbuf = np.ones(nbytes // 4, dtype=np.float32), T.ones(nbytes // 4)
        calls["m"] = (lambda: comm.Allreduce(MPI.IN_PLACE, array), barrier)
        calls["g"] = (lambda: TD.all_reduce(tbuf), TD.barrier)
    for _ in range(3):
        for call, _ in calls.values():
            call()
    samples = {kind: [] for kind in calls}
    kinds = list(calls)
    for block in range(blocks):
        # the libraries take turns at going first, so none always follows the barrier
        for kind in kinds[block % len(kinds):] + kinds[:block % len(kinds)]:
            call, sync = calls[kind]
            sync()
            start = time.perf_counter()
            for _ in range(reps):
                call()
            samples[kind].append((time.perf_counter() - start) / reps)
    for kind, values in samples.items():
        results[f"{kind}:{nbytes}"] = values
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump(results, f)
if lib != "mpi":
    dist.destroy_process_group()
if same_procs:
    TD.destroy_process_group()
'''


TRAINING_WORKER = r'''
# ember and PyTorch side by side in the same processes (PyTorch's gloo group on MASTER_PORT,
# ember's on EMBER_PORT); their steps alternate, so both see the same machine at the same moment.
import json, os, statistics, sys, time
kind, out = sys.argv[1], sys.argv[2]
import torch as T, torch.distributed as TD
import ember as E, ember.distributed as ED
T.set_num_threads(1)
E.set_num_threads(1)
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
TD.init_process_group("gloo")
ED.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['EMBER_PORT']}", rank=rank, world_size=world)

def build(lib, dist_lib):
    lib.manual_seed(0)
    nn = lib.nn
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    if world == 1:
        wrapped = model
    elif kind == "ddp":
        wrapped = dist_lib.DDP(model)
    else:
        for layer in model:
            if isinstance(layer, nn.Linear):
                dist_lib.fully_shard(layer)
        wrapped = dist_lib.fully_shard(model)
    opt = lib.optim.SGD(wrapped.parameters(), lr=0.01)
    x, y = lib.randn(64, 256), lib.randint(0, 10, (64,))

    def step():
        opt.zero_grad()
        lib.nn.functional.cross_entropy(wrapped(x), y).backward()
        opt.step()
    return step

class _T:
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.fsdp import fully_shard
class _E:
    from ember.nn.parallel import DistributedDataParallel as DDP
    from ember.distributed.fsdp import fully_shard
steps = {"ember": build(E, _E), "torch": build(T, _T)}
# One barrier before every step of either library (PyTorch's gloo one; --own-barriers: each
# library's own). On a busy machine the step after a barrier that slept (gloo's blocks in the
# kernel) starts with the scheduler's wake-up credit, one after a barrier that returned at once
# (ember's MPI barrier in a world of one) does not: measured 0.82x with gloo's before both, 0.91-1.00x
# with each its own, for the same single-process step.
own = os.environ.get("BENCH_OWN_BARRIERS") == "1"
barriers = {"ember": ED.barrier if own else TD.barrier, "torch": TD.barrier}
samples = {"ember": [], "torch": []}
for i in range(63):
    for name in (("ember", "torch") if i % 2 else ("torch", "ember")):
        barriers[name]()
        start = time.perf_counter()
        steps[name]()
        if i >= 3:
            samples[name].append(time.perf_counter() - start)
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump(samples, f)
ED.destroy_process_group()
TD.destroy_process_group()
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _parse_size(text: str) -> int:
    units = {"K": 1024, "M": 1024 * 1024}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def _run(lib: str, ranks: int, sizes: list[int]) -> dict[str, tuple[float, float]]:
    """Per "e:size" (and, for ember, "m:size" and "g:size": MPICH alone and gloo in the same
    processes), the median and the minimum over blocks of the slowest rank's time per call."""
    out = tempfile.mkdtemp(prefix=f"bench-{lib}-")
    script = os.path.join(out, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    args = [sys.executable, script, lib, ",".join(map(str, sizes)), out]
    if lib == "mpi":
        procs = [subprocess.Popen(["mpiexec", "-n", str(ranks), *args], env=env)]
    else:
        # Each rank in a session of its own, as mpiexec (Hydra) and torchrun start them: with the
        # kernel's autogroup scheduling a session shares the CPU as one group, so ranks sharing
        # the benchmark's session would get a smaller slice of a loaded machine than mpiexec's.
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), GLOO_PORT=str(_free_port()),
                   WORLD_SIZE=str(ranks))
        procs = [subprocess.Popen(args, env=dict(env, RANK=str(r)), start_new_session=True) for r in range(ranks)]
    for p in procs:
        if p.wait(timeout=900) != 0:
            raise SystemExit(f"{lib} workers failed")
    per_rank = []
    for r in range(ranks):
        with open(os.path.join(out, f"rank{r}.json")) as f:
            per_rank.append(json.load(f))
    figures = {}
    slowest = {}
    for n in per_rank[0]:
        slowest[n] = [max(rank[n][i] for rank in per_rank) for i in range(len(per_rank[0][n]))]
        figures[n] = (statistics.median(slowest[n]), min(slowest[n]))
    for n in per_rank[0]:
        if n.startswith("e:") and "m" + n[1:] in slowest:
            # paired: the median over blocks of ember's time over the other library's in the same
            # block (the same moment of the machine's load)
            for other in "mg":
                figures[f"{other}/{n}"] = statistics.median(
                    e / o for e, o in zip(slowest[n], slowest[other + n[1:]]))
    return figures


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:8.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:8.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", default="2,4", help="rank counts for all_reduce (DDP/FSDP: the first)")
    parser.add_argument("--sizes", default="4K,64K,1M,16M,64M")
    parser.add_argument("--parts", default="allreduce,ddp,fsdp", help="which of allreduce,ddp,fsdp to run")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--own-barriers", action="store_true",
                        help="training: each library's own barrier before its steps (default: gloo's before both)")
    args = parser.parse_args()
    args.rank_counts = [int(r) for r in args.ranks.split(",")]
    args.ranks = args.rank_counts[0]
    sizes = [_parse_size(s) for s in args.sizes.split(",")]
    started = time.time()
    parts = args.parts.split(",")
    figures = {}
    if "allreduce" in parts:
        for ranks in args.rank_counts:
            figures[ranks] = _allreduce(ranks, sizes, started)
    if "ddp" in parts:
        _ddp(args)
    if "fsdp" in parts:
        _fsdp(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(ranks): {lib: {str(n): v for n, v in fig.items()} for lib, fig in by_lib.items()}
                       for ranks, by_lib in figures.items()}, f, indent=1)


def _allreduce(ranks, sizes, started):
    figures = {lib: _run(lib, ranks, sizes) for lib in ("ember", "torch", "mpi")}
    print(f"\nall_reduce float32 SUM, {ranks} ranks, 1 thread each ({time.time() - started:.0f} s); "
          "median [fastest block] per call")
    print(f"{'size':>6} | {'ember':>21} | {'gloo':>21} | {'mpi4py (mpiexec)':>21} | ember/gloo | ember/mpi4py"
          " | same processes: ember/MPICH | ember/gloo  (ratio of medians (the other's median; fastest blocks'"
          " ratio), median of per-block ratios)")
    for n in sizes:
        (e, e_min), (t, t_min) = figures["ember"][f"e:{n}"], figures["torch"][f"e:{n}"]
        m, m_min = figures["mpi"][f"e:{n}"]
        same, same_min = figures["ember"][f"m:{n}"]
        gloo, gloo_min = figures["ember"][f"g:{n}"]
        label = f"{n // 1024}K" if n < 1024 * 1024 else f"{n // (1024 * 1024)}M"
        print(f"{label:>6} | {_fmt(e)} [{_fmt(e_min)}] | {_fmt(t)} [{_fmt(t_min)}] | {_fmt(m)} [{_fmt(m_min)}] | "
              f"{e / t:10.2f} | {e / m:12.2f} | {e / same:5.2f} ({_fmt(same).strip()}; fastest {e_min / same_min:.2f}),"
              f" {figures['ember'][f'm/e:{n}']:.2f} | {e / gloo:5.2f} ({_fmt(gloo).strip()}; fastest"
              f" {e_min / gloo_min:.2f}), {figures['ember'][f'g/e:{n}']:.2f}")
    return figures


def _training(kind: str, ranks: int, own_barriers: bool = False) -> dict[str, tuple[float, float]]:
    """ember's and PyTorch's step in the same processes, alternating: per library, the median and
    the minimum over steps of the slowest rank's step time."""
    out = tempfile.mkdtemp(prefix=f"bench-{kind}-")
    script = os.path.join(out, "worker.py")
    with open(script, "w") as f:
        f.write(TRAINING_WORKER)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()), EMBER_PORT=str(_free_port()), WORLD_SIZE=str(ranks),
               BENCH_OWN_BARRIERS="1" if own_barriers else "0")
    procs = [subprocess.Popen([sys.executable, script, kind, out], env=dict(env, RANK=str(r)), start_new_session=True)
             for r in range(ranks)]
    for p in procs:
        if p.wait(timeout=900) != 0:
            raise SystemExit(f"{kind} workers failed")
    per_rank = []
    for r in range(ranks):
        with open(os.path.join(out, f"rank{r}.json")) as f:
            per_rank.append(json.load(f))
    figures = {}
    for lib in ("ember", "torch"):
        slowest = [max(rank[lib][i] for rank in per_rank) for i in range(len(per_rank[0][lib]))]
        figures[lib] = (statistics.median(slowest), min(slowest))
    return figures


def _print_training(label: str, figures) -> None:
    (e, e_min), (t, t_min) = figures["ember"], figures["torch"]
    print(f"{label:>22} | {_fmt(e)} [{_fmt(e_min)}] | {_fmt(t)} [{_fmt(t_min)}] | {e / t:8.2f} [{e_min / t_min:.2f}]")


def _ddp(args):
    print("\nTraining step (MLP 1.3M params, batch 64 per rank), 1 thread per rank; ember and PyTorch alternate "
          "steps in the same processes; median [fastest step]")
    print(f"{'':>22} | {'ember':>21} | {'PyTorch':>21} | ember/PyTorch")
    _print_training("single process", _training("ddp", 1, args.own_barriers))
    _print_training(f"DDP, {args.ranks} ranks", _training("ddp", args.ranks, args.own_barriers))


def _fsdp(args):
    _print_training(f"FSDP2, {args.ranks} ranks", _training("fsdp", args.ranks, args.own_barriers))


if __name__ == "__main__":
    main()

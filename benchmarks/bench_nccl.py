"""all_reduce bus bandwidth over NCCL, 1 MB .. 1 GB: ember beside PyTorch, on the same GPUs.

    python benchmarks/bench_nccl.py [--gpus 2] [--sizes 1M,4M,16M,64M,256M,1G] [--json out.json]

One run starts one process per GPU for ember (``init_process_group("nccl")`` over env://, its
NCCL engine on the nvidia-nccl-cu13 library) and then the same for PyTorch's NCCL backend. Each
size (float32, SUM) is timed with CUDA events around ``iters`` back-to-back all-reduces after
warm-up; the figure is the slowest rank's time per call. Bus bandwidth follows nccl-tests:
``busbw = bytes / time * 2 (n - 1) / n``. Ratio = ember / PyTorch (goal: >= 0.95).
NVLink multicast stays off (``NCCL_NVLS_ENABLE=0``). Needs 2 GPUs or more: with fewer it says so
and exits with status 0 (nothing to measure). ``--single`` runs a world of one process on one GPU
instead: no bandwidth then (NCCL only copies), but the time per call shows each library's fixed
cost per collective (launch, events, Python), the figure that bounds small messages.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

WORKER = r'''
import json, os, sys
lib, sizes, out = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3]
if lib == "torch":
    import torch
    import torch.distributed as dist
else:
    import ember as torch
    import ember.distributed as dist
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
dev = f"cuda:{local}"
results = {}
for nbytes in sizes:
    t = torch.ones(nbytes // 4, device=dev)
    iters = max(5, min(200, int(4e10 // nbytes)))
    for _ in range(5):
        dist.all_reduce(t)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        dist.all_reduce(t)
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / iters
    slowest = torch.tensor([seconds], device=dev, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    results[nbytes] = float(slowest.item())
if rank == 0:
    with open(os.path.join(out, f"{lib}.json"), "w") as f:
        json.dump(results, f)
dist.destroy_process_group()
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def _run(lib: str, gpus: int, sizes: list[int], out: str) -> dict:
    port = _free_port()
    procs = []
    here = os.path.dirname(os.path.abspath(__file__))
    for rank in range(gpus):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(gpus), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0", OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER, lib, ",".join(map(str, sizes)), out],
                                      env=env, cwd=here))
    codes = [p.wait(timeout=600) for p in procs]
    if any(codes):
        raise SystemExit(f"{lib}: a rank failed (exit codes {codes})")
    with open(os.path.join(out, f"{lib}.json")) as f:
        return {int(k): v for k, v in json.load(f).items()}


def _gpu_count() -> int:
    try:
        import ember

        return ember.cuda.device_count() if ember.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no driver, no plugin
        return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=0, help="GPUs to use (default: all)")
    parser.add_argument("--sizes", default="1M,4M,16M,64M,256M,1G")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--single", action="store_true", help="a world of one: time per call only")
    args = parser.parse_args()
    available = _gpu_count()
    gpus = args.gpus or available
    if args.single and available >= 1:
        _single(args, [_parse_size(s) for s in args.sizes.split(",")])
        return
    if available < 2 or gpus < 2 or gpus > available:
        print(f"bench_nccl: skipped: needs at least 2 GPUs (this machine has {available}, asked for {gpus})")
        return
    sizes = [_parse_size(s) for s in args.sizes.split(",")]
    out = tempfile.mkdtemp(prefix="bench-nccl-")
    figures = {lib: _run(lib, gpus, sizes, out) for lib in ("ember", "torch")}
    factor = 2 * (gpus - 1) / gpus
    print(f"all_reduce float32 SUM on {gpus} GPUs: bus bandwidth GB/s (time per call)")
    print(f"{'size':>8} {'ember':>18} {'PyTorch':>18} {'ratio':>6}")
    table = {}
    for n in sizes:
        e, t = figures["ember"][n], figures["torch"][n]
        bw_e, bw_t = n / e * factor / 1e9, n / t * factor / 1e9
        table[n] = {"ember_s": e, "torch_s": t, "ember_busbw": bw_e, "torch_busbw": bw_t, "ratio": bw_e / bw_t}
        label = f"{n >> 20}M" if n < 1 << 30 else f"{n >> 30}G"
        print(f"{label:>8} {bw_e:8.1f} ({e * 1e6:7.0f}us) {bw_t:8.1f} ({t * 1e6:7.0f}us) {bw_e / bw_t:6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpus": gpus, "sizes": {str(n): v for n, v in table.items()}}, f, indent=1)


def _single(args, sizes) -> None:
    out = tempfile.mkdtemp(prefix="bench-nccl-")
    figures = {lib: _run(lib, 1, sizes, out) for lib in ("ember", "torch")}
    print("all_reduce float32 SUM, world of one (1 GPU): time per call")
    print(f"{'size':>8} {'ember us':>10} {'PyTorch us':>11} {'ratio':>6}")
    table = {}
    for n in sizes:
        e, t = figures["ember"][n], figures["torch"][n]
        table[n] = {"ember_s": e, "torch_s": t, "ratio": e / t}
        label = f"{n >> 10}K" if n < 1 << 20 else f"{n >> 20}M"
        print(f"{label:>8} {e * 1e6:10.1f} {t * 1e6:11.1f} {e / t:6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpus": 1, "sizes": {str(n): v for n, v in table.items()}}, f, indent=1)


if __name__ == "__main__":
    main()

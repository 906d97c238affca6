"""GPT-2 small (124M) training steps on CUDA: ember beside PyTorch, in one process on one GPU.

The model is written once against the common API (``fw.nn``), so both frameworks run the same
program: token + position embeddings, 12 pre-norm blocks (causal ``scaled_dot_product_attention``,
GELU-tanh MLP), tied output head; AdamW (fused where the framework has it), bf16 autocast,
batch 8 x 1024 tokens by default. Reports tokens/s (median step time over the timed steps, CUDA
synchronized per step) for eager and for ``ember.compile`` of the model in each of ``--modes``
(``reduce-overhead`` unless told), and with ``--torch-compile`` PyTorch's ``torch.compile`` too.

A host-bound step (ember's eager one) runs at the speed of the processor its Python thread is on, and
the lent H200 machines' 16 virtual processors differ by up to 1.8x at times, from one second to the
next (NOTES.md, session 11): each row also gives ``host_cpu_ms`` (the thread's CPU time per step,
median; ``best_host_cpu_ms`` and ``best_ms`` the fastest step's), ``cpus`` (the processors the step
ran on) and ``cpu_speed_ms`` (a fixed pure-Python loop's time on that thread before and after the row:
~12-13 ms on a fast processor there, ~21-23 on a slow one). ``host_cpu_ms`` includes the final
``loss.item()``, where the driver spins while the GPU finishes (a primary context's default
CU_CTX_SCHED_AUTO spins when the process has fewer contexts than processors): ``host_issue_ms`` is the
thread's CPU time up to that read-back (the host's real work per step), ``wait_ms`` / ``wait_cpu_ms`` the
read-back's wall and CPU time (a spin makes them equal; a step is host-bound when ``wait_ms`` is ~0).
``--pin-fastest`` times the loop on every allowed processor before each row and keeps the stepping thread
on the fastest (both frameworks alike; on those machines it does not stay the fastest for long).

    python benchmarks/bench_cuda_gpt2.py [--steps N] [--batch B] [--seq T] [--layers L] [--json out.json]
                                         [--modes default reduce-overhead] [--torch-compile]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

from _timing import cpu_speed_ms, current_cpu

import ember


def build(fw, layers, d=768, heads=12, vocab=50304, seq=1024):
    nn, F = fw.nn, fw.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.wte.weight  # tied
            for name, p in self.named_parameters():
                if name.endswith("weight") and p.ndim == 2:
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(self, idx, targets):
            t = idx.shape[1]
            pos = fw.arange(t, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))

    return GPT()


def pin_fastest() -> dict:
    """Keeps this thread on the allowed processor where ``cpu_speed_ms`` is lowest; returns the scan."""
    allowed = sorted(os.sched_getaffinity(0))
    scan = {}
    for c in allowed:
        os.sched_setaffinity(0, {c})
        scan[c] = round(min(cpu_speed_ms(150000) for _ in range(3)), 2)
    best = min(scan, key=scan.get)
    os.sched_setaffinity(0, {best})
    return {"allowed": allowed, "scan": scan, "pinned": best}


def run(fw, label, args, compiled, mode="reduce-overhead"):
    pinned = pin_fastest() if args.pin_fastest else None
    try:
        row = _run(fw, label, args, compiled, mode)
    finally:
        if pinned is not None:
            os.sched_setaffinity(0, pinned["allowed"])
    if pinned is not None:
        row["pinned_cpu"], row["cpu_scan"] = pinned["pinned"], pinned["scan"]
    return row


def _run(fw, label, args, compiled, mode):
    fw.manual_seed(0)
    dev = args.device
    model = build(fw, args.layers, seq=args.seq).to(dev)
    try:
        opt = fw.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    except (TypeError, RuntimeError, ValueError):
        opt = fw.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    step_model = fw.compile(model, mode=None if mode == "default" else mode) if compiled else model
    g = fw.Generator().manual_seed(1) if hasattr(fw, "Generator") else None
    idx = fw.randint(0, 50257, (args.batch, args.seq + 1), generator=g).to(dev)
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
    times, cpu_times, issue_times, wait_cpu, wait_wall, cpus, losses = [], [], [], [], [], set(), []
    speed = [cpu_speed_ms()]
    for i in range(args.warmup + args.steps):
        if dev == "cuda":
            fw.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.thread_time()
        with fw.autocast(dev, dtype=fw.bfloat16):
            loss = step_model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        t1, c1 = time.perf_counter(), time.thread_time()
        losses.append(loss.item())  # synchronizes
        if i >= args.warmup:
            t2, c2 = time.perf_counter(), time.thread_time()
            times.append(t2 - t0)
            cpu_times.append(c2 - c0)
            issue_times.append(c1 - c0)
            wait_cpu.append(c2 - c1)
            wait_wall.append(t2 - t1)
            cpus.add(current_cpu())
    speed.append(cpu_speed_ms())
    step = statistics.median(times)
    return {"name": label, "ms_per_step": round(step * 1e3, 1), "tokens_per_s": round(args.batch * args.seq / step),
            "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4),
            "best_ms": round(min(times) * 1e3, 1), "host_cpu_ms": round(statistics.median(cpu_times) * 1e3, 1),
            "best_host_cpu_ms": round(min(cpu_times) * 1e3, 1),
            "host_issue_ms": round(statistics.median(issue_times) * 1e3, 1),
            "wait_ms": round(statistics.median(wait_wall) * 1e3, 1),
            "wait_cpu_ms": round(statistics.median(wait_cpu) * 1e3, 1), "cpus": sorted(cpus),
            "cpu_speed_ms": [round(v, 1) for v in speed]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--modes", nargs="*", default=["reduce-overhead"],
                    help="ember.compile modes to run (default, reduce-overhead, max-autotune)")
    ap.add_argument("--torch-compile", action="store_true", help="also PyTorch's torch.compile (default mode)")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of the program")
    ap.add_argument("--pin-fastest", action="store_true",
                    help="keep each row's stepping thread on the fastest allowed processor (timed before the row)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch

    rows = [run(ember, "ember eager", args, False)]
    print(rows[-1], flush=True)
    rows.append(run(torch, "torch eager", args, False))
    print(rows[-1], flush=True)
    if not args.no_compile:
        for mode in args.modes:
            rows.append(run(ember, f"ember compile {mode}", args, True, mode))
            print(rows[-1], flush=True)
            if mode == "reduce-overhead":
                from ember.compiler.inductor._cudagraphs import COUNTERS

                rows[-1]["cudagraphs"] = dict(COUNTERS, reasons=COUNTERS["reasons"][:3])
                print(rows[-1]["cudagraphs"])
        if args.torch_compile:
            rows.append(run(torch, "torch compile default", args, True, "default"))
            print(rows[-1], flush=True)
    for row in rows:
        print(f"{row['name']:34s} {row['ms_per_step']:>9} ms/step {row['tokens_per_s']:>9} tok/s  "
              f"loss {row['first_loss']} -> {row['last_loss']}  best step {row['best_ms']} ms, host CPU "
              f"{row['host_cpu_ms']} ms/step (best {row['best_host_cpu_ms']}; issue {row['host_issue_ms']}, "
              f"read-back wait {row['wait_ms']} ms wall / {row['wait_cpu_ms']} ms CPU) on "
              f"cpu {row['cpus']}, loop {row['cpu_speed_ms']} ms")
    print(f"ember eager / torch eager tokens/s: {rows[0]['tokens_per_s'] / rows[1]['tokens_per_s']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            gpu = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
            json.dump({"gpu": gpu, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

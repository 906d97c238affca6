"""GPT-2 small (124M) training steps on CUDA: ember beside PyTorch, in one process on one GPU.

The model is written once against the common API (``fw.nn``), so both frameworks run the same
program: token + position embeddings, 12 pre-norm blocks (causal ``scaled_dot_product_attention``,
GELU-tanh MLP), tied output head; AdamW (fused where the framework has it), bf16 autocast,
batch 8 x 1024 tokens by default. Reports tokens/s (median step time over the timed steps, CUDA
synchronized per step) for eager and for ``ember.compile`` of the model in each of ``--modes``
(``reduce-overhead`` unless told), and with ``--torch-compile`` PyTorch's ``torch.compile`` too.

    python benchmarks/bench_cuda_gpt2.py [--steps N] [--batch B] [--seq T] [--layers L] [--json out.json]
                                         [--modes default reduce-overhead] [--torch-compile]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

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


def run(fw, label, args, compiled, mode="reduce-overhead"):
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
    times, losses = [], []
    for i in range(args.warmup + args.steps):
        if dev == "cuda":
            fw.cuda.synchronize()
        t0 = time.perf_counter()
        with fw.autocast(dev, dtype=fw.bfloat16):
            loss = step_model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # synchronizes
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    step = statistics.median(times)
    return {"name": label, "ms_per_step": round(step * 1e3, 1), "tokens_per_s": round(args.batch * args.seq / step),
            "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4)}


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
              f"loss {row['first_loss']} -> {row['last_loss']}")
    print(f"ember eager / torch eager tokens/s: {rows[0]['tokens_per_s'] / rows[1]['tokens_per_s']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            gpu = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
            json.dump({"gpu": gpu, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

"""Where a GPT-2 training step's *device* time goes, ember beside PyTorch (bench_cuda_gpt2.py's model).

ember: every kernel launch, cuBLAS GEMM and device copy is bracketed by two CUDA events (from a
reused pool) and labelled with the ember op that issued it (the nearest ``_ops_*`` frame) and the
kernel's name; the events of one step are read after it, so each figure is the kernel's own device
time. PyTorch: ``torch.profiler``'s CUDA activity for the same step, grouped by kernel name. Both
tables list the top kernels by device milliseconds per step, with the step's kernel total.

    python benchmarks/prof_cuda_kernels.py [--layers 12] [--batch 8] [--top 30]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cuda_gpt2 import build  # noqa: E402


def _step_fn(fw, model, opt, x, y):
    def step():
        with fw.autocast("cuda", dtype=fw.bfloat16):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def _setup(fw, layers, batch, seq, compile_mode=None):
    fw.manual_seed(0)
    model = build(fw, layers, seq=seq).to("cuda")
    if compile_mode:  # (not "reduce-overhead": a CUDA graph's replay launches nothing to bracket)
        model = fw.compile(model, mode=None if compile_mode == "default" else compile_mode)
    opt = fw.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    idx = fw.randint(0, 50257, (batch, seq + 1)).to("cuda")
    return _step_fn(fw, model, opt, idx[:, :-1].contiguous(), idx[:, 1:].contiguous())


def _label() -> str:
    """The nearest ember CUDA op function on the stack, with its caller outside the plugin."""
    f = sys._getframe(2)
    op = None
    while f is not None:
        name = f.f_code.co_filename
        if "/_cuda/" in name:
            if op is None and "/_ops_" in name:
                op = f.f_code.co_name
        elif op is not None or "/ember/" in name:
            return f"{op or '?'} <- {f.f_code.co_name}"
        f = f.f_back
    return op or "?"


def profile_ember(layers, batch, seq, top, compile_mode=None):
    import ember
    from ember._cuda import _blas, _fastcall
    from ember._src.device import get_backend

    _fastcall.NATIVE[0] = False  # Python launchers, whose __call__ is wrapped below
    pool: list = []
    pending: list = []
    active = [False]

    def bracket(label, fn, *args):
        if not active[0]:
            return fn(*args)
        if len(pool) < 2:
            pool.extend(ember.cuda.Event(enable_timing=True) for _ in range(64))
        start, end = pool.pop(), pool.pop()
        start.record()
        result = fn(*args)
        end.record()
        pending.append((label, start, end))
        return result

    launch, gemm, gemm_bias = _fastcall.Launcher.__call__, _blas.gemm, _blas.gemm_bias
    dtod, memset = _fastcall.memcpy_dtod, _fastcall.memset8
    backend = get_backend("cuda")

    graph_of: dict = {}  # generated kernels are named per graph (kernel0...): #k tells the graphs apart

    def timed_launch(self, grid, stream, *args):
        same_name = graph_of.setdefault(self.name, [])
        if self.fn.value not in same_name:
            same_name.append(self.fn.value)
        name = self.name if len(same_name) == 1 and same_name[0] == self.fn.value else \
            f"{self.name}#{same_name.index(self.fn.value)}"
        return bracket(f"{_label()} [{name} grid {tuple(grid)} x{self.block}]", launch, self, grid, stream, *args)

    def timed_gemm(a, b, c, *args, **kwargs):
        shape = f"{tuple(a.shape)}@{tuple(b.shape)}"
        return bracket(f"{_label()} [gemm {shape} {c.dtype}]", lambda: gemm(a, b, c, *args, **kwargs))

    def timed_gemm_bias(a, b, bias):
        shape = f"{tuple(a.shape)}@{tuple(b.shape)}"
        return bracket(f"{_label()} [gemm+bias {shape} {a.dtype}]", lambda: gemm_bias(a, b, bias))

    # Installed before the model compiles: a compiled graph binds the backend's ``gemm`` when it is
    # generated, so a later patch would miss its products.
    _fastcall.Launcher.__call__ = timed_launch
    _blas.gemm = backend.gemm = timed_gemm
    _blas.gemm_bias = timed_gemm_bias
    _fastcall.memcpy_dtod = lambda *a: bracket(f"{_label()} [memcpy dtod]", dtod, *a)
    _fastcall.memset8 = lambda *a: bracket(f"{_label()} [memset]", memset, *a)
    totals: dict = collections.defaultdict(float)
    counts: dict = collections.Counter()
    steps = 3
    try:
        step = _setup(ember, layers, batch, seq, compile_mode)
        for _ in range(3):
            step().item()
        active[0] = True
        for _ in range(steps):
            step().item()
            ember.cuda.synchronize()
            for label, start, end in pending:
                totals[label] += start.elapsed_time(end)
                counts[label] += 1
                pool.extend((start, end))
            pending.clear()
    finally:
        _fastcall.Launcher.__call__, _blas.gemm, _blas.gemm_bias = launch, gemm, gemm_bias
        backend.gemm = gemm
        _fastcall.memcpy_dtod, _fastcall.memset8 = dtod, memset
    _print("ember", {k: v / steps for k, v in totals.items()}, {k: v // steps for k, v in counts.items()}, top)


def profile_torch(layers, batch, seq, top, compile_mode=None):
    import torch
    from torch.profiler import ProfilerActivity, profile

    step = _setup(torch, layers, batch, seq, compile_mode)
    for _ in range(3):
        step().item()
    steps = 3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step().item()
        torch.cuda.synchronize()
    totals: dict = collections.defaultdict(float)
    counts: dict = collections.Counter()
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            totals[ev.name[:110]] += ev.device_time / 1e3
            counts[ev.name[:110]] += 1
    _print("torch", {k: v / steps for k, v in totals.items()}, {k: v // steps for k, v in counts.items()}, top)


_RESULTS: dict = {}


def _print(who, totals, counts, top):
    total = sum(totals.values())
    _RESULTS[who] = {"total_ms": total, "launches": sum(counts.values()),
                     "top": sorted(totals.items(), key=lambda kv: -kv[1])[:top]}
    print(f"\n== {who}: device kernel time per step {total:.2f} ms in {sum(counts.values())} launches ==")
    for label, ms in sorted(totals.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{ms:8.3f} ms {counts[label]:5d}x  {label}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--only", choices=["ember", "torch"], default=None)
    ap.add_argument("--json", default=None, help="also write the tables here")
    ap.add_argument("--compile", default=None, metavar="MODE", help="each model under its framework's compile (mode)")
    args = ap.parse_args()
    if args.only != "torch":
        profile_ember(args.layers, args.batch, args.seq, args.top, args.compile)
    if args.only != "ember":
        profile_torch(args.layers, args.batch, args.seq, args.top, args.compile)
    if args.json:
        Path(args.json).write_text(json.dumps(_RESULTS, indent=1))


if __name__ == "__main__":
    main()

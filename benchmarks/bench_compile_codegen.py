"""ember's Inductor (ember.compile, C/OpenMP kernels) beside PyTorch's, in one process.

Run from the repository root:
    PYTHONPATH=$(python ci/dev_env.py) python benchmarks/bench_compile_codegen.py [--quick] [--no-torch-compile]

Cases (1 thread on both sides is the primary figure):

- ``chain4``: ``((x * 2 + 1).relu() - 0.5)`` on 4M float32: 4 eager passes vs 1 fused kernel.
  Targets: compiled ember >= 2.3x eager ember, and no slower than torch.compile.
- ``softmax`` / ``layer_norm``: 4096 x 1024 float32 rows; achieved bandwidth (bytes read + written
  once / time) against the machine's measured copy bandwidth (target >= 70%).
- ``gpt_train``: one training step of the same model (batch 16 since session 17, 8 before:
  forward, cross-entropy, backward, AdamW), the compiled model's forward and backward both generated (AOT autograd).
- ``gpt_fwd``: a mini-GPT forward (4 layers, d=256, T=128, B=16, causal attention, GELU MLP):
  compiled ember vs torch.compile vs both eager.
- compile time in a fresh process, cold cache and warm cache, for a tiny function and the
  mini-GPT forward.
- ``--gpt-backward``: the mini-GPT training step (B16) and its backward alone, compiled ember with
  column sums fused (default) and apart, beside eager ember, eager torch and torch.compile, the cases
  alternated round by round (thread CPU time, medians), with the backward's kernel count and its
  generated-code time per kernel class (figures: ``packages/compile/NOTES.md``, session 15).
- ``--gpt-memory``: the peak resident memory of that training step (forward + loss, backward) above
  the process's RSS once the models exist, each case in a fresh process (compiled ember with its
  saved activations freed after their last read, and held to the end of the backward), twice: the
  allocators as they are, and with every block of 128 KiB or more its own mmap and ember's block
  cache off, where the RSS follows the live buffers (figures: NOTES.md, session 16).
- ``--codegen-ab [--ab-session 16|17]``: a session's C++ paths on and off in one process (16: vector
  exp of computed values, the cross-entropy target pick, on the mini-GPT masked softmax and
  cross-entropy; 17, the default: cross-entropy's forward in one pass over each row).

Timing: warmup, then the minimum over repeats of wall time (the machine is shared; the
minimum is the least disturbed run), and CPU time (process_time) beside it for 1 thread.

Figures (2026-12-02, shared 2-core AVX2 x86_64 machine at load 9-13, so wall clock is noise;
1 thread, CPU time, torch 2.13; the last run, eager figures swing 3x between runs):

| case | ember eager | ember compiled | torch eager | torch.compile |
| --- | --- | --- | --- | --- |
| chain4, 4M float32 | 11-32 ms | 2.56 ms | 11-33 ms | 2.65 ms |
| softmax 4096x1024 | 22.2 ms | 5.58 ms (48% of copy bw) | 5.84 ms | 6.93 ms |
| layer_norm 4096x1024 | 6.5 ms | 4.80 ms (56% of copy bw) | 3.32 ms | 5.29 ms |
| gpt_fwd L4 d256 T128 B16 | 404 ms | 412 ms | 277 ms | 251 ms |

A later run (after -O2 and parallel chunks; busier machine, all figures higher): chain4 3.84 ms
compiled vs 4.16 torch.compile vs 13.95 eager ember; softmax 8.30 vs 10.58 (torch eager 9.13);
layer_norm 5.41 vs 8.07 (torch eager 5.28); gpt_fwd 413 vs 369 ms (torch eager 422).

Compiled ember is 3.1-5.7x eager ember on chain4 across runs (quietest run: 11.1 -> 3.5 ms) and
on par with torch.compile. Compile time in a fresh process (wall, loaded machine): tiny
function 0.36-0.58 s cold / 0.12-0.15 s warm; mini-GPT forward 6.0 s cold / 1.0-1.4 s warm (the warm figure
is Python lowering and ember.compile's capture: the C compile is cached). The GPT forward is
matmul-bound (ember's BLAS calls take most of it). Softmax computes exp once per element: the
sum pass stores it in the output, a last pass divides in place.

Session 4 (2026-12-02 08:50 UTC, load ~10, so CPU time is the figure; 1 thread; after the
replay fast path of ember.compile):

| case | ember eager | ember compiled | torch eager | torch.compile |
| --- | --- | --- | --- | --- |
| chain4, 4M float32 | 8.03 ms | 1.92 ms (4.2x eager ember) | 8.70 ms | 2.98 ms |
| gpt_fwd L4 d256 T128 B16 | 332 ms | 317 ms | 238 ms | 257 ms |
| gpt_train step B8 (AdamW) | 436 ms | 456 ms | 398 ms | 459 ms |

A second run (09:25 UTC, a quieter moment): chain4 9.05 / 2.09 (4.3x) / 9.35 / 2.54 ms;
gpt_fwd 237 / 246 / 231 / 227 ms; gpt_train 366 / 396 / 335 / 345 ms (same columns). So
chain4 meets its targets; the GPT forward and step are 4-15% behind torch.compile and torch
eager, which is the GEMM (below).

Compile time in a fresh process (``--compile-times``, 09:25 UTC; CPU of the process and the C
compiler, bytecode cached as installed; wall on the loaded machine in brackets). The compile
step alone: tiny function cold 0.47 s (1.36 s), warm 0.02 s (0.03 s); mini-GPT forward cold
2.69 s (4.37 s), warm 0.04 s (0.05 s). The GPT's whole first call beyond a later call: cold
3.06 s (5.1 s), warm 0.30 s (0.49 s: first use of the loaded kernels and fresh buffers). Warm
is a recording, building the fx graph (its Python code is now generated only if used) and the
graph cache's load; cold adds lowering and gcc, where kernels equal up to buffer names (one
per layer) are compiled once and aliased.

The compiled GPT forward spends ~247 ms of its ~350 ms in matmuls (ember's OpenBLAS GEMM: about
torch.compile's whole forward) and ~95 ms in generated kernels, the largest being the
four GELU (~6 ms each, 2M elements) and four masked-softmax kernels (~6 ms each, 1M).

Session 11 (2026-12-03, load 6-10 on the 2 cores, so only A/B figures taken in one process mean
much). Generated kernels: float32 exp is an inline polynomial (eager's, bit for bit) instead of
libmvec's call per vector; softmax multiplies by the row's reciprocal; a row kernel's first
reduction runs one row ahead inside its second loop; row-invariant work (log_softmax's log) is
hoisted out of the loops; transposed copies leave row kernels and walk 32x32 tiles; a residual
returned beside its layer_norm is no longer copied onto itself in a loop of its own. The row
kernels alone (their generated C before and after, compiled and called in one process, 4096x1024
float32, inputs and outputs rotated over 128 MB so L3 holds none; min over 24 calls against the
min of a 64 MB numpy copy): softmax 54-56% -> 70% of copy bandwidth (1.58-1.60 -> 1.25-1.26 ms),
log_softmax 44% -> 47-64%, layer_norm 77% -> 78-81%. The exp of a 4096x1024 row alone (from L1)
costs about one copy of the data on this machine, so a three-pass softmax cannot go much past
~75%. ``--gpt-kernels`` (the compiled mini-GPT forward's CPU time per generated kernel, the
wrapper's kernel callables timed): generated kernels 37.5-41.3 -> 25.8-27.5 ms of the forward
(the masked softmax kernels 2.8-3.9 -> 1.1-1.4 ms each, the k-transpose copies ~0.8 -> ~0.5 ms);
the whole forward 203-225 -> 182-191 ms CPU in the same alternating runs. ``bench_gpt`` twice
(CPU ms: ember eager / ember compiled / torch eager / torch.compile): 165.6 / 169.2 / 190.4 /
179.7 and 175.0 / 155.8 / 170.3 / 160.3, compiled ember 0.94x and 0.97x torch.compile's time.
Left in the forward: the logits' reshape of the head's addmm result is copied (a graph output
is always realized; ~1 ms), and the k-transpose and head split/merge copies feed the bmm calls.

Session 12 (2026-12-03, load 6-10, 1 thread, CPU time, before/after alternated in one session).
Transposed copies walk 16x16 tiles inside 256x256 blocks, the tiles along the source's contiguous
dim innermost (the 32x32 tiles across whole rows stepped through a new page of the source every
two rows): ``x.t().contiguous()`` float32 2048x2048 7.3-9.3 -> 1.8-1.9 ms (12% -> 46-56% of copy
bandwidth), 4096x1024 7.1-7.6 -> 2.0-3.0 ms (12-14% -> 35-44%), 2000x2000 2.3 -> 1.7-2.4 ms.
Streamed row outputs write whole 64-byte lines (two 32-byte streaming stores per block):
log_softmax 4096x1024 through the compiled call 1.89-2.56 -> 1.27-1.53 ms (34-58% -> 59-82%).
softmax stashes its exp terms in a row-sized local array and streams the output (the stash in the
output read every output line from memory first): the kernel alone, inputs rotated over 128 MB,
46-77% -> 62-83%; through the compiled call 1.36-2.22 -> 1.32-1.35 ms; layer_norm 69-107%
(unchanged). The q/k/v head copies stay: ember's bmm takes one batch stride, and a (B, H) pair
of batch dims with strides (T*3C, D) cannot be merged into one, so a strided bmm argument would
need a 4-D batched GEMM; the copies are ~0.1-0.2 ms each (<1% of the forward). ``--gpt-kernels``:
generated kernels 29.8 ms of a 200.7 ms forward. Compile time (CPU of the process and gcc, the
machine's load inflating wall 3-5x): tiny cold 0.28 s / warm 0.02 s, mini-GPT cold 1.73 s / warm
0.12 s (wall 1.7 / 0.1 / 8.2 / 1.0 s while the test suites ran beside it).

Session 14 (2026-12-04 16:30-17:40 UTC; the 2 cores at load 8-22 from the other sessions' builds
and test suites, so wall clock is 2-5x CPU time and only CPU time taken in one process means
anything; 1 thread on both sides, torch 2.13). ``--quick`` at 17:33 (load 16-20; CPU time, the
minimum of the repeats):

| case | ember eager | ember compiled | torch eager | torch.compile |
| --- | --- | --- | --- | --- |
| chain4, 4M float32 | 8.57 ms | 2.06 ms (4.2x eager ember) | 7.97 ms | 1.95 ms |
| softmax 4096x1024 | 2.10 ms (70% of copy bw) | 2.90 ms (51%) | 2.58 ms (57%) | 3.21 ms (46%) |
| layer_norm 4096x1024 | 1.96 ms (75%) | 3.23 ms (46%) | 1.65 ms (89%) | 3.62 ms (41%) |
| gpt_fwd L4 d256 T128 B16 | 194.6 ms | 186.7 ms | 209.2 ms | 196.1 ms |
| gpt_train step B8 (AdamW) | 302.1 ms | 292.5 ms | 323.9 ms | 307.2 ms |

The same cases alternated round by round in one process (thread CPU time, median of 9-21
rounds; ``gpt_train`` at 16:40, load ~9, and 17:31, load ~20; ``gpt_fwd`` at 17:28, load ~22):
training step, compiled ember 317.6 / 304.5 ms against torch.compile 341.7 / 327.3 ms (0.93x,
0.93x) and torch eager 351.0 / 336.7 ms (eager ember 306.2 ms in the second run); forward,
186.4 ms against 201.8 (torch.compile), 208.3 (torch eager), 194.9 (eager ember). An earlier run
of this file (16:30, load ~5) had the step at 317.8 against 308.3 ms torch.compile: single runs
still swing ~10% either way, the alternated medians do not. That 16:30 run's other rows (CPU ms,
same columns): chain4 4.79 / 1.35 / 4.68 / 2.05; softmax 1.71 / 2.89 / 2.55 / 2.89 (52% of copy
bandwidth compiled); layer_norm 1.33 / 1.87 / 3.60 / 2.95 (81%); gpt_fwd 182.2 / 177.5 / 198.8 /
247.5. chain4's compiled figure was 1.35 ms there and 2.06 ms (vs torch.compile's 1.95) at 17:33.

Where the step goes (compiled ember, per-callable CPU time of the generated wrappers): the
forward's GEMMs ~86 ms (addmm 78, bmm 8) and kernels ~15 ms; the backward's GEMMs ~176 ms (mm
157, bmm 19) and kernels ~28-38 ms; AdamW (ember's fused kernel) 3-4 ms; wrapper and autograd
Python a few ms. ember's OpenBLAS GEMMs run at 85-94 GFLOP/s on this AMD EPYC (Zen 4) for the
model's shapes against MKL's 60-83 in torch (``(1024, 1024) @ (1024, 256)``: 6.2-6.3 ms vs
8.4-8.5 ms), which is most of the margin; torch's AdamW (foreach, eager under torch.compile)
is 13-14 ms. What the step lost in generated code, against Inductor's output for the same graph
(``TORCH_LOGS=output_code``), and what changed:

- the qkv gradient's cat read each head's q and v gradient at ``c / 64`` and ``c % 64`` of the
  merged feature dim (a division per element, no vectorization): 1.8-2.1 ms per layer. Loop dims
  that indices take apart with ``/`` and ``%`` by static divisors (each dividing the next and the
  size) are now split into one loop per digit (``_cpp.split_dims``): 0.5-0.9 ms per layer.
- every weight gradient is ``transpose(transpose(mm))``: the mm's own contiguous layout, yet a
  graph output was always stored, so five kernels copied 3.3M floats (~3.5 ms) after the GEMMs
  had written them. A graph output that is a contiguous view over all of a buffer the graph
  computed (a kernel's output or a GEMM's result, when no other output is or views it) is now
  returned over that buffer (``_graph._alias_outputs``), as Inductor returns ``mm``'s ``out``;
  the forward's logits (``view`` of the head's ``addmm``) lost their copy too.

Before and after, alternating processes (17:37, load ~17; 5 steps each; CPU time inside the
generated wrappers' kernel callables): the backward's kernels 25.8 / 28.6 -> 22.1 / 21.6 ms, the
forward's 11.8 / 12.8 -> 11.6 / 11.0 ms; the whole step 295.1 / 305.5 -> 297.8 / 294.6 ms (the
~5 ms gained is inside the step's noise at this load).

Left as it is: bias and layer_norm weight gradients are column sums in kernels of their own
(Inductor fuses them into the layer_norm/GELU backward kernels that produce their input; ~5 ms
of the backward here); the position embedding's gradient recomputes the last layer_norm
backward inside a batch sum strided along its reduction (~1 ms: the sum is lowered before the
extern that stores the value it reads). Through the compiled call, softmax and layer_norm stayed
at 46-57% of the copy bandwidth in this run (eager ember's row kernels 70-75%), below the 70% of
session 11/12's kernel-alone figures: not investigated here.

Session 15 (``--rows``: every side alternating round by round, thread CPU minima): float32 row
kernels call prelude helpers in eager's structure (AVX-512 exp, mask-register NaN tracking, the
next row prefetched), streamed rows fence once per thread instead of once per row, and a streamed
line is one 512-bit store. Figures and the order-of-calls caveat: ``packages/compile/NOTES.md``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import torch

import ember

N = 4 * 1024 * 1024


def best_time(fn, repeat=7, warmup=2):
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def chain(m, x):
    return (x * 2 + 1).relu() - 0.5


def copy_bandwidth(threads) -> float:
    """Bytes/s of a large float32 copy (read + write) by numpy (CPU time for one thread)."""
    a = np.random.default_rng(0).standard_normal(16 * 1024 * 1024).astype(np.float32)
    b = np.empty_like(a)
    wall, cpu = best_time(lambda: np.copyto(b, a), repeat=7)
    return 2 * a.size * 4 / (cpu if threads == 1 else wall)


def bench_chain(threads, use_torch_compile):
    ember.set_num_threads(threads)
    torch.set_num_threads(threads)
    x = ember.randn(N)
    tx = torch.from_numpy(x.numpy().copy())
    ce = ember.compile(lambda x: chain(ember, x))
    ce(x)
    rows = {"ember eager": best_time(lambda: chain(ember, x)), "ember compiled": best_time(lambda: ce(x)),
            "torch eager": best_time(lambda: chain(torch, tx))}
    if use_torch_compile:
        ct = torch.compile(lambda x: chain(torch, x))
        ct(tx)
        rows["torch.compile"] = best_time(lambda: ct(tx))
    assert float((ce(x) - chain(ember, x)).abs().max()) == 0.0
    return rows


def bench_rows(threads, use_torch_compile, bandwidth):
    ember.set_num_threads(threads)
    torch.set_num_threads(threads)
    rows, cols = 4096, 1024
    x = ember.randn(rows, cols)
    w, b = ember.randn(cols), ember.randn(cols)
    tx, tw, tb = (torch.from_numpy(t.numpy().copy()) for t in (x, w, b))
    cases = {
        "softmax": (lambda m, x, w, b: m.softmax(x, -1), 2),
        "layer_norm": (lambda m, x, w, b: m.nn.functional.layer_norm(x, (cols,), w, b), 2),
    }
    out = {}
    for name, (fn, passes) in cases.items():
        got = _time_case(fn, (x, w, b), (tx, tw, tb), use_torch_compile)
        nbytes = passes * rows * cols * 4
        # one thread: CPU time (robust on a shared machine); more: wall time
        out[name] = (got, {k: nbytes / (v[1] if threads == 1 else v[0]) / bandwidth for k, v in got.items()})
    return out


def bench_cross_entropy(threads, use_torch_compile, bandwidth, rows=2048, cols=8192):
    """cross_entropy (mean over rows, class-index targets): the forward reads the logits once, the
    forward + backward (the logits' gradient) reads them twice and writes the gradient once."""
    ember.set_num_threads(threads)
    torch.set_num_threads(threads)
    x = ember.randn(rows, cols)
    y = ember.tensor(np.random.default_rng(0).integers(0, cols, rows))
    tx, ty = torch.from_numpy(x.numpy().copy()), torch.from_numpy(y.numpy().copy())
    out = {}
    got = _time_case(lambda m, x, y: m.nn.functional.cross_entropy(x, y), (x, y), (tx, ty), use_torch_compile)
    out["cross_entropy"] = (got, {k: rows * cols * 4 / (v[1] if threads == 1 else v[0]) / bandwidth
                                  for k, v in got.items()})
    ex, gx = x.clone().requires_grad_(True), tx.clone().requires_grad_(True)

    def step(fn, a, b):
        a.grad = None
        fn(a, b).backward()

    ce = ember.compile(lambda a, b: ember.nn.functional.cross_entropy(a, b))
    step(ce, ex, y)
    grad = ex.grad.numpy().copy()
    got = {"ember eager": best_time(lambda: step(ember.nn.functional.cross_entropy, ex, y)),
           "ember compiled": best_time(lambda: step(ce, ex, y)),
           "torch eager": best_time(lambda: step(torch.nn.functional.cross_entropy, gx, ty))}
    if use_torch_compile:
        ct = torch.compile(lambda a, b: torch.nn.functional.cross_entropy(a, b))
        step(ct, gx, ty)
        got["torch.compile"] = best_time(lambda: step(ct, gx, ty))
    np.testing.assert_allclose(grad, gx.grad.numpy(), rtol=1e-4, atol=1e-8)
    out["cross_entropy fwd+bwd"] = (got, {k: 3 * rows * cols * 4 / (v[1] if threads == 1 else v[0]) / bandwidth
                                          for k, v in got.items()})
    return out


def _time_case(fn, args, targs, use_torch_compile):
    ce = ember.compile(lambda *a: fn(ember, *a))
    ce(*args)
    got = {"ember eager": best_time(lambda: fn(ember, *args)), "ember compiled": best_time(lambda: ce(*args)),
           "torch eager": best_time(lambda: fn(torch, *targs))}
    if use_torch_compile:
        ct = torch.compile(lambda *a: fn(torch, *a))
        ct(*targs)
        got["torch.compile"] = best_time(lambda: ct(*targs))
    return got


def rows_alternating(rounds=15):
    """Row kernels and the 4-op chain, one thread, every side called in turn each round (eager
    ember, compiled ember, torch eager, torch.compile) beside a 64 MB numpy copy; the minimum of
    each one's thread CPU time over the rounds, and bytes moved (read once + written once) over
    that time against the copy's best bandwidth in the same rounds. The mini-GPT shapes: its
    attention softmax rows (B16 x H4 x T128, 128 wide) and its layer_norm rows (B16 x T128, d256)."""
    ember.set_num_threads(1)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    cases = []
    for rows, cols in ((4096, 1024), (8192, 128), (2048, 256)):
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        w, b = (rng.standard_normal(cols).astype(np.float32) for _ in range(2))
        shape = f"{rows}x{cols}"
        if cols != 256:
            cases.append((f"softmax {shape}", lambda m, x, w, b: m.softmax(x, -1), x, w, b))
            cases.append((f"log_softmax {shape}", lambda m, x, w, b: m.log_softmax(x, -1), x, w, b))
        if cols != 128:
            cases.append((f"layer_norm {shape}",
                          lambda m, x, w, b, n=cols: m.nn.functional.layer_norm(x, (n,), w, b), x, w, b))
    # the mini-GPT's attention softmax as it is: scaled, causal mask, (B16 x H4, T128, T128)
    x = rng.standard_normal((64, 128, 128)).astype(np.float32)
    mask = np.triu(np.ones((128, 128), bool), 1)
    cases.append(("masked softmax 64x128x128",
                  lambda m, x, mask, b: m.softmax((x * 0.125).masked_fill(mask, float("-inf")), -1), x, mask, x[:1]))
    x = rng.standard_normal(N).astype(np.float32)
    cases.append(("chain4 4M", lambda m, x, w, b: chain(m, x), x, x[:1], x[:1]))
    sides = {}
    for name, fn, x, w, b in cases:
        e_args = [ember.tensor(a) for a in (x, w, b)]
        t_args = [torch.from_numpy(a.copy()) for a in (x, w, b)]
        ce = ember.compile(lambda *a, f=fn: f(ember, *a))
        ct = torch.compile(lambda *a, f=fn: f(torch, *a))
        np.testing.assert_allclose(ce(*e_args).numpy(), ct(*t_args).numpy(), rtol=1e-4, atol=1e-5)
        sides[name] = {"ember eager": lambda f=fn, a=e_args: f(ember, *a),
                       "ember compiled": lambda c=ce, a=e_args: c(*a),
                       "torch eager": lambda f=fn, a=t_args: f(torch, *a),
                       "torch.compile": lambda c=ct, a=t_args: c(*a)}
    src = rng.standard_normal(16 * 1024 * 1024).astype(np.float32)
    dst = np.empty_like(src)

    def cpu(fn):
        c0 = time.thread_time()
        fn()
        return time.thread_time() - c0

    best: dict = {}
    loads = [os.getloadavg()[0]]
    for _ in range(rounds):
        best["copy"] = min(best.get("copy", 1e9), cpu(lambda: np.copyto(dst, src)))
        for name, fns in sides.items():
            for side, fn in fns.items():
                best[(name, side)] = min(best.get((name, side), 1e9), cpu(fn))
    loads.append(os.getloadavg()[0])
    bandwidth = 2 * src.nbytes / best["copy"]
    print(f"one thread, min thread CPU time of {rounds} alternating rounds; load {loads[0]:.1f} -> {loads[1]:.1f}; "
          f"copy {bandwidth / 1e9:.1f} GB/s")
    print(f"  {'case':24s}" + "".join(f"{side:>22s}" for side in next(iter(sides.values()))))
    for name, x, *_ in [(c[0], c[2]) for c in cases]:
        nbytes = 2 * x.nbytes
        cells = [f"{best[(name, side)] * 1e3:8.3f} ms {nbytes / best[(name, side)] / bandwidth * 100:5.0f}%"
                 for side in sides[name]]
        print(f"  {name:24s}" + "".join(f"{c:>22s}" for c in cells))


GPT = textwrap.dedent('''
    def make_gpt(nn, m, layers=4, d=256, heads=4, vocab=512, T=128):
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
                self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
                self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

            def forward(self, x, mask):
                B, T_, C = x.shape
                q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
                q = q.view(B, T_, heads, C // heads).transpose(1, 2)
                k = k.view(B, T_, heads, C // heads).transpose(1, 2)
                v = v.view(B, T_, heads, C // heads).transpose(1, 2)
                att = (q @ k.transpose(-2, -1)) * (1.0 / (C // heads) ** 0.5)
                att = m.softmax(att.masked_fill(mask, float("-inf")), -1)
                y = (att @ v).transpose(1, 2).reshape(B, T_, C)
                x = x + self.proj(y)
                return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))

        class GPT(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
                self.blocks = nn.ModuleList([Block() for _ in range(layers)])
                self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

            def forward(self, idx):
                T_ = idx.shape[1]
                mask = m.ones(T_, T_, dtype=m.bool).triu(1)
                x = self.tok(idx) + self.pos(m.arange(T_))
                for blk in self.blocks:
                    x = blk(x, mask)
                return self.head(self.ln(x))

        return GPT()
''')


def bench_gpt(threads, use_torch_compile):
    ember.set_num_threads(threads)
    torch.set_num_threads(threads)
    ns: dict = {}
    exec(GPT, ns)
    torch.manual_seed(0)
    tmodel = ns["make_gpt"](torch.nn, torch).eval()
    emodel = ns["make_gpt"](ember.nn, ember).eval()
    emodel.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tmodel.state_dict().items()})
    idx = np.random.default_rng(0).integers(0, 512, (16, 128))
    eidx, tidx = ember.tensor(idx), torch.from_numpy(idx)
    rows = {}
    with ember.no_grad(), torch.no_grad():
        ce = ember.compile(emodel)
        ref = tmodel(tidx).numpy()
        np.testing.assert_allclose(ce(eidx).numpy(), ref, rtol=2e-3, atol=2e-3)
        rows["ember eager"] = best_time(lambda: emodel(eidx), repeat=3)
        rows["ember compiled"] = best_time(lambda: ce(eidx), repeat=3)
        rows["torch eager"] = best_time(lambda: tmodel(tidx), repeat=3)
        if use_torch_compile:
            ct = torch.compile(tmodel)
            ct(tidx)
            rows["torch.compile"] = best_time(lambda: ct(tidx), repeat=3)
    return rows


def gpt_kernel_times(threads=1, calls=5, top=12):
    """CPU time per generated kernel of the compiled mini-GPT forward (B16): each ``kernel*``
    callable of the generated wrapper is wrapped with a timer (the externs, BLAS mostly, are
    the rest of the forward). Returns (forward ms, [(kernel, ms, fused ops)])."""
    import re

    from ember.compiler.inductor import _compile_fx

    ember.set_num_threads(threads)
    built = []
    original = _compile_fx.lower_and_build

    def spy(gm, inputs):
        built.append(original(gm, inputs))
        return built[-1]

    ns: dict = {}
    exec(GPT, ns)
    model = ns["make_gpt"](ember.nn, ember).eval()
    idx = ember.tensor(np.random.default_rng(0).integers(0, 512, (16, 128)))
    _compile_fx.lower_and_build = spy
    try:
        with tempfile.TemporaryDirectory() as cache, ember.no_grad():
            os.environ["EMBER_CACHE_DIR"], saved = cache, os.environ.get("EMBER_CACHE_DIR")
            try:
                fn = ember.compile(model)
                fn(idx)
            finally:
                if saved is None:
                    os.environ.pop("EMBER_CACHE_DIR")
                else:
                    os.environ["EMBER_CACHE_DIR"] = saved
            art = built[-1]
            names = dict(re.findall(r"# (kernel\d+): (.*)", art.wrapper_source))
            spent: dict = {}
            namespace = art.call.__globals__
            for name in [n for n in namespace if re.fullmatch(r"kernel\d+", n)]:
                def timed(*a, _f=namespace[name], _n=name):
                    c0 = time.process_time()
                    _f(*a)
                    spent[_n] = spent.get(_n, 0.0) + time.process_time() - c0
                namespace[name] = timed
            c0 = time.process_time()
            for _ in range(calls):
                fn(idx)
            total = (time.process_time() - c0) / calls
    finally:
        _compile_fx.lower_and_build = original
    rows = sorted(((k, v / calls, names.get(k, "")) for k, v in spent.items()), key=lambda r: -r[1])
    return total * 1e3, [(k, v * 1e3, ops) for k, v, ops in rows[:top]], sum(spent.values()) / calls * 1e3


def _gpt_training_pair(threads, batch):
    """The mini-GPT in torch and in ember with torch's initial weights, and (tokens, targets) for
    each, ``threads`` threads on both sides."""
    ember.set_num_threads(threads)
    torch.set_num_threads(threads)
    ns: dict = {}
    exec(GPT, ns)
    torch.manual_seed(0)
    tmodel = ns["make_gpt"](torch.nn, torch)
    emodel = ns["make_gpt"](ember.nn, ember)
    emodel.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tmodel.state_dict().items()})
    g = np.random.default_rng(1)
    idx, tgt = g.integers(0, 512, (batch, 128)), g.integers(0, 512, (batch * 128,))
    return (tmodel, emodel, (ember.tensor(idx), ember.tensor(tgt)), (torch.from_numpy(idx), torch.from_numpy(tgt)))


def bench_gpt_train(threads, use_torch_compile, steps=3, batch=16):
    """One training step of the mini-GPT (B16, issue 13's size; B8 before session 17): forward,
    cross-entropy, backward, AdamW step; the compiled model's forward and backward are both
    generated code (AOT autograd)."""
    tmodel, emodel, (eidx, etgt), (tidx, ttgt) = _gpt_training_pair(threads, batch=batch)

    def stepper(m, model, fwd, x, y):
        opt = m.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad()
            loss = m.nn.functional.cross_entropy(fwd(x).reshape(-1, 512), y)
            loss.backward()
            opt.step()
            return loss
        return step

    rows = {}
    cases = [("ember eager", ember, emodel, emodel, eidx, etgt),
             ("ember compiled", ember, emodel, ember.compile(emodel), eidx, etgt),
             ("torch eager", torch, tmodel, tmodel, tidx, ttgt)]
    if use_torch_compile:
        cases.append(("torch.compile", torch, tmodel, torch.compile(tmodel), tidx, ttgt))
    for name, m, model, fwd, x, y in cases:
        step = stepper(m, model, fwd, x, y)
        step()  # compiles (forward and backward) on the first call
        rows[name] = best_time(step, repeat=steps)
    return rows


def _kernel_class(ops: str) -> str:
    """A generated kernel's class, from the graph ops its comment lists."""
    names = ops.split(", ")
    has_cols = any(n.startswith("sum") for n in names)
    if all(n.startswith("sum") for n in names):
        return "column sum alone"
    if any(n.startswith("native_layer_norm_backward") for n in names):
        return "layer_norm bwd" + (" + column sums" if has_cols else "")
    if any(n.startswith("erf") for n in names):
        return "gelu bwd" + (" + column sum" if has_cols else "")
    if any(n.startswith("where") for n in names):
        return "softmax bwd (masked)"
    if any(n.startswith("cat") for n in names):
        return "cat (qkv gradient)"
    if any(n.startswith(("_to_copy", "transpose")) for n in names):
        return "transposed copy"
    return "other"


def bench_gpt_backward(rounds=7, batch=16):
    """The compiled mini-GPT (L4 d256 T128, ``batch``) training step and its backward alone, beside
    torch.compile and eager torch and ember, one thread, in one process: the cases alternate round
    by round, thread CPU time, medians. Compiled ember twice: column sums fused into the kernels
    producing their input (``fuse_column_sums``, the default) and as kernels of their own (before).
    Returns ({case: (backward ms, step ms)}, {variant: backward kernel count},
    {variant: {kernel class: ms per backward}})."""
    import re
    import statistics

    from ember.compiler.inductor import _compile_fx, config

    tmodel, emodel, (eidx, etgt), (tidx, ttgt) = _gpt_training_pair(1, batch)
    built: list = []
    original = _compile_fx.lower_and_build

    def spy(gm, inputs):
        built.append(original(gm, inputs))
        return built[-1]

    def stepper(m, model, fwd, x, y):
        opt = m.optim.AdamW(model.parameters(), lr=1e-4)

        def step():  # (backward seconds, step seconds), thread CPU time
            c0 = time.thread_time()
            opt.zero_grad()
            loss = m.nn.functional.cross_entropy(fwd(x).reshape(-1, 512), y)
            c1 = time.thread_time()
            loss.backward()
            c2 = time.thread_time()
            opt.step()
            c3 = time.thread_time()
            return c2 - c1, c3 - c0
        return step

    cases, artifacts = {}, {}
    _compile_fx.lower_and_build = spy
    try:
        for name, fused in (("ember compiled", True), ("ember compiled, sums apart", False)):
            with config.patch("cpp.fuse_column_sums", fused):
                step = stepper(ember, emodel, ember.compile(emodel), eidx, etgt)
                step()  # compiles the forward and (at its first call) the backward
            artifacts[name] = next(a for a in reversed(built) if "tangents" in a.wrapper_source)
            cases[name] = step
    finally:
        _compile_fx.lower_and_build = original
    cases["ember eager"] = stepper(ember, emodel, emodel, eidx, etgt)
    cases["torch eager"] = stepper(torch, tmodel, tmodel, tidx, ttgt)
    cases["torch.compile"] = stepper(torch, tmodel, torch.compile(tmodel), tidx, ttgt)
    cases["torch.compile"]()
    # the generated backward kernels' time, by class: each kernel callable wrapped with a timer
    spent: dict = {name: {} for name in artifacts}
    for name, art in artifacts.items():
        classes = {k: _kernel_class(ops) for k, ops in re.findall(r"# (kernel\d+): (.*)", art.wrapper_source)}
        namespace = art.call.__globals__
        for k in [n for n in namespace if re.fullmatch(r"kernel\d+", n)]:
            kind = classes.get(k, "other")

            def timed(*a, _f=namespace[k], _c=kind, _s=spent[name]):
                c0 = time.thread_time()
                _f(*a)
                _s[_c] = _s.get(_c, 0.0) + time.thread_time() - c0
            namespace[k] = timed
    times: dict = {name: [] for name in cases}
    for _ in range(rounds):
        for name, step in cases.items():
            times[name].append(step())
    out = {name: (statistics.median(b for b, _ in t) * 1e3, statistics.median(s for _, s in t) * 1e3)
           for name, t in times.items()}
    per_class = {name: {c: v / rounds * 1e3 for c, v in sorted(d.items(), key=lambda kv: -kv[1])}
                 for name, d in spent.items()}
    return out, {name: art.kernel_count for name, art in artifacts.items()}, per_class


AB_PATHS = {16: ("_computed_exp_sum", "_exp_rows", "_row_pick", "_pick_parts"),
            17: ("_max_exp_sum", "_prefetch_after_pick")}


def codegen_ab(rounds=25, session=17):
    """A session's code paths on and off in one process (the C++ writer's methods patched to decline
    for "before"; ``AB_PATHS``): session 16's the mini-GPT masked softmax (vector exp of a computed
    value), cross-entropy's forward (the target pick) and forward + backward (exp rows of the
    backward); session 17's cross-entropy's forward in one pass over each row (and the next row
    prefetched); beside eager ember, torch eager and torch.compile; alternating rounds, {case:
    {side: (min, median) thread CPU seconds}}."""
    import statistics

    from ember.compiler.inductor import _cpp, config

    ember.set_num_threads(1)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    paths = AB_PATHS[session]

    def compiled_pair(fn, warm):
        """(after, before): ``fn`` compiled (at the first call, ``warm(compiled)``) with the new paths,
        then with them declining."""
        after = ember.compile(fn)
        warm(after)
        saved = {n: getattr(_cpp.CppKernelWriter, n) for n in paths}
        for n in paths:
            setattr(_cpp.CppKernelWriter, n, lambda *a, **k: None)
        try:
            before = ember.compile(fn)
            warm(before)
        finally:
            for n, f in saved.items():
                setattr(_cpp.CppKernelWriter, n, f)
        return after, before

    def masked(m, x, mask):
        return m.softmax((x * 0.125).masked_fill(mask, float("-inf")), -1)

    def ce(m):
        return lambda a, b: m.nn.functional.cross_entropy(a, b)

    def backward(fn, x, y):
        x.grad = None
        fn(x, y).backward()

    sides: dict = {}
    with config.patch("graph_cache", False):
        if session == 16:
            xs = rng.standard_normal((64, 128, 128)).astype(np.float32)
            mask = np.triu(np.ones((128, 128), bool), 1)
            ex, em, tx, tm = ember.tensor(xs), ember.tensor(mask), torch.from_numpy(xs), torch.from_numpy(mask)
            tc = torch.compile(lambda a, b: masked(torch, a, b))
            e, t = (ex, em), (tx, tm)  # bound now: the names are reused below
            after, before = compiled_pair(lambda a, b: masked(ember, a, b), lambda c: c(*e))
            tc(*t)
            sides["masked softmax 64x128x128"] = {
                "ember eager": lambda e=e: masked(ember, *e), "compiled before": lambda b=before, e=e: b(*e),
                "compiled after": lambda a=after, e=e: a(*e), "torch eager": lambda t=t: masked(torch, *t),
                "torch.compile": lambda c=tc, t=t: c(*t)}
        for cols in (8192, 512):
            xn = (rng.standard_normal((2048, cols)) * 3).astype(np.float32)
            yn = rng.integers(0, cols, 2048)
            ex, ey, tx, ty = ember.tensor(xn), ember.tensor(yn), torch.from_numpy(xn), torch.from_numpy(yn)
            gx, tgx = ember.tensor(xn, requires_grad=True), torch.tensor(xn, requires_grad=True)
            tc, tcb = torch.compile(ce(torch)), torch.compile(ce(torch))
            after, before = compiled_pair(ce(ember), lambda c, ex=ex, ey=ey: c(ex, ey))
            after_b, before_b = compiled_pair(ce(ember), lambda c, gx=gx, ey=ey: backward(c, gx, ey))
            np.testing.assert_allclose(float(after(ex, ey)), float(before(ex, ey)), rtol=1e-6)
            tc(tx, ty), backward(tcb, tgx, ty)
            sides[f"cross_entropy 2048x{cols}"] = {
                "ember eager": lambda ex=ex, ey=ey: ce(ember)(ex, ey),
                "compiled before": lambda b=before, ex=ex, ey=ey: b(ex, ey),
                "compiled after": lambda a=after, ex=ex, ey=ey: a(ex, ey),
                "torch eager": lambda tx=tx, ty=ty: ce(torch)(tx, ty),
                "torch.compile": lambda c=tc, tx=tx, ty=ty: c(tx, ty)}
            sides[f"cross_entropy fwd+bwd 2048x{cols}"] = {
                "ember eager": lambda gx=gx, ey=ey: backward(ce(ember), gx, ey),
                "compiled before": lambda b=before_b, gx=gx, ey=ey: backward(b, gx, ey),
                "compiled after": lambda a=after_b, gx=gx, ey=ey: backward(a, gx, ey),
                "torch eager": lambda g=tgx, ty=ty: backward(ce(torch), g, ty),
                "torch.compile": lambda c=tcb, g=tgx, ty=ty: backward(c, g, ty)}
    times: dict = {case: {side: [] for side in fns} for case, fns in sides.items()}
    for _ in range(rounds):
        for case, fns in sides.items():
            for side, fn in fns.items():
                c0 = time.thread_time()
                fn()
                times[case][side].append(time.thread_time() - c0)
    return {case: {side: (min(v), statistics.median(v)) for side, v in d.items()} for case, d in times.items()}


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak_rss() -> None:
    """VmHWM back to the current RSS (Linux: writing 5 to clear_refs)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


MEMORY_CASES = ("ember eager", "ember compiled", "ember compiled, saved held", "torch eager", "torch.compile")


def gpt_memory_case(case: str, batch=16, warmup=3, steps=3) -> dict:
    """Resident memory of a mini-GPT (L4 d256 T128, ``batch``) training step in this process (meant
    to be a fresh one), in MiB above ``base``, the RSS once the models and data exist: ``start``, the
    RSS when a step begins, and the peak RSS (VmHWM, reset before each phase) of the forward + loss
    and of the backward; medians over ``steps`` steps after ``warmup``. tracemalloc cannot see native
    buffers; RSS sees both sides' allocators (and what they keep: run with MALLOC_MMAP_THRESHOLD_ and
    EMBER_CPU_CACHE_MB=0 for a peak that follows the live buffers). "saved held" is compiled ember
    with ``release_saved_tensors`` off (saved activations live until the compiled backward returns,
    as before session 16)."""
    import gc
    import statistics

    from ember.compiler.inductor import config

    tmodel, emodel, (eidx, etgt), (tidx, ttgt) = _gpt_training_pair(1, batch)
    if case.startswith("ember"):
        m, model, x, y = ember, emodel, eidx, etgt
    else:
        m, model, x, y = torch, tmodel, tidx, ttgt
    del tmodel, emodel
    gc.collect()
    base = _rss_kib("VmRSS")
    fwd = ember.compile(model) if case.startswith("ember compiled") else \
        torch.compile(model) if case == "torch.compile" else model
    config.release_saved_tensors = case != "ember compiled, saved held"
    opt = m.optim.AdamW(model.parameters(), lr=1e-4)
    start, fw_peak, bw_peak = [], [], []
    for i in range(warmup + steps):
        opt.zero_grad()
        r0 = _rss_kib("VmRSS")
        _reset_peak_rss()
        loss = m.nn.functional.cross_entropy(fwd(x).reshape(-1, 512), y)
        r1 = _rss_kib("VmHWM")
        _reset_peak_rss()
        loss.backward()
        r2 = _rss_kib("VmHWM")
        opt.step()
        del loss
        if i >= warmup:
            start.append((r0 - base) / 1024)
            fw_peak.append((r1 - base) / 1024)
            bw_peak.append((r2 - base) / 1024)
    return {"start": statistics.median(start), "forward": statistics.median(fw_peak),
            "backward": statistics.median(bw_peak)}


def gpt_memory(runs=2, live=False) -> dict:
    """``gpt_memory_case`` for every case, each in a fresh process, the cases alternated ``runs``
    times: {case: [result per run]}. ``live``: glibc serves every block of 128 KiB and more with
    its own mmap and ember's block cache is off, so freed buffers leave the RSS at once."""
    import json

    env = dict(os.environ, OMP_NUM_THREADS="1")
    if live:
        env.update(MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072", EMBER_CPU_CACHE_MB="0")
    out: dict = {c: [] for c in MEMORY_CASES}
    for _ in range(runs):
        for case in MEMORY_CASES:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--gpt-memory-case", case],
                                  env=env, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr[-2000:])
            out[case].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def bench_column_kernels(rounds=15):
    """The mini-GPT backward's two kernel classes that take column sums, alone, fused vs apart,
    alternated in one process (thread CPU time, min and median of ``rounds``, 1 thread): GELU's
    backward with the fc bias gradient (2048 x 1024), and layer_norm's backward with its weight and
    bias gradients (2048 x 256, AOT backward of ``layer_norm``). Returns {case: {variant: (min, median)}} ms."""
    import statistics

    from ember.compiler.inductor import config

    ember.set_num_threads(1)
    g = np.random.default_rng(2)

    def gelu_bwd(dy, a):
        cdf = 0.5 * (1 + ember.erf(a * 0.7071067811865475))
        d = dy * (cdf + a * 0.3989422804014327 * ember.exp(-0.5 * a * a))
        return d, d.view(-1, d.shape[-1]).sum(0)

    def ln_step(x, w, b, dy):
        for t in (x, w, b):
            t.grad = None
        ember.nn.functional.layer_norm(x, (x.shape[-1],), w, b).backward(dy)

    dy, a = (ember.tensor(g.standard_normal((16, 128, 1024)).astype(np.float32)) for _ in range(2))
    x = ember.tensor(g.standard_normal((16, 128, 256)).astype(np.float32), requires_grad=True)
    w, b = (ember.tensor(g.standard_normal(256).astype(np.float32), requires_grad=True) for _ in range(2))
    ly = ember.tensor(g.standard_normal((16, 128, 256)).astype(np.float32))
    calls = {}
    for fused in (True, False):
        with config.patch("cpp.fuse_column_sums", fused):
            fg = ember.compile(gelu_bwd)
            fg(dy, a)
            fl = ember.compile(lambda x, w, b: ember.nn.functional.layer_norm(x, (x.shape[-1],), w, b))
            ln_step(x, w, b, ly)  # warm eager autograd
            x.grad = w.grad = b.grad = None
            fl(x, w, b).backward(ly)  # compiles the backward now, under the patch
        calls[("gelu bwd + fc bias sum", fused)] = lambda f=fg: f(dy, a)

        def ln(f=fl):
            x.grad = w.grad = b.grad = None
            out = f(x, w, b)
            c0 = time.thread_time()
            out.backward(ly)
            return time.thread_time() - c0
        calls[("layer_norm bwd + weight/bias sums", fused)] = ln
    times: dict = {k: [] for k in calls}
    for _ in range(rounds):
        for k, fn in calls.items():
            c0 = time.thread_time()
            got = fn()
            times[k].append(got if isinstance(got, float) else time.thread_time() - c0)
    out: dict = {}
    for (case, fused), t in times.items():
        out.setdefault(case, {})["fused" if fused else "apart"] = (min(t) * 1e3, statistics.median(t) * 1e3)
    return out


COMPILE_CHILD = textwrap.dedent('''
    import os, sys, time
    import numpy as np
    import ember

    def clocks():  # wall, and CPU of this process plus its finished children (the C compiler)
        t = os.times()
        return time.perf_counter(), t.user + t.system + t.children_user + t.children_system

    from ember.compiler import _compiled
    compile_fn, spent = _compiled.CompiledFunction._compile, [0.0, 0.0]

    def timed_compile(self, *args):  # the compile alone: graph build, lowering, C compiler/cache
        a = clocks(); out = compile_fn(self, *args); b = clocks()
        spent[0] += b[0] - a[0]; spent[1] += b[1] - a[1]
        return out

    _compiled.CompiledFunction._compile = timed_compile
    which = sys.argv[1]
    if which == "tiny":
        fn = ember.compile(lambda x: (x * 2 + 1).relu())
        x = ember.randn(64)
        w0, c0 = clocks(); fn(x); w1, c1 = clocks()
        calls = [(clocks(), fn(x), clocks()) for _ in range(3)]
    else:
        ns = {}
        exec(sys.argv[2], ns)
        model = ns["make_gpt"](ember.nn, ember).eval()
        idx = ember.tensor(np.random.default_rng(0).integers(0, 512, (16, 128)))
        with ember.no_grad():
            model(idx)  # eager warmup: the compile figure excludes first-touch costs of eager
            fn = ember.compile(model)
            w0, c0 = clocks(); fn(idx); w1, c1 = clocks()
            calls = [(clocks(), fn(idx), clocks()) for _ in range(3)]
    # the compile alone: the first call minus the quickest of three compiled calls
    wall = min(b[0] - a[0] for a, _, b in calls)
    cpu = min(b[1] - a[1] for a, _, b in calls)
    print(f"{(w1 - w0) - wall:.3f} {(c1 - c0) - cpu:.3f} {spent[0]:.3f} {spent[1]:.3f}")
''')


def compile_times():
    """{(case, "cold"/"warm"): (wall, CPU of the first call beyond a later call's; wall, CPU of the
    compile step alone)} in a fresh process, in seconds. The child
    runs with bytecode caching on (as an installed package has it; this machine sets
    PYTHONDONTWRITEBYTECODE, which would add source compilation of every module imported)."""
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, EMBER_CACHE_DIR=cache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for which in ("tiny", "gpt"):
            for state in ("cold", "warm"):
                proc = subprocess.run([sys.executable, "-c", COMPILE_CHILD, which, GPT], env=env,
                                      capture_output=True, text=True, timeout=600)
                if proc.returncode != 0:
                    raise RuntimeError(proc.stderr[-2000:])
                out[(which, state)] = tuple(float(v) for v in proc.stdout.split()[-4:])
    return out


def fmt(t):
    return f"{t * 1e3:8.2f} ms"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="1 thread only, no compile-time subprocesses")
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--compile-times", action="store_true", help="only the compile-time subprocesses")
    parser.add_argument("--cross-entropy", action="store_true", help="only the cross-entropy rows, 1 thread")
    parser.add_argument("--rows", action="store_true",
                        help="only the row kernels and chain4, 1 thread, all sides alternating (thread CPU time)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--gpt-kernels", action="store_true",
                        help="only the compiled mini-GPT forward's time per generated kernel, 1 thread")
    parser.add_argument("--gpt-backward", action="store_true",
                        help="only the mini-GPT training step and backward (B16), alternated, 1 thread")
    parser.add_argument("--gpt-memory", action="store_true",
                        help="only the peak RSS of a mini-GPT training step (B16), each case in a fresh process")
    parser.add_argument("--gpt-memory-case", choices=MEMORY_CASES, help=argparse.SUPPRESS)
    parser.add_argument("--codegen-ab", action="store_true",
                        help="only a session's code paths on and off (--ab-session), 1 thread")
    parser.add_argument("--ab-session", type=int, choices=sorted(AB_PATHS), default=17,
                        help="whose code paths --codegen-ab turns off for 'before' (default 17)")
    args = parser.parse_args()
    use_tc = not args.no_torch_compile
    if args.codegen_ab:
        print(f"load average {os.getloadavg()[0]:.1f}; 1 thread, thread CPU ms (min / median of {args.rounds} "
              "alternating rounds)")
        for case, row in codegen_ab(args.rounds, args.ab_session).items():
            print(f"  {case:34s} " + "   ".join(f"{side}: {lo * 1e3:.3f} / {med * 1e3:.3f}"
                                                  for side, (lo, med) in row.items()))
        return
    if args.gpt_memory_case:
        import json

        print(json.dumps(gpt_memory_case(args.gpt_memory_case)))
        return
    if args.gpt_memory:
        print(f"load average {os.getloadavg()[0]:.1f}; mini-GPT L4 d256 T128 B16 training step, 1 thread, a fresh "
              "process per case and run; MiB above the RSS once models and data exist: at the step's start, peak "
              "in forward+loss, peak in backward (medians of 3 steps after 3 warmup steps), per run")
        for live in (False, True):
            print("allocators as they are" if not live else
                  "every block >= 128 KiB its own mmap, ember's block cache off (RSS follows the live buffers)")
            for case, results in gpt_memory(live=live).items():
                cells = "   ".join(f"{r['start']:5.0f} {r['forward']:5.0f} {r['backward']:5.0f}" for r in results)
                print(f"  {case:28s} {cells}")
        return
    if args.gpt_backward:
        print("the column-summing kernel classes alone (thread CPU ms, min / median of 15 alternated rounds):")
        for case, variants in bench_column_kernels().items():
            print(f"  {case:36s} " + "   ".join(f"{v}: {lo:.2f} / {med:.2f}" for v, (lo, med) in variants.items()))
        rows, counts, per_class = bench_gpt_backward()
        print(f"load average {os.getloadavg()[0]:.1f}; mini-GPT L4 d256 T128 B16, 1 thread, thread CPU time, "
              "medians of alternated rounds")
        print("                                backward        step")
        for k, (b, st) in rows.items():
            print(f"  {k:28s} {b:8.1f} ms {st:8.1f} ms")
        for name, n in counts.items():
            print(f"{name}: {n} backward kernels; generated-code time per backward by kernel class:")
            for c, ms in per_class[name].items():
                print(f"    {c:32s} {ms:6.2f} ms")
        return
    if args.rows:
        rows_alternating(args.rounds)
        return
    if args.gpt_kernels:
        total, rows, kernels = gpt_kernel_times()
        print(f"gpt_fwd compiled: {total:.1f} ms CPU, of which generated kernels {kernels:.1f} ms")
        for name, ms, ops in rows:
            print(f"  {name:10s} {ms:6.2f} ms  {ops[:90]}")
        return
    if args.cross_entropy:
        bandwidth = copy_bandwidth(1)
        print(f"measured copy bandwidth: {bandwidth / 1e9:.1f} GB/s")
        for cols in (8192, 512):  # 512: the mini-GPT's vocabulary
            for name, (got, frac) in bench_cross_entropy(1, use_tc, bandwidth, cols=cols).items():
                print(f"{name} (2048x{cols} float32, 1 thread)  wall        cpu     of bandwidth")
                for k, (w, c) in got.items():
                    print(f"  {k:16s} {fmt(w)} {fmt(c)}   {frac[k] * 100:5.1f}%")
        return
    for threads in ([] if args.compile_times else [1] if args.quick else [1, 2]):
        print(f"\n== {threads} thread(s) ==")
        rows = bench_chain(threads, use_tc)
        base = rows["ember eager"][0]
        print("chain4 (4M float32)           wall        cpu     eager-ember/x")
        for k, (w, c) in rows.items():
            print(f"  {k:16s} {fmt(w)} {fmt(c)}   {base / w:5.2f}x")
        bandwidth = copy_bandwidth(threads)
        print(f"measured copy bandwidth: {bandwidth / 1e9:.1f} GB/s")
        for name, (got, frac) in bench_rows(threads, use_tc, bandwidth).items():
            print(f"{name} (4096x1024 float32)     wall        cpu     of bandwidth")
            for k, (w, c) in got.items():
                print(f"  {k:16s} {fmt(w)} {fmt(c)}   {frac[k] * 100:5.1f}%")
        for title, rows in (("gpt_fwd (L4 d256 T128 B16)  ", bench_gpt(threads, use_tc)),
                            ("gpt_train step (B16, AdamW) ", bench_gpt_train(threads, use_tc))):
            base = rows["torch eager"][0]
            print(f"{title}  wall        cpu     torch-eager/x")
            for k, (w, c) in rows.items():
                print(f"  {k:16s} {fmt(w)} {fmt(c)}   {base / w:5.2f}x")
    if not args.quick or args.compile_times:
        print("\ncompile time in a fresh process (s), wall and CPU (process + compiler): the first call minus the "
              "quickest later call, then the time inside the compile step alone")
        for (which, state), (wall, cpu, c_wall, c_cpu) in compile_times().items():
            print(f"  {which:5s} {state}: first call {wall:.3f} {cpu:.3f}   compile {c_wall:.3f} {c_cpu:.3f}")


if __name__ == "__main__":
    main()

"""Per-op overhead: issue 18's small-op cases, ember beside PyTorch in one process, one thread.

Each case is a tiny computation whose time is almost all framework overhead (dispatch, type
promotion, allocation of the result, autograd recording), not arithmetic:

- ``add_1elem``: ``a + b`` on 1-element float32 tensors (target <= 1.3x PyTorch).
- ``add_fn_1elem``: the same through the function, ``lib.add(a, b)``.
- ``chain10``: ten small ops in a row on an 8x8 tensor (mul, add, relu, sub, exp, mul by a
  scalar, neg, sigmoid, div, tanh) (target <= 1.3x).
- ``mul_grad``: ``x * w`` where ``w`` requires grad (records a node; target <= 1.5x).
- ``chain100_fwd_bwd``: a 100-op chain on 1-element tensors with grad, forward + backward
  (target <= 1.5x).
- ``small_backward``: ``loss.backward()`` of a small MLP-like loss (8x8 matmul, relu, mean)
  (target <= 1.5x).
- ``relu_8x8``, ``sum_8x8``, ``view_64``, ``mm_8x8``: common single ops on small tensors;
  ``mean_dim_8x8``, ``transpose_8x8``, ``where_8x8``, ``add__8x8`` (in place), ``linear_4x8``
  (``nn.functional.linear`` with bias): the other ops programs call most.
- ``getitem_int``, ``getitem_slice``, ``getitem_none``, ``getitem_ellipsis`` (basic indexing
  ``x[1]``, ``x[:, 1:5]``, ``x[None]``, ``x[..., 0]``), ``squeeze_1x8``, ``unsqueeze_8x8``,
  ``bmm_2x8x8``, ``addmm_beta_alpha`` (``addmm(b, x, y, beta=0.5, alpha=2)``), ``sum_int_8x8``
  (an int64 tensor), ``where_method_8x8`` (``x.where(cond, 0.0)``), ``linear_3d_2x4x8``
  (``F.linear`` on a 3-D input) and ``linear_3d_grad`` (the same with a weight that requires grad);
  ``view_grad_8x8``, ``getitem_grad_8x8`` and ``t_grad_8x8``: views of a tensor that requires grad
  (a node each); ``linear_grad_4x8``: ``F.linear`` without bias, weight requiring grad (``w.t()``
  then ``mm``, two nodes).
- ``import ember``: a fresh interpreter's import time (target < 0.1 s).

Method: every case runs 200 warmup calls, then the best (minimum) mean over 5 repeats of an
inner loop, ember and PyTorch interleaved per case. Times are the calling thread's CPU time
(``time.thread_time``; one thread on both sides), so that waiting for a core on a loaded shared
machine does not count; ``--wall`` measures wall time instead. The ratio is ember / PyTorch
(lower is better). Usage: ``python benchmarks/bench_overhead.py [--quick] [--wall] [--only a,b]
[--dispatch-subclass]``; the last defines a Tensor subclass with ``__torch_dispatch__`` on both sides first
(none of the cases uses it: a program that has one, e.g. through ember.func's BatchedTensor).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

import ember  # noqa: E402

TARGETS = {"add_1elem": 1.3, "chain10": 1.3, "mul_grad": 1.5, "chain100_fwd_bwd": 1.5, "small_backward": 1.5}


CLOCK = time.perf_counter if "--wall" in sys.argv else time.thread_time


def best_mean_us(fn, inner: int, repeat: int = 5) -> float:
    for _ in range(200 if inner >= 200 else inner):
        fn()
    best = float("inf")
    for _ in range(repeat):
        start = CLOCK()
        for _ in range(inner):
            fn()
        best = min(best, (CLOCK() - start) / inner)
    return best * 1e6


def make_cases(lib):
    a = lib.ones(1)
    b = lib.full((1,), 2.0)
    x = lib.rand(8, 8) + 0.5
    w = lib.ones(1, requires_grad=True)
    w8 = lib.rand(8, 8, requires_grad=True)
    xin = lib.rand(8, 8)
    cond = x > 1.0
    acc = lib.zeros(8, 8)
    lw, lb, lx = lib.rand(8, 8), lib.rand(8), lib.rand(4, 8)
    linear = lib.nn.functional.linear
    x1 = lib.rand(1, 8)
    xb = lib.rand(2, 8, 8)
    xi = lib.arange(64).reshape(8, 8)
    lx3 = lib.rand(2, 4, 8)
    lwg = lib.rand(8, 8, requires_grad=True)

    def chain10():
        y = x * x
        y = y + x
        y = y.relu()
        y = y - x
        y = y.exp()
        y = y * 0.5
        y = -y
        y = y.sigmoid()
        y = y / x
        return y.tanh()

    def chain100():
        y = w
        for _ in range(50):
            y = y * b
            y = y + a
        y.sum().backward()

    def small_backward():
        loss = (xin @ w8).relu().mean()
        loss.backward()

    return {
        "add_1elem": (lambda: a + b, 20000),
        "add_fn_1elem": (lambda: lib.add(a, b), 20000),
        "chain10": (chain10, 2000),
        "mul_grad": (lambda: a * w, 20000),
        "chain100_fwd_bwd": (chain100, 50),
        "small_backward": (small_backward, 1000),
        "relu_8x8": (lambda: x.relu(), 20000),
        "sum_8x8": (lambda: x.sum(), 20000),
        "view_64": (lambda: x.view(64), 20000),
        "mm_8x8": (lambda: x @ x, 20000),
        "mean_dim_8x8": (lambda: x.mean(1, keepdim=True), 20000),
        "transpose_8x8": (lambda: x.transpose(0, 1), 20000),
        "where_8x8": (lambda: lib.where(cond, x, 0.0), 20000),
        "add__8x8": (lambda: acc.add_(x), 20000),
        "linear_4x8": (lambda: linear(lx, lw, lb), 20000),
        "getitem_int": (lambda: x[1], 20000),
        "getitem_slice": (lambda: x[:, 1:5], 20000),
        "getitem_none": (lambda: x[None], 20000),
        "getitem_ellipsis": (lambda: x[..., 0], 20000),
        "squeeze_1x8": (lambda: x1.squeeze(0), 20000),
        "unsqueeze_8x8": (lambda: x.unsqueeze(1), 20000),
        "bmm_2x8x8": (lambda: lib.bmm(xb, xb), 20000),
        "addmm_beta_alpha": (lambda: lib.addmm(x, x, x, beta=0.5, alpha=2.0), 20000),
        "sum_int_8x8": (lambda: xi.sum(), 20000),
        "where_method_8x8": (lambda: x.where(cond, 0.0), 20000),
        "linear_3d_2x4x8": (lambda: linear(lx3, lw, lb), 20000),
        "linear_3d_grad": (lambda: linear(lx3, lwg, lb), 5000),
        "view_grad_8x8": (lambda: w8.view(64), 20000),
        "getitem_grad_8x8": (lambda: w8[1, 2:], 20000),
        "t_grad_8x8": (lambda: w8.t(), 20000),
        "linear_grad_4x8": (lambda: linear(lx, lwg), 5000),
        "to_dtype_8x8": (lambda: x.to(lib.float64), 20000),
        "to_same_dtype_8x8": (lambda: x.to(lib.float32), 20000),
    }


def import_time() -> float:
    code = "import time; t = time.process_time(); import ember; print(time.process_time() - t)"
    # with bytecode written and cached, as an installed package has it (PYTHONDONTWRITEBYTECODE, set on
    # some machines, would make every run compile every module from source: ~5x the time)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                 env=env).stdout) for _ in range(6)]
    return min(runs[1:])


def main() -> None:
    quick = "--quick" in sys.argv
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    if "--dispatch-subclass" in sys.argv:
        for lib in (ember, torch):  # __torch_function__ off, as dispatch-level subclasses have it
            type("Dispatching", (lib.Tensor,), {"__torch_function__": lib._C._disabled_torch_function_impl,
                                                "__torch_dispatch__": classmethod(
                lambda cls, func, types, args=(), kwargs=None: func(*args, **(kwargs or {})))})
    ours, theirs = make_cases(ember), make_cases(torch)
    print("| case | ember | torch | ratio | target |")
    print("| --- | --- | --- | --- | --- |")
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    for name, (fn, inner) in ours.items():
        if only is not None and name not in only:
            continue
        inner = max(1, inner // 10) if quick else inner
        e = best_mean_us(fn, inner)
        t = best_mean_us(theirs[name][0], inner)
        target = f"<= {TARGETS[name]}" if name in TARGETS else ""
        print(f"| {name} | {e:.2f} us | {t:.2f} us | {e / t:.2f} | {target} |")
    if only is None:
        print(f"| import ember | {import_time():.3f} s | | | < 0.1 s |")


if __name__ == "__main__":
    main()

"""Core benchmark: ember vs PyTorch in one process, reported as ember_time / torch_time.

Run from the repository root:
    PYTHONPATH=packages/tensor-core/src python benchmarks/bench_core.py [--quick]

Each case is timed as the minimum over several repeats (after warmup) of the mean time of
an inner loop, with 1 thread on both sides (the primary figure) and 2 threads beside it.
Cases whose ember op does not exist yet are reported as skipped.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import sys
import time

import numpy as np

# ruff: noqa: I001 - ember is imported before torch on purpose: both then share the libgomp
# that ember configures (GOMP_SPINCOUNT, see ember/_src/_native.py), so neither side's idle
# OpenMP workers starve the other's threads.
import ember
import torch


TARGETS = {"add_1elem": 5.0, "add_16M": 1.25, "mul_16M": 1.25, "exp_16M": 1.25}


def bench(fn, repeats: int, inner: int) -> float:
    """Minimum over ``repeats`` of the mean seconds of one ``fn()`` call (after 2 warmup calls)."""
    fn()
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - start) / inner)
    return best


def cases(quick: bool):
    """(name, ember fn, torch fn, inner loop count) for each case whose ember op exists."""
    n = 1 << (20 if quick else 24)
    out = []
    e1, t1 = ember.ones(1), torch.ones(1)
    out.append(("add_1elem", lambda: ember.add(e1, e1), lambda: torch.add(t1, t1), 2000))
    rng = np.random.default_rng(0)
    a_np, b_np = rng.uniform(-1, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32)
    ea, eb = ember.from_numpy(a_np.copy()), ember.from_numpy(b_np.copy())
    ta, tb = torch.from_numpy(a_np.copy()), torch.from_numpy(b_np.copy())
    out.append(("add_16M", lambda: ember.add(ea, eb), lambda: torch.add(ta, tb), 3))
    out.append(("mul_16M", lambda: ember.mul(ea, eb), lambda: torch.mul(ta, tb), 3))
    out.append(("exp_16M", lambda: ember.exp(ea), lambda: torch.exp(ta), 3))
    rows, cols = (1024, 1024) if quick else (4096, 1024)
    em, tm = ember.ones(rows, cols), torch.ones(rows, cols)
    if hasattr(ember, "sum"):
        out.append(("sum_lastdim", lambda: ember.sum(em, dim=-1), lambda: torch.sum(tm, dim=-1), 5))
    else:
        out.append(("sum_lastdim", None, None, 0))
    softmax = getattr(ember, "softmax", None)
    if softmax is not None:
        out.append(("softmax_lastdim", lambda: softmax(em, -1), lambda: torch.softmax(tm, -1), 5))
    else:
        out.append(("softmax_lastdim", None, None, 0))
    if hasattr(ember, "matmul"):
        ma, mb = ember.ones(1024, 1024), ember.ones(1024, 1024)
        tma, tmb = torch.ones(1024, 1024), torch.ones(1024, 1024)
        out.append(("matmul_1024", lambda: ember.matmul(ma, mb), lambda: torch.matmul(tma, tmb), 2))
    else:
        out.append(("matmul_1024", None, None, 0))
    return out


def set_threads(n: int) -> None:
    torch.set_num_threads(n)
    ember.set_num_threads(n)


def import_time(module: str, repeats: int) -> float:
    """CPU seconds for ``import <module>`` in a fresh interpreter (minimum of ``repeats``).

    Bytecode is allowed and cached in a private folder: an installed package has its .pyc files
    (pip compiles them), so an import without them measures Python's compiler, not the package.
    One unmeasured import fills the cache first. CPU time, because these machines are shared.
    """
    code = f"import time; s = time.process_time(); import {module}; print(time.process_time() - s)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    best = float("inf")
    with tempfile.TemporaryDirectory() as cache:
        env["PYTHONPYCACHEPREFIX"] = cache
        for i in range(repeats + 1):
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                 check=True)
            if i:
                best = min(best, float(out.stdout.strip()))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 7)

    print(f"{'case':<18}{'ember 1t':>12}{'torch 1t':>12}{'ratio 1t':>10}{'ratio 2t':>10}{'target':>9}")
    for name, efn, tfn, inner in cases(args.quick):
        if efn is None:
            print(f"{name:<18}{'skipped (ember op missing)':>44}")
            continue
        ratios = {}
        times = {}
        for threads in (1, 2):
            set_threads(threads)
            te = bench(efn, repeats, inner)
            tt = bench(tfn, repeats, inner)
            ratios[threads] = te / tt
            times[threads] = (te, tt)
        te, tt = times[1]
        target = TARGETS.get(name)
        mark = "" if target is None else f"<{target:g}" + (" ok" if ratios[1] <= target else " MISS")
        print(f"{name:<18}{_fmt(te):>12}{_fmt(tt):>12}{ratios[1]:>10.2f}{ratios[2]:>10.2f}{mark:>9}")
    n = 3 if args.quick else 5
    imp, imp_torch = import_time("ember", n), import_time("torch", n)
    verdict = "<0.1s " + ("ok" if imp < 0.1 else "MISS")
    print(f"{'import (CPU s)':<18}{_fmt(imp):>12}{_fmt(imp_torch):>12}{imp / imp_torch:>10.2f}{'':>10}{verdict:>9}")


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    main()

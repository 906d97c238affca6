"""Eager CPU cross-entropy forward+backward with the forward's saved log-sum-exp against the
backward that recomputes each row's max and sum (issue 13/16), beside PyTorch; one thread.

    python benchmarks/bench_cross_entropy_lse.py [--rounds 7] [--only gpt2,dim1]

Both ember variants run in this process, alternating round by round: "saved" is the shipped
path (``_class_nll`` returns the lse, autograd saves it, ``_class_nll_backward`` computes
exp(x - lse) in one pass); "recompute" hands the backward no lse, which then runs the kernel
as it was before (a max pass, an exp pass into the gradient, a scale pass per row; column
blocks for classes on dim 1). Times are process CPU time (the machine is shared), the median
over rounds of the best of a few calls; ratios are per round, then the median.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

# ruff: noqa: I001 - ember first: both libraries then share ember's libgomp settings (bench_core.py).
import ember
import ember.nn.functional as EF
import torch
import torch.nn.functional as TF

from ember.autograd.formulas import FORMULAS


def _cases():
    g = np.random.default_rng(0)
    out = []
    for name, shape, dtype in (("rows 4096x1000 f32", (4096, 1000), "float32"),
                               ("gpt2 256x50257 f32", (256, 50257), "float32"),
                               ("gpt2 256x50257 bf16", (256, 50257), "bfloat16"),
                               ("dim1 32x100x1024 f32", (32, 100, 1024), "float32")):
        x = (g.standard_normal(shape) * 2).astype(np.float32)
        y = g.integers(0, shape[1], (shape[0],) + shape[2:])
        e = ember.tensor(x).to(getattr(ember, dtype)).requires_grad_()
        t = torch.tensor(x).to(getattr(torch, dtype)).requires_grad_()
        out.append((name, (e, ember.tensor(y)), (t, torch.tensor(y))))
    return out


def _step(F, x, y):
    def run():
        x.grad = None
        F.cross_entropy(x, y).backward()
    return run


class _Recompute:
    """The formula with no saved lse handed to the backward kernel (the pre-change backward)."""

    def __init__(self):
        self.formula = FORMULAS["_class_nll"]
        self.original = self.formula.backward

        def without_lse(grads, inputs, outputs):
            return self.original(grads, inputs, ())

        self.patched = without_lse

    def __enter__(self):
        self.formula.backward = self.patched

    def __exit__(self, *exc):
        self.formula.backward = self.original


def _time(fn, calls: int) -> float:
    fn()
    best = float("inf")
    for _ in range(calls):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    keep = [s for s in args.only.split(",") if s]
    recompute = _Recompute()
    print(f"{'case':<24}{'saved':>10}{'recompute':>11}{'torch':>10}{'saved/recomp':>14}{'saved/torch':>13}")
    for name, (ex, ey), (tx, ty) in _cases():
        if keep and not any(k in name for k in keep):
            continue
        run_e, run_t = _step(EF, ex, ey), _step(TF, tx, ty)
        saved, old, ref, r_old, r_ref = [], [], [], [], []
        for i in range(args.rounds):
            order = (0, 1, 2) if i % 2 == 0 else (2, 1, 0)
            got = {}
            for which in order:
                if which == 0:
                    got[0] = _time(run_e, args.calls)
                elif which == 1:
                    with recompute:
                        got[1] = _time(run_e, args.calls)
                else:
                    got[2] = _time(run_t, args.calls)
            saved.append(got[0])
            old.append(got[1])
            ref.append(got[2])
            r_old.append(got[0] / got[1])
            r_ref.append(got[0] / got[2])
        med = statistics.median
        print(f"{name:<24}{med(saved) * 1e3:>8.2f}ms{med(old) * 1e3:>9.2f}ms{med(ref) * 1e3:>8.2f}ms"
              f"{med(r_old):>14.2f}{med(r_ref):>13.2f}")


if __name__ == "__main__":
    main()

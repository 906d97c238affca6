"""Fused pointwise updates and the optimizer steps built from them: ember vs PyTorch in one process.

Run from the repository root:
    PYTHONPATH=$(python ci/dev_env.py) python benchmarks/bench_pointwise_fused.py [--quick]

Cases: ``addcmul_``, ``addcdiv_``, ``lerp_`` (scalar weight) and ``add_(alpha=)`` on contiguous
float32 tensors of 64k and 4M elements, then ``Adam``/``AdamW`` ``step()`` on a ~1M-parameter MLP
(torch with ``foreach=False`` for a like-for-like loop, and with its defaults). Medians of
``repeat`` runs at 1 and 2 threads; the ratio is ember / torch (lower is better). The machine is
shared: compare ratios rather than absolute times.
"""

from __future__ import annotations

import argparse

import numpy as np

# ruff: noqa: I001 - ember is imported before torch on purpose (shared libgomp settings; see bench_nn.py).
import ember
import torch

from _timing import median_time


def _pair(n: int, seed: int, low=-1.0, high=1.0):
    data = np.random.default_rng(seed).uniform(low, high, n).astype(np.float32)
    return ember.from_numpy(data.copy()), torch.from_numpy(data.copy())


def pointwise_cases(n: int):
    (es, ts), (ea, ta), (eb, tb) = _pair(n, 0), _pair(n, 1), _pair(n, 2, 0.5, 1.5)
    return [
        (f"addcmul_ {n}", lambda: es.addcmul_(ea, eb, value=0.01), lambda: ts.addcmul_(ta, tb, value=0.01)),
        (f"addcdiv_ {n}", lambda: es.addcdiv_(ea, eb, value=-0.01), lambda: ts.addcdiv_(ta, tb, value=-0.01)),
        (f"lerp_ {n}", lambda: es.lerp_(ea, 0.1), lambda: ts.lerp_(ta, 0.1)),
        (f"add_(alpha) {n}", lambda: es.add_(ea, alpha=-0.01), lambda: ts.add_(ta, alpha=-0.01)),
    ]


def _mlp(module, sizes):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers.append(module.nn.Linear(a, b))
    return module.nn.Sequential(*layers)


def optimizer_cases(sizes):
    """``step()`` of Adam/AdamW with gradients already in place (the same values on both sides)."""
    em = _mlp(ember, sizes)
    tm = _mlp(torch, sizes)
    with torch.no_grad(), ember.no_grad():
        for ep, tp in zip(em.parameters(), tm.parameters()):
            data = np.random.default_rng(ep.numel()).uniform(-0.1, 0.1, tuple(ep.shape)).astype(np.float32)
            tp.copy_(torch.from_numpy(data))
            ep.copy_(ember.from_numpy(data.copy()))
            tp.grad = torch.full_like(tp, 0.01)
            ep.grad = ember.full(tuple(ep.shape), 0.01)
    params = sum(p.numel() for p in tm.parameters())
    out = []
    for name in ("Adam", "AdamW"):
        e_opt = getattr(ember.optim, name)(em.parameters(), lr=1e-3, weight_decay=0.01)
        t_loop = getattr(torch.optim, name)(tm.parameters(), lr=1e-3, weight_decay=0.01, foreach=False)
        t_default = getattr(torch.optim, name)(tm.parameters(), lr=1e-3, weight_decay=0.01)
        out.append((f"{name}.step {params}", e_opt.step, t_loop.step, t_default.step))
    return out


def set_threads(n: int) -> None:
    torch.set_num_threads(n)
    ember.set_num_threads(n)


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeat = 7 if args.quick else 21

    print(f"{'case':<24}{'ember 1t':>12}{'torch 1t':>12}{'ratio 1t':>10}{'ratio 2t':>10}")
    for n in (1 << 16, 1 << 22):
        for name, efn, tfn in pointwise_cases(n):
            ratios, times = {}, {}
            for threads in (1, 2):
                set_threads(threads)
                te, tt = median_time(efn, repeat), median_time(tfn, repeat)
                ratios[threads], times[threads] = te / tt, (te, tt)
            te, tt = times[1]
            print(f"{name:<24}{_fmt(te):>12}{_fmt(tt):>12}{ratios[1]:>10.2f}{ratios[2]:>10.2f}")

    print(f"\n{'optimizer step':<24}{'ember':>12}{'torch loop':>12}{'torch dflt':>12}{'ratio loop':>12}"
          f"{'ratio dflt':>12}")
    for threads in (1, 2):
        set_threads(threads)
        for name, efn, tloop, tdefault in optimizer_cases([512, 1024, 512]):
            te, tl, td = (median_time(fn, repeat) for fn in (efn, tloop, tdefault))
            print(f"{name + f' ({threads}t)':<24}{_fmt(te):>12}{_fmt(tl):>12}{_fmt(td):>12}{te / tl:>12.2f}"
                  f"{te / td:>12.2f}")


if __name__ == "__main__":
    main()

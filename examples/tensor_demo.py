"""ember's main job until ember.nn lands: fit a linear regression by gradient descent.

Everything runs on ember tensors with PyTorch's API (`import ember as torch` would read the
same): random data, matrix products with `@`, reductions, pointwise updates. The gradient of
the mean squared error is written out by hand (autograd is a separate package). NumPy only
checks the answer at the end against its least-squares solver.

    python examples/tensor_demo.py [--samples N] [--features D] [--steps S]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ember


def make_data(samples: int, features: int, noise: float = 0.01):
    """y = X @ w_true + b_true + noise, with X ~ N(0, 1)."""
    ember.manual_seed(0)
    x = ember.randn(samples, features)
    w_true = ember.linspace(-1.0, 1.0, features).reshape(features, 1)
    b_true = 0.5
    y = x @ w_true + b_true + noise * ember.randn(samples, 1)
    return x, y, w_true, b_true


def fit(x: ember.Tensor, y: ember.Tensor, steps: int, lr: float, log_every: int):
    """Plain gradient descent on the mean squared error of x @ w + b against y."""
    samples, features = x.shape
    w = ember.zeros(features, 1)
    b = ember.zeros(1)
    for step in range(steps + 1):
        residual = x @ w + b - y  # (samples, 1)
        loss = (residual * residual).mean()
        if step % log_every == 0 or step == steps:
            print(f"step {step:4d}  mse {loss.item():.6f}")
        # d(mse)/dw = 2/n * x^T r,  d(mse)/db = 2 * mean(r)
        grad_w = (x.T @ residual) * (2.0 / samples)
        grad_b = residual.mean() * 2.0
        w = w - lr * grad_w
        b = b - lr * grad_b
    return w, b, loss.item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    x, y, w_true, b_true = make_data(args.samples, args.features)
    start = time.perf_counter()
    w, b, mse = fit(x, y, args.steps, args.lr, log_every=max(args.steps // 5, 1))
    seconds = time.perf_counter() - start

    # Reference: NumPy's least-squares solution of [x, 1] @ [w; b] = y.
    design = np.hstack([x.numpy(), np.ones((args.samples, 1), dtype=np.float32)])
    reference, *_ = np.linalg.lstsq(design.astype(np.float64), y.numpy().astype(np.float64), rcond=None)
    w_error = float(np.abs(w.numpy()[:, 0] - reference[:-1, 0]).max())
    b_error = abs(b.item() - float(reference[-1, 0]))
    print(f"fit {args.samples}x{args.features} in {args.steps} steps: {seconds * 1e3:.1f} ms")
    print(f"max |w - w_true| = {(w - w_true).abs().max().item():.4f}, b = {b.item():.4f} (true {b_true})")
    print(f"max |w - lstsq| = {w_error:.2e}, |b - lstsq| = {b_error:.2e}")
    if w_error > 1e-3 or b_error > 1e-3 or mse > 1e-3:
        raise SystemExit("gradient descent did not reach the least-squares solution")
    print("ok")


if __name__ == "__main__":
    main()

"""ember's main job until ember.nn lands: train models end to end with tensors and autograd.

1. Linear regression by gradient descent, gradients from ``loss.backward()``; checked
   against NumPy's least-squares solution and against the hand-derived gradient.
2. A two-layer MLP classifier on synthetic spirals (3 classes), trained with SGD on the
   cross-entropy written from ``log_softmax`` and ``gather``; it must reach 95% accuracy.

Everything runs on ember with PyTorch's API (``import ember as torch`` reads the same).
NumPy only checks the regression answer.

    python examples/tensor_demo.py [--samples N] [--features D] [--steps S]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import ember


def make_regression(samples: int, features: int, noise: float = 0.01):
    """y = X @ w_true + b_true + noise, with X ~ N(0, 1)."""
    ember.manual_seed(0)
    x = ember.randn(samples, features)
    w_true = ember.linspace(-1.0, 1.0, features).reshape(features, 1)
    b_true = 0.5
    y = x @ w_true + b_true + noise * ember.randn(samples, 1)
    return x, y, w_true, b_true


def fit_regression(x: ember.Tensor, y: ember.Tensor, steps: int, lr: float, log_every: int):
    """Gradient descent on the mean squared error of x @ w + b against y."""
    samples, features = x.shape
    w = ember.zeros(features, 1, requires_grad=True)
    b = ember.zeros(1, requires_grad=True)
    for step in range(steps + 1):
        residual = x @ w + b - y
        loss = (residual * residual).mean()
        loss.backward()
        if step == 0:
            # Autograd agrees with the hand-derived gradient 2/n * x^T r.
            expected = (x.T @ residual.detach()) * (2.0 / samples)
            if not ember.allclose(w.grad, expected, rtol=1e-4, atol=1e-6):
                raise SystemExit("autograd's gradient differs from the analytic one")
        if step % log_every == 0 or step == steps:
            print(f"regression step {step:4d}  mse {loss.item():.6f}")
        with ember.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad = None
        b.grad = None
    return w.detach(), b.detach(), loss.item()


def make_spirals(points_per_class: int, classes: int = 3):
    """Interleaved spirals: not linearly separable, easy for a small MLP."""
    ember.manual_seed(1)
    radius = ember.linspace(0.05, 1.0, points_per_class).repeat(classes)
    labels = ember.arange(classes).reshape(classes, 1).expand(classes, points_per_class).reshape(-1)
    angle = labels.to(ember.float32) * (2 * math.pi / classes) + radius * 4.0
    angle = angle + 0.15 * ember.randn(angle.shape[0])
    points = ember.stack([radius * ember.sin(angle), radius * ember.cos(angle)], dim=1)
    return points, labels


def train_mlp(points: ember.Tensor, labels: ember.Tensor, steps: int, hidden: int = 64, lr: float = 0.5):
    """A 2-64-3 tanh MLP trained with full-batch SGD; returns the final accuracy."""
    ember.manual_seed(2)
    classes = int(labels.max().item()) + 1
    w1 = (ember.randn(2, hidden) * (1.0 / math.sqrt(2))).requires_grad_()
    b1 = ember.zeros(hidden, requires_grad=True)
    w2 = (ember.randn(hidden, classes) * (1.0 / math.sqrt(hidden))).requires_grad_()
    b2 = ember.zeros(classes, requires_grad=True)
    params = [w1, b1, w2, b2]
    for step in range(steps + 1):
        logits = ember.tanh(points @ w1 + b1) @ w2 + b2
        log_probs = ember.log_softmax(logits, dim=1)
        loss = -log_probs.gather(1, labels.unsqueeze(1)).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with ember.no_grad():
            for p in params:
                p -= lr * p.grad
        if step % max(steps // 5, 1) == 0 or step == steps:
            accuracy = (logits.argmax(dim=1) == labels).float().mean().item()
            print(f"mlp step {step:4d}  loss {loss.item():.4f}  accuracy {accuracy:.3f}")
    return accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--mlp-steps", type=int, default=1500)
    args = parser.parse_args()

    x, y, w_true, b_true = make_regression(args.samples, args.features)
    start = time.perf_counter()
    w, b, mse = fit_regression(x, y, args.steps, args.lr, log_every=max(args.steps // 5, 1))
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

    points, labels = make_spirals(200)
    start = time.perf_counter()
    accuracy = train_mlp(points, labels, args.mlp_steps)
    print(f"mlp on {points.shape[0]} spiral points, {args.mlp_steps} steps: {time.perf_counter() - start:.2f} s")
    if accuracy < 0.95:
        raise SystemExit(f"the MLP reached only {accuracy:.3f} accuracy")
    print("ok")


if __name__ == "__main__":
    main()

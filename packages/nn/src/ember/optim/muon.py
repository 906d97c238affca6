"""Muon: momentum SGD whose update is orthogonalised by a Newton-Schulz iteration (2-D parameters)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import ember
from ember import Tensor

from .optimizer import Optimizer, _lerp_, _no_grad_step, _run_closure, _scalar

__all__ = ["Muon"]

EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.775
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5


def _zeropower_via_newtonschulz(
    grad: Tensor, ns_coefficients: tuple[float, float, float], ns_steps: int, eps: float
) -> Tensor:
    """An approximate ``U V^T`` of ``grad = U S V^T``, iterated in bfloat16 as PyTorch does."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(grad.shape) != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    ortho = grad.bfloat16()
    tall = grad.size(0) > grad.size(1)
    if tall:  # iterate on the wide orientation: the Gram matrix is the smaller one
        ortho = ortho.T
    ortho.div_(ortho.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = ortho @ ortho.T
        gram_update = ember.addmm(gram, gram, gram, beta=b, alpha=c)
        ortho = ember.addmm(ortho, gram_update, ortho, beta=a)
    return ortho.T if tall else ortho


def _adjust_lr(lr: float, adjust_lr_fn: str | None, param_shape) -> float:
    rows, cols = param_shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    """Implements Muon, as ``torch.optim.Muon`` (every parameter must be a matrix).

    ``b = lerp(b, g, 1 - momentum)``; the update (Nesterov: ``lerp(g, b, momentum)``) is
    orthogonalised, scaled by ``adjust_lr_fn``, and applied after decoupled weight decay.
    """

    _complex_as_real = False

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = (DEFAULT_A, DEFAULT_B, DEFAULT_C),
        eps: float = EPS,
        ns_steps: int = DEFAULT_NS_STEPS,
        adjust_lr_fn: str | None = None,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = {
            "lr": lr,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "nesterov": nesterov,
            "ns_coefficients": ns_coefficients,
            "eps": eps,
            "ns_steps": ns_steps,
            "adjust_lr_fn": adjust_lr_fn,
        }
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(
                        f"Muon only supports 2D parameters whereas we found a parameter with size: {p.size()}"
                    )

    @_no_grad_step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Performs one optimization step; ``closure`` re-evaluates the model and returns the loss."""
        loss = _run_closure(closure)
        for group in self.param_groups:
            lr = _scalar(group["lr"])
            weight_decay, momentum, nesterov = group["weight_decay"], group["momentum"], group["nesterov"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError("Muon does not support sparse gradients")
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = ember.zeros_like(grad)
                buf = state["momentum_buffer"]
                _lerp_(buf, grad, 1 - momentum)
                update = _lerp_(grad.clone(), buf, momentum) if nesterov else buf
                update = _zeropower_via_newtonschulz(
                    update, group["ns_coefficients"], group["ns_steps"], group["eps"]
                )
                adjusted_lr = _adjust_lr(lr, group["adjust_lr_fn"], p.shape)
                p.mul_(1 - lr * weight_decay)
                # Scale in the parameter's dtype: the core's add(alpha=) would scale in bfloat16 first.
                p.add_(update.to(p.dtype), alpha=-adjusted_lr)
        return loss

"""RMSprop, optionally centered and with momentum."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import ember
from ember import Tensor

from .optimizer import (
    Optimizer,
    _add_quotient_,
    _addcmul_,
    _check_lr,
    _check_nonnegative,
    _effective_grad,
    _lerp_,
    _new_step,
    _no_grad_step,
    _run_closure,
    _scalar,
    _steps_as_tensors,
)

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """Implements RMSprop, as ``torch.optim.RMSprop``.

    ``v = alpha * v + (1 - alpha) * g^2``; centered: ``avg = sqrt(v - mean(g)^2)`` with
    ``mean(g) = lerp(mean(g), g, 1 - alpha)``, else ``avg = sqrt(v)``; then with momentum
    ``b = momentum * b + g / (avg + eps)``, ``p -= lr * b``, else ``p -= lr * g / (avg + eps)``.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_nonnegative("epsilon value", eps)
        _check_nonnegative("momentum value", momentum)
        _check_nonnegative("weight_decay value", weight_decay)
        _check_nonnegative("alpha value", alpha)
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "alpha": alpha,
            "eps": eps,
            "centered": centered,
            "weight_decay": weight_decay,
            "capturable": capturable,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)
            _steps_as_tensors(self.state, group)

    @_no_grad_step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Performs one optimization step; ``closure`` re-evaluates the model and returns the loss."""
        loss = _run_closure(closure)
        for group in self.param_groups:
            lr = _scalar(group["lr"])
            alpha, eps = group["alpha"], group["eps"]
            weight_decay, momentum = group["weight_decay"], group["momentum"]
            centered, maximize = group["centered"], group["maximize"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError("RMSprop does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["square_avg"] = ember.zeros_like(p)
                    if momentum > 0:
                        state["momentum_buffer"] = ember.zeros_like(p)
                    if centered:
                        state["grad_avg"] = ember.zeros_like(p)
                state["step"].add_(1)
                grad = _effective_grad(p, grad, maximize, weight_decay)
                square_avg = state["square_avg"]
                _addcmul_(square_avg.mul_(alpha), grad, grad, 1 - alpha)
                if centered:
                    grad_avg = state["grad_avg"]
                    _lerp_(grad_avg, grad, 1 - alpha)
                    avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                else:
                    avg = square_avg.sqrt()
                avg.add_(eps)
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    _add_quotient_(buf.mul_(momentum), grad, avg, 1)
                    p.add_(buf, alpha=-lr)
                else:
                    _add_quotient_(p, grad, avg, -lr)
        return loss

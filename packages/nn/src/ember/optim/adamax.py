"""Adamax: Adam with the infinity norm."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import ember
from ember import Tensor

from .optimizer import (
    Optimizer,
    _bump,
    _check_betas,
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

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """Implements Adamax, as ``torch.optim.Adamax``.

    ``m = lerp(m, g, 1 - beta1)``, ``u = max(beta2 * u, |g| + eps)``,
    ``p -= lr / (1 - beta1^t) * m / u``.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_nonnegative("epsilon value", eps)
        _check_betas(betas)
        _check_nonnegative("weight_decay value", weight_decay)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
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
            beta1, beta2 = group["betas"]
            eps, weight_decay, maximize = group["eps"], group["weight_decay"], group["maximize"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError("Adamax does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["exp_avg"] = ember.zeros_like(p)
                    state["exp_inf"] = ember.zeros_like(p)
                step = _bump(state["step"])
                grad = _effective_grad(p, grad, maximize, weight_decay)
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                _lerp_(exp_avg, grad, 1 - beta1)
                ember.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
                p.add_(exp_avg.mul(-lr / (1 - beta1**step)).div_(exp_inf))
        return loss

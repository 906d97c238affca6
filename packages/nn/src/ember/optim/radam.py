"""RAdam: Adam with a rectified adaptive learning rate."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import ember
from ember import Tensor

from .optimizer import (
    Optimizer,
    _add_quotient_,
    _addcmul_,
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

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """Implements RAdam, as ``torch.optim.RAdam``.

    While the variance of the adaptive rate is intractable (``rho_t <= 5``) the step is plain
    momentum, ``p -= lr * m / (1 - beta1^t)``; after, Adam's step scaled by the rectification
    ``r_t``. ``decoupled_weight_decay`` applies the decay to the parameter (RAdamW).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
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
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "decoupled_weight_decay": decoupled_weight_decay,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("decoupled_weight_decay", False)
            group.setdefault("capturable", False)
            _steps_as_tensors(self.state, group)

    @_no_grad_step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Performs one optimization step; ``closure`` re-evaluates the model and returns the loss."""
        loss = _run_closure(closure)
        for group in self.param_groups:
            lr = _scalar(group["lr"])
            beta1, beta2 = group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            decoupled, maximize = group["decoupled_weight_decay"], group["maximize"]
            rho_inf = 2 / (1 - beta2) - 1
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError("RAdam does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["exp_avg"] = ember.zeros_like(p)
                    state["exp_avg_sq"] = ember.zeros_like(p)
                step = _bump(state["step"])
                if decoupled and weight_decay != 0:
                    p.mul_(1 - lr * weight_decay)
                grad = _effective_grad(p, grad, maximize, 0 if decoupled else weight_decay)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                _lerp_(exp_avg, grad, 1 - beta1)
                _addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)
                correction1 = 1 - beta1**step
                correction2 = 1 - beta2**step
                rho_t = rho_inf - 2 * step * beta2**step / correction2
                if rho_t > 5.0:
                    rect = math.sqrt(
                        (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
                    )
                    denom = exp_avg_sq.sqrt().add_(eps)
                    _add_quotient_(p, exp_avg, denom, -lr / correction1 * rect * math.sqrt(correction2))
                else:
                    p.add_(exp_avg, alpha=-lr / correction1)
        return loss

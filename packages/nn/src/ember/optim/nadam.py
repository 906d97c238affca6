"""NAdam: Adam with Nesterov momentum (and the momentum-decay schedule of Dozat)."""

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
)

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """Implements NAdam, as ``torch.optim.NAdam``.

    ``mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))``; the running product of the
    ``mu`` is kept (as PyTorch does) in a float32 0-d tensor ``mu_product``. With
    ``decoupled_weight_decay`` the decay is applied to the parameter (NAdamW).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
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
        _check_nonnegative("momentum_decay value", momentum_decay)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum_decay": momentum_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)
            group.setdefault("differentiable", False)
            group.setdefault("decoupled_weight_decay", False)
            for p in group["params"]:
                p_state = self.state.get(p, {})
                for key in ("step", "mu_product"):
                    if key in p_state and not isinstance(p_state[key], Tensor):
                        p_state[key] = ember.tensor(float(p_state[key]), dtype=ember.float32)

    @_no_grad_step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Performs one optimization step; ``closure`` re-evaluates the model and returns the loss."""
        loss = _run_closure(closure)
        for group in self.param_groups:
            lr = _scalar(group["lr"])
            beta1, beta2 = group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            momentum_decay, decoupled = group["momentum_decay"], group["decoupled_weight_decay"]
            maximize = group["maximize"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError("NAdam does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["mu_product"] = ember.tensor(1.0, dtype=ember.float32)
                    state["exp_avg"] = ember.zeros_like(p)
                    state["exp_avg_sq"] = ember.zeros_like(p)
                step = _bump(state["step"])
                if decoupled and weight_decay != 0:
                    p.mul_(1 - lr * weight_decay)
                grad = _effective_grad(p, grad, maximize, 0 if decoupled else weight_decay)
                correction2 = 1 - beta2**step
                mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
                mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
                # The product lives in a 0-d tensor (float32) and is rounded to it every step, as in PyTorch.
                mu_product = state["mu_product"].mul_(mu).item()
                mu_product_next = mu_product * mu_next
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                _lerp_(exp_avg, grad, 1 - beta1)
                _addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)
                # sqrt(v / c2) + eps == (sqrt(v) + eps * sqrt(c2)) / sqrt(c2): fold sqrt(c2) into the values.
                correction2_sqrt = math.sqrt(correction2)
                # Both terms share the denominator: p += (a * grad + b * exp_avg) / denom.
                denom = exp_avg_sq.sqrt().add_(eps * correction2_sqrt)
                grad_coef = -lr * (1.0 - mu) / (1.0 - mu_product) * correction2_sqrt
                avg_coef = -lr * mu_next / (1.0 - mu_product_next) * correction2_sqrt
                _add_quotient_(p, grad.mul(grad_coef).add_(exp_avg, alpha=avg_coef), denom, 1)
        return loss

"""Adadelta."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import ember
from ember import Tensor

from .optimizer import (
    Optimizer,
    _addcmul_,
    _check_lr,
    _check_nonnegative,
    _effective_grad,
    _new_step,
    _no_grad_step,
    _run_closure,
    _scalar,
    _steps_as_tensors,
)

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Implements Adadelta, as ``torch.optim.Adadelta``.

    ``v = rho * v + (1 - rho) * g^2``, ``d = sqrt(u + eps) / sqrt(v + eps) * g``,
    ``u = rho * u + (1 - rho) * d^2``, ``p -= lr * d``.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        _check_nonnegative("epsilon value", eps)
        _check_nonnegative("weight_decay value", weight_decay)
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "capturable": capturable,
            "foreach": foreach,
            "differentiable": differentiable,
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
            rho, eps = group["rho"], group["eps"]
            weight_decay, maximize = group["weight_decay"], group["maximize"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError("Adadelta does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["square_avg"] = ember.zeros_like(p)
                    state["acc_delta"] = ember.zeros_like(p)
                state["step"].add_(1)
                grad = _effective_grad(p, grad, maximize, weight_decay)
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                _addcmul_(square_avg.mul_(rho), grad, grad, 1 - rho)
                std = square_avg.add(eps).sqrt_()
                delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
                del std
                _addcmul_(acc_delta.mul_(rho), delta, delta, 1 - rho)
                p.add_(delta, alpha=-lr)
        return loss

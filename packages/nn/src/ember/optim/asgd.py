"""ASGD: averaged stochastic gradient descent."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any

import ember
from ember import Tensor

from .optimizer import (
    Optimizer,
    _check_lr,
    _check_nonnegative,
    _effective_grad,
    _new_step,
    _no_grad_step,
    _run_closure,
    _scalar,
    _steps_as_tensors,
)

__all__ = ["ASGD"]


def _float32(value: float) -> float:
    """``value`` rounded to the nearest float32."""
    return struct.unpack("f", struct.pack("f", value))[0]


class ASGD(Optimizer):
    """Implements averaged SGD, as ``torch.optim.ASGD``.

    ``p = p * (1 - lambd * eta) - eta * g``; the average ``ax`` follows ``p`` with weight ``mu``;
    then ``eta = lr / (1 + lambd * lr * t) ** alpha`` and ``mu = 1 / max(1, t - t0)``. ``eta``
    and ``mu`` are float32 0-d tensors in the state, as in PyTorch (their rounding is part of
    the trajectory).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _check_lr(lr)
        _check_nonnegative("weight_decay value", weight_decay)
        defaults = {
            "lr": lr,
            "lambd": lambd,
            "alpha": alpha,
            "t0": t0,
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
            lambd, alpha, t0 = group["lambd"], group["alpha"], group["t0"]
            weight_decay, maximize = group["weight_decay"], group["maximize"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError("ASGD does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["eta"] = ember.tensor(lr, dtype=ember.float32)
                    state["mu"] = ember.tensor(1.0, dtype=ember.float32)
                    state["ax"] = ember.zeros_like(p)
                step_t, eta_t, mu_t, ax = state["step"], state["eta"], state["mu"], state["ax"]
                step_t.add_(1)
                grad = _effective_grad(p, grad, maximize, weight_decay)
                eta = eta_t.item()
                p.mul_(1 - lambd * eta)
                p.add_(grad, alpha=-eta)
                mu = mu_t.item()
                if mu != 1:
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                step = step_t.item()
                # PyTorch builds both through a default-dtype (float32) tensor, whatever their dtype.
                eta_t.fill_(_float32(lr / (1 + lambd * lr * step) ** alpha))
                mu_t.fill_(_float32(1 / max(1, step - t0)))
        return loss

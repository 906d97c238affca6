"""Rprop: resilient backpropagation (per-element step sizes driven by gradient signs)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import ember
from ember import Tensor

from .optimizer import (
    Optimizer,
    _check_lr,
    _new_step,
    _no_grad_step,
    _run_closure,
    _scalar,
    _steps_as_tensors,
)

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Implements Rprop, as ``torch.optim.Rprop``.

    Each element's step size grows by ``etas[1]`` while its gradient keeps its sign and shrinks
    by ``etas[0]`` when the sign flips (that step is skipped and its gradient forgotten),
    clamped to ``step_sizes``; the parameter moves by ``-sign(g) * step_size``.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = {
            "lr": lr,
            "etas": etas,
            "step_sizes": step_sizes,
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
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            maximize = group["maximize"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError("Rprop does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["prev"] = ember.zeros_like(p)
                    state["step_size"] = ember.full_like(grad, _scalar(group["lr"]))
                state["step"].add_(1)
                if maximize:
                    grad = grad.neg()
                prev, step_size = state["prev"], state["step_size"]
                # The factor per element, in the gradient's dtype (1.2 must not round to float32).
                factor = grad.mul(prev).sign_()
                factor.masked_fill_(factor > 0, etaplus)
                factor.masked_fill_(factor < 0, etaminus)
                factor.masked_fill_(factor == 0, 1)
                step_size.mul_(factor).clamp_(step_size_min, step_size_max)
                grad = grad.masked_fill(factor == etaminus, 0)
                p.sub_(grad.sign().mul_(step_size))
                prev.copy_(grad)
        return loss

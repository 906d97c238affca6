"""Adafactor: Adam-like steps with a factored (row x column) second-moment estimate."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import ember
from ember import Tensor

from .optimizer import Optimizer, _lerp_, _new_step, _no_grad_step, _run_closure, _scalar, _steps_as_tensors

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """Implements Adafactor, as ``torch.optim.Adafactor``.

    For a matrix (or a stack of them) the variance is ``row_var @ col_var / mean(row_var)``,
    each kept as a running mean of squared gradient norms over one axis, with the decay
    ``1 - beta2_t = t ** beta2_decay``; vectors keep a full variance. The step is the
    relative one of the paper: ``alpha = max(eps2, RMS(p)) * min(lr, 1 / sqrt(t))``, and the
    update ``g / sqrt(var)`` is clipped to RMS ``d``.
    """

    _complex_as_real = False

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = {
            "lr": lr,
            "beta2_decay": beta2_decay,
            "eps": eps,
            "d": d,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            _steps_as_tensors(self.state, group)

    @_no_grad_step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Performs one optimization step; ``closure`` re-evaluates the model and returns the loss."""
        loss = _run_closure(closure)
        for group in self.param_groups:
            lr = _scalar(group["lr"])
            eps1, eps2 = group["eps"]
            beta2_decay, d = group["beta2_decay"], group["d"]
            weight_decay, maximize = group["weight_decay"], group["maximize"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if p.is_complex():
                    raise RuntimeError("Adafactor does not support complex parameters")
                if grad.is_sparse:
                    raise RuntimeError("Adafactor does not support sparse gradients")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _new_step()
                    if grad.dim() > 1:
                        state["row_var"] = grad.new_zeros([*grad.shape[:-1], 1])
                        state["col_var"] = grad.new_zeros([*grad.shape[:-2], 1, grad.shape[-1]])
                    else:
                        state["variance"] = ember.zeros_like(grad)
                if maximize:
                    grad = grad.neg()
                if eps1 is None:  # as in PyTorch: the first parameter's dtype decides for the group
                    eps1 = ember.finfo(p.dtype).eps
                step_t = state["step"]
                step_t.add_(1)
                step = step_t.item()
                one_minus_beta2 = step**beta2_decay
                rho = min(lr, 1 / step**0.5)
                alpha = max(eps2, p.norm(2).item() / p.numel() ** 0.5) * rho
                if weight_decay != 0:
                    p.mul_(1 - lr * weight_decay)
                if grad.dim() > 1:
                    row_var, col_var = state["row_var"], state["col_var"]
                    row_mean = ember.norm(grad, dim=-1, keepdim=True).square_().div_(grad.size(-1))
                    _lerp_(row_var, row_mean, one_minus_beta2)
                    col_mean = ember.norm(grad, dim=-2, keepdim=True).square_().div_(grad.size(-2))
                    _lerp_(col_var, col_mean, one_minus_beta2)
                    var_estimate = row_var @ col_var
                    var_estimate.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
                else:
                    variance = state["variance"]
                    _lerp_(variance, grad * grad, one_minus_beta2)
                    var_estimate = variance.clone()
                update = var_estimate.clamp_(min=eps1 * eps1).rsqrt_().mul_(grad)
                denom = max(1.0, update.norm(2).item() / (update.numel() ** 0.5 * d))
                p.add_(update, alpha=-alpha / denom)
        return loss

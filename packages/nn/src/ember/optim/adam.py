"""Adam (and, with ``decoupled_weight_decay=True``, the AdamW update)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import repeat
from operator import attrgetter, is_, itemgetter
from typing import Any

import ember
from ember import Tensor

from .optimizer import (
    _LAYOUT,
    _STRIDED,
    Optimizer,
    _add_quotient_,
    _addcmul_,
    _bump,
    _bump_steps,
    _check_betas,
    _check_lr,
    _check_nonnegative,
    _effective_grad,
    _fusable,
    _lerp_,
    _new_step,
    _scalar,
    _steps_as_tensors,
)

__all__ = ["Adam"]

_GRAD = attrgetter("grad")
_STEP, _EXP_AVG, _EXP_AVG_SQ = itemgetter("step"), itemgetter("exp_avg"), itemgetter("exp_avg_sq")
_MAX_EXP_AVG_SQ = itemgetter("max_exp_avg_sq")


def _scalar_hyperparameter(name: str, value: float | Tensor) -> float | Tensor:
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ValueError(f"Tensor {name} must be 1-element")
        return value.reshape(()) if value.dim() != 0 else value
    return value


class Adam(Optimizer):
    """Implements Adam, as ``torch.optim.Adam`` (``amsgrad``, ``maximize``, ``weight_decay``).

    ``m = lerp(m, g, 1 - beta1)``, ``v = beta2 * v + (1 - beta2) * g^2``, then
    ``p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)`` (``v`` replaced by
    its running maximum with ``amsgrad``). ``decoupled_weight_decay`` gives AdamW.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-3,
        betas: tuple[float | Tensor, float | Tensor] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        _check_lr(lr)
        if isinstance(lr, Tensor) and foreach and not capturable:
            raise ValueError("lr as a Tensor is not supported for capturable=False and foreach=True")
        _check_nonnegative("epsilon value", eps)
        _check_betas(betas)
        _check_nonnegative("weight_decay value", weight_decay)
        both_floats = isinstance(betas[0], float) and isinstance(betas[1], float)
        both_tensors = isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor)
        if not (both_floats or both_tensors):
            raise ValueError("betas must be either both floats or both Tensors")
        betas = (_scalar_hyperparameter("betas[0]", betas[0]), _scalar_hyperparameter("betas[1]", betas[1]))
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
            "fused": fused,
            "decoupled_weight_decay": decoupled_weight_decay,
        }
        super().__init__(params, defaults)
        self._check_fused_flags()

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)
            group.setdefault("differentiable", False)
            group.setdefault("decoupled_weight_decay", False)
            group.setdefault("fused", None)
            _steps_as_tensors(self.state, group)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr = _scalar(group["lr"])
        beta1, beta2 = (_scalar(b) for b in group["betas"])
        eps = group["eps"]
        weight_decay = group["weight_decay"]
        amsgrad = group["amsgrad"]
        maximize = group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        # The per-parameter bookkeeping runs in C-level loops (map over builtins and _C helpers): GPT-2's 148
        # parameters cost ~1 ms of Python a step when done one by one (session 14's notes).
        params = group["params"]
        grads = list(map(_GRAD, params))
        if any(map(is_, grads, repeat(None))):
            params = [p for p in params if p.grad is not None]
            grads = list(map(_GRAD, params))
        if not all(map(is_, map(_LAYOUT, grads), repeat(_STRIDED))) and any(g.is_sparse for g in grads):
            raise RuntimeError("Adam does not support sparse gradients, please consider SparseAdam instead")
        if isinstance(group["lr"], Tensor) and group["foreach"] and not group["capturable"]:
            raise RuntimeError("lr as a Tensor is not supported for capturable=False and foreach=True")
        states = list(map(self.state.__getitem__, params))
        if not all(states):
            for p, state in zip(params, states):
                if len(state) == 0:
                    state["step"] = _new_step()
                    state["exp_avg"] = ember.zeros_like(p)
                    state["exp_avg_sq"] = ember.zeros_like(p)
                    if amsgrad:
                        state["max_exp_avg_sq"] = ember.zeros_like(p)
        if _fusable(params, grads):
            # One native pass over all the group's params (Note [fused updates]); PyTorch's
            # foreach/fused/for-loop variants are the same equations.
            steps = list(map(_STEP, states))
            _bump_steps(steps)
            fused = ember._fused_adamw_ if decoupled else ember._fused_adam_
            exp_avgs, exp_avg_sqs = list(map(_EXP_AVG, states)), list(map(_EXP_AVG_SQ, states))
            maxes = list(map(_MAX_EXP_AVG_SQ, states)) if amsgrad else []
            fused(params, grads, exp_avgs, exp_avg_sqs, maxes,
                  steps, lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay, eps=eps, amsgrad=amsgrad,
                  maximize=maximize, grad_scale=getattr(self, "grad_scale", None),
                  found_inf=getattr(self, "found_inf", None))
            if not group["fused"]:
                # The version bumps of PyTorch's foreach / for-loop step (its fused kernels bump none):
                # AdamW's decay is a param.mul_ of its own, the second moment a mul_ then an addcmul_.
                ember._C._bump_versions(params, exp_avgs, exp_avg_sqs, exp_avg_sqs, maxes,
                                        params if decoupled and weight_decay != 0 else ())
            return
        for p in params:
            state = self.state[p]
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            step = _bump(state["step"])
            if decoupled and weight_decay != 0:
                p.mul_(1 - lr * weight_decay)
            grad = _effective_grad(p, p.grad, maximize, 0 if decoupled else weight_decay)
            _lerp_(exp_avg, grad, 1 - beta1)
            _addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)
            if amsgrad:
                second = state["max_exp_avg_sq"]
                ember.maximum(second, exp_avg_sq, out=second)
            else:
                second = exp_avg_sq
            step_size = lr / (1 - beta1**step)
            correction2_sqrt = math.sqrt(1 - beta2**step)
            # m / (sqrt(v) / c + eps) == c * m / (sqrt(v) + eps * c): one op fewer per step.
            denom = second.sqrt().add_(eps * correction2_sqrt)
            _add_quotient_(p, exp_avg, denom, -step_size * correction2_sqrt)

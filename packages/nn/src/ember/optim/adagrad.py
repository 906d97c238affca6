"""Adagrad, with learning-rate decay and an initial accumulator value."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import ember
from ember import Tensor

from .optimizer import (
    Optimizer,
    _add_quotient_,
    _bump,
    _check_lr,
    _check_nonnegative,
    _effective_grad,
    _new_step,
    _no_grad_step,
    _run_closure,
    _scalar,
)

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Implements Adagrad, as ``torch.optim.Adagrad``.

    ``s += g^2``, ``p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)``. The state of
    every parameter is created up front (``sum`` starts at ``initial_accumulator_value``).
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _check_lr(lr)
        _check_nonnegative("lr_decay value", lr_decay)
        _check_nonnegative("weight_decay value", weight_decay)
        _check_nonnegative("initial_accumulator_value value", initial_accumulator_value)
        _check_nonnegative("epsilon value", eps)
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "eps": eps,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p: Tensor) -> dict[str, Any]:
        state = self.state[p]
        state["step"] = _new_step()
        state["sum"] = ember.full_like(p, self.defaults["initial_accumulator_value"])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)
        for p_state in self.state.values():
            if "step" in p_state and not isinstance(p_state["step"], Tensor):
                p_state["step"] = ember.tensor(float(p_state["step"]), dtype=ember.float32)

    def share_memory(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["sum"].share_memory_()

    @_no_grad_step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Performs one optimization step; ``closure`` re-evaluates the model and returns the loss."""
        loss = _run_closure(closure)
        for group in self.param_groups:
            lr = _scalar(group["lr"])
            lr_decay, eps = group["lr_decay"], group["eps"]
            weight_decay, maximize = group["weight_decay"], group["maximize"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:  # a group added after construction
                    state = self._init_state(p)
                step = _bump(state["step"])
                if grad.layout is not ember.strided:
                    if weight_decay != 0:
                        raise RuntimeError("weight_decay option is not compatible with sparse gradients")
                    _sparse_update(p, grad.neg() if maximize else grad, state["sum"], lr / (1 + (step - 1) * lr_decay),
                                   eps)
                    continue
                grad = _effective_grad(p, grad, maximize, weight_decay)
                clr = lr / (1 + (step - 1) * lr_decay)
                state_sum = state["sum"]
                # fused=True: PyTorch's _fused_adagrad_ bumps no version counter; .data aliases write the
                # same memory through counters of their own
                target, state_sum = (p.data, state_sum.data) if group["fused"] else (p, state_sum)
                state_sum.add_(grad.mul(grad))
                _add_quotient_(target, grad, state_sum.sqrt().add_(eps), -clr)
        return loss


def _sparse_update(p: Tensor, grad: Tensor, state_sum: Tensor, clr: float, eps: float) -> None:
    """Adagrad's step for a sparse gradient: the accumulator and the parameter change only at the
    positions the (coalesced) gradient stores."""
    grad = grad.coalesce()
    values = grad._values()
    state_sum.add_(grad * grad)
    std = state_sum.sparse_mask(grad)._values().sqrt() + eps
    p.add_(ember.sparse_coo_tensor(grad._indices(), values / std, tuple(grad.shape), is_coalesced=True), alpha=-clr)

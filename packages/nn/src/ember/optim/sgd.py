"""Stochastic gradient descent, optionally with (Nesterov) momentum."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ember
from ember import Tensor

from .optimizer import (
    Optimizer,
    _check_lr,
    _check_nonnegative,
    _effective_grad,
    _fusable,
    _scalar,
)

__all__ = ["SGD"]


class SGD(Optimizer):
    """Implements stochastic gradient descent (optionally with momentum), as ``torch.optim.SGD``.

    With momentum ``mu`` and dampening ``tau``: ``b = mu * b + (1 - tau) * g`` (``b = g`` on
    the first step), then ``p -= lr * (g + mu * b)`` with Nesterov, ``p -= lr * b`` without.

    Example:
        >>> w = ember.ones(3, requires_grad=True)
        >>> opt = SGD([w], lr=0.1, momentum=0.9)
        >>> (w * w).sum().backward()
        >>> opt.step()
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        _check_lr(lr)
        _check_nonnegative("momentum value", momentum)
        _check_nonnegative("weight_decay value", weight_decay)
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
            "foreach": foreach,
            "differentiable": differentiable,
            "fused": fused,
        }
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)
        self._check_fused_flags()

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", False)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr = _scalar(group["lr"])
        weight_decay = group["weight_decay"]
        momentum = group["momentum"]
        dampening = group["dampening"]
        nesterov = group["nesterov"]
        maximize = group["maximize"]
        params = [p for p in group["params"] if p.grad is not None]
        if _fusable(params):
            # One native pass per group (Note [fused updates]); params whose momentum buffer
            # does not exist yet take their first step (b = g) in a pass of their own.
            fresh, running = [], []
            for p in params:
                (running if momentum != 0 and self.state[p].get("momentum_buffer") is not None else fresh).append(p)
            for batch, first in ((fresh, True), (running, False)):
                if not batch:
                    continue
                bufs = []
                if momentum != 0:
                    for p in batch:
                        state = self.state[p]
                        if first:
                            state["momentum_buffer"] = ember.empty_like(p)
                        bufs.append(state["momentum_buffer"])
                ember._fused_sgd_(batch, [p.grad for p in batch], bufs, weight_decay=weight_decay, momentum=momentum,
                                  lr=lr, dampening=dampening, nesterov=nesterov, maximize=maximize,
                                  is_first_step=first)
                if not group["fused"]:
                    # The version bumps of PyTorch's foreach / for-loop step (its fused kernel bumps none):
                    # p.add_, and a running buffer's mul_ then add_ (a first buffer is a fresh clone).
                    ember._C._bump_versions(batch, () if first else bufs, () if first else bufs)
            return
        for p in params:
            update = _effective_grad(p, p.grad, maximize, weight_decay)
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = update.detach().clone()
                    state["momentum_buffer"] = buf
                else:
                    buf.mul_(momentum).add_(update, alpha=1 - dampening)
                update = buf.mul(momentum).add_(update) if nesterov else buf
            p.add_(update, alpha=-lr)

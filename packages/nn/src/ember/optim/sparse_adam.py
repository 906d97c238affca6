"""SparseAdam: Adam for sparse gradients (``nn.Embedding(sparse=True)``), updating only the
rows a step's gradient touches."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import ember
from ember import Tensor

from .optimizer import (
    Optimizer,
    _check_betas,
    _check_lr,
    _no_grad_step,
    _run_closure,
    _scalar,
)

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """Implements the lazy Adam variant for sparse gradients, as ``torch.optim.SparseAdam``.

    The moments are dense, but each step reads and writes them only at the positions the
    (coalesced) gradient stores, and moves only those parameter elements: the bias-corrected
    Adam step of the touched rows.

    Example:
        >>> emb = ember.nn.Embedding(10, 3, sparse=True)
        >>> opt = SparseAdam(emb.parameters(), lr=0.01)
        >>> emb(ember.tensor([1, 2])).sum().backward()
        >>> opt.step()
    """

    _complex_as_real = False

    def __init__(self, params: Iterable[Any], lr: float | Tensor = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, maximize: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        _check_betas(betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "maximize": maximize}
        super().__init__(params, defaults)
        sparse_params = []
        complex_params = []
        for index, group in enumerate(self.param_groups):
            for d_index, p in enumerate(group["params"]):
                if p.layout is not ember.strided:
                    sparse_params.append([index, d_index])
                if p.is_complex():
                    complex_params.append([index, d_index])
        if sparse_params:
            raise ValueError(f"Sparse params at indices {sparse_params}: SparseAdam requires dense parameter tensors")
        if complex_params:
            raise ValueError(f"Complex params at indices {complex_params}: SparseAdam does not support complex "
                             f"parameters")

    @_no_grad_step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Performs one optimization step; ``closure`` re-evaluates the model and returns the loss."""
        loss = _run_closure(closure)
        for group in self.param_groups:
            lr = _scalar(group["lr"])
            beta1, beta2 = group["betas"]
            eps, maximize = group["eps"], group["maximize"]
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if grad.layout is not ember.sparse_coo:
                    raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
                state = self.state[p]
                if len(state) == 0:
                    # PyTorch's SparseAdam counts steps in a Python int (its other optimizers use a tensor)
                    state["step"] = 0
                    state["exp_avg"] = ember.zeros_like(p)
                    state["exp_avg_sq"] = ember.zeros_like(p)
                state["step"] += 1
                step = state["step"]
                _sparse_adam_update(p, grad, state["exp_avg"], state["exp_avg_sq"], step, lr, beta1, beta2, eps,
                                    maximize)
        return loss


def _sparse_adam_update(p, grad, exp_avg, exp_avg_sq, step, lr, beta1, beta2, eps, maximize) -> None:
    grad = grad.coalesce()
    if maximize:
        grad = -grad
    indices, values = grad._indices(), grad._values()
    size = tuple(grad.shape)

    def at_pattern(update: Tensor) -> Tensor:
        return ember.sparse_coo_tensor(indices, update, size, is_coalesced=True)

    # The moments move towards g only where g is stored: m += (1 - b1) (g - m) there.
    old_avg = exp_avg.sparse_mask(grad)._values()
    avg_update = (values - old_avg) * (1 - beta1)
    exp_avg.add_(at_pattern(avg_update))
    old_avg_sq = exp_avg_sq.sparse_mask(grad)._values()
    avg_sq_update = (values * values - old_avg_sq) * (1 - beta2)
    exp_avg_sq.add_(at_pattern(avg_sq_update))
    numer = avg_update + old_avg
    denom = (avg_sq_update + old_avg_sq).sqrt() + eps
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    step_size = lr * math.sqrt(bias_correction2) / bias_correction1
    p.add_(at_pattern(numer / denom * -step_size))

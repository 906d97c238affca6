"""``gradcheck`` and ``gradgradcheck``: analytical gradients against finite differences.

The numerical Jacobian uses central differences, perturbing one input element at a time
in place; the analytical one runs one backward per output element. Both are compared with
``|analytical - numerical| <= atol + rtol * |numerical|``, in float64 for real checks (a
lower precision input gets a warning, as in PyTorch).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence

import numpy as np

import ember
from ember._src.tensor import Tensor

from ._engine import grad as _grad

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck/gradgradcheck when a check fails (``raise_exception=True``)."""


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _differentiable_outputs(outputs) -> list:
    return [o for o in outputs if isinstance(o, Tensor) and o.dtype.is_floating_point]


def _check_inputs(inputs: tuple) -> list[int]:
    wanted = []
    for i, t in enumerate(inputs):
        if isinstance(t, Tensor) and t.requires_grad:
            if t.dtype is not ember.float64:
                warnings.warn(
                    f"Input #{i} requires gradient and is not a double precision floating point. "
                    "This check will likely fail if all the inputs are not of double precision floating point. ",
                    stacklevel=3,
                )
            wanted.append(i)
    if not wanted:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, "
            "but none of the them have requires_grad=True."
        )
    return wanted


def _evaluate(func: Callable, inputs: tuple) -> list[np.ndarray]:
    # Grad mode stays on: gradgradcheck's function differentiates inside.
    outputs = _as_tuple(func(*inputs))
    return [o.detach().numpy().astype(np.float64, copy=True) for o in outputs if isinstance(o, Tensor)]


def _numerical_jacobians(func, inputs: tuple, wanted: list[int], eps: float) -> list[list[np.ndarray]]:
    """jacobians[i][k]: (numel of input i, numel of output k), by central differences."""
    result = []
    for i in wanted:
        x = inputs[i]
        data = x.detach().numpy()  # writes go to x's memory
        columns = None
        for index in np.ndindex(*data.shape):
            original = data[index].item()
            data[index] = original + eps
            plus = _evaluate(func, inputs)
            data[index] = original - eps
            minus = _evaluate(func, inputs)
            data[index] = original
            if columns is None:
                columns = [np.zeros((x.numel(), p.size)) for p in plus]
            row = np.ravel_multi_index(index, data.shape) if data.shape else 0
            for k, (p, m) in enumerate(zip(plus, minus)):
                columns[k][row] = ((p - m) / (2 * eps)).reshape(-1)
        if columns is None:  # empty input: no rows
            columns = [np.zeros((0, p.size)) for p in _evaluate(func, inputs)]
        result.append(columns)
    return result


def _analytical_jacobians(outputs: list, inputs: tuple, wanted: list[int]) -> list[list[np.ndarray]]:
    """jacobians[i][k] from one backward per element of each output that requires grad."""
    diff_inputs = [inputs[i] for i in wanted]
    result = [[None] * len(outputs) for _ in wanted]
    for k, out in enumerate(outputs):
        n_out = out.numel()
        for j in range(len(wanted)):
            result[j][k] = np.zeros((diff_inputs[j].numel(), n_out))
        if not out.requires_grad:
            continue
        for m in range(n_out):
            seed = np.zeros(n_out)
            seed[m] = 1.0
            grad_output = ember.tensor(seed.reshape(out.shape), dtype=out.dtype)
            grads = _grad(out, diff_inputs, grad_output, retain_graph=True, allow_unused=True)
            for j, g in enumerate(grads):
                if g is not None:
                    if tuple(g.shape) != tuple(diff_inputs[j].shape):
                        raise GradcheckError(
                            f"Gradient for input {wanted[j]} has shape {tuple(g.shape)}, "
                            f"expected {tuple(diff_inputs[j].shape)}"
                        )
                    result[j][k][:, m] = g.detach().numpy().reshape(-1)
    return result


def _fail(message: str, raise_exception: bool) -> bool:
    if raise_exception:
        raise GradcheckError(message)
    return False


def gradcheck(
    func: Callable,
    inputs,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked=None,
) -> bool:
    """Checks the gradients of ``func`` at ``inputs`` against finite differences.

    Args:
        func: a function of tensors returning a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of arguments; those with ``requires_grad`` are checked.
        eps, atol, rtol: the finite-difference step and the comparison tolerances.
        raise_exception: raise ``GradcheckError`` on failure (else return False).
        nondet_tol: how far two backward runs on the same input may differ.

    Returns:
        True when every Jacobian matches. The remaining flags are accepted for PyTorch
        compatibility; the batched, forward-mode and undefined-grad checks are not run.

    Example:
        >>> x = ember.randn(3, dtype=ember.float64, requires_grad=True)
        >>> gradcheck(ember.sin, (x,))
        True
    """
    inputs = _as_tuple(inputs)
    wanted = _check_inputs(inputs)
    if not check_backward_ad:
        return True
    outputs = _differentiable_outputs(_as_tuple(func(*inputs)))
    numerical = _numerical_jacobians(func, inputs, wanted, eps)
    float_positions = [
        k for k, o in enumerate(o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor))
        if o.dtype.is_floating_point
    ]
    # Numerical Jacobians are per tensor output; keep the floating ones, aligned with ``outputs``.
    numerical = [[cols[k] for k in float_positions] for cols in numerical]
    for k, out in enumerate(outputs):
        if not out.requires_grad:
            for j, i in enumerate(wanted):
                if not np.allclose(numerical[j][k], 0.0, rtol, atol):
                    return _fail(
                        f"Numerical gradient for function expected to be zero: output {k} does not "
                        f"require grad but its numerical gradient with respect to input {i} is not zero",
                        raise_exception,
                    )
    analytical = _analytical_jacobians(outputs, inputs, wanted)
    for j, i in enumerate(wanted):
        for k in range(len(outputs)):
            a, n = analytical[j][k], numerical[j][k]
            if not np.allclose(a, n, rtol, atol, equal_nan=True):
                return _fail(
                    f"Jacobian mismatch for output {k} with respect to input {i},\n"
                    f"numerical:{ember.tensor(n)}\nanalytical:{ember.tensor(a)}\n",
                    raise_exception,
                )
    again = _analytical_jacobians(outputs, inputs, wanted)
    for j in range(len(wanted)):
        for k in range(len(outputs)):
            if np.abs(again[j][k] - analytical[j][k]).max(initial=0.0) > nondet_tol:
                return _fail(
                    "Backward is not reentrant, i.e., running backward with same input and grad_output "
                    "multiple times gives different values, although analytical gradient matches "
                    f"numerical gradient. The tolerance for nondeterminism was {nondet_tol}.",
                    raise_exception,
                )
    return True


def gradgradcheck(
    func: Callable,
    inputs,
    grad_outputs: Sequence | None = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
) -> bool:
    """Checks second derivatives: gradcheck of the map (inputs, grad_outputs) -> gradients.

    ``grad_outputs`` default to random tensors (requiring grad) shaped like the outputs.
    """
    inputs = _as_tuple(inputs)
    wanted = _check_inputs(inputs)
    if not check_rev_over_rev:
        return True
    outputs = _differentiable_outputs(_as_tuple(func(*inputs)))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = []
        for o in outputs:
            g = ember.tensor(rng.uniform(-1.0, 1.0, tuple(o.shape)), dtype=o.dtype)
            if gen_non_contig_grad_outputs and o.ndim > 0:
                g = ember.stack([g, g], -1).select(-1, 0)
            grad_outputs.append(g.requires_grad_(True))
    grad_outputs = list(_as_tuple(grad_outputs))
    n_inputs = len(inputs)

    def first_derivatives(*args):
        primal, seeds = args[:n_inputs], args[n_inputs:]
        outs = _differentiable_outputs(_as_tuple(func(*primal)))
        pairs = [(o, s) for o, s in zip(outs, seeds) if o.requires_grad]
        diff = [primal[i] for i in wanted]
        grads = _grad([o for o, _ in pairs], diff, [s for _, s in pairs], create_graph=True, allow_unused=True)
        return tuple(g if g is not None else ember.zeros(d.shape, dtype=d.dtype) for g, d in zip(grads, diff))

    return gradcheck(
        first_derivatives,
        tuple(inputs) + tuple(grad_outputs),
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
    )


class _CallableModule(type(sys.modules[__name__])):
    """Importing ``ember.autograd.gradcheck`` binds the module over the function of the same
    name on the package; calling the module calls the function, so both spellings work."""

    def __call__(self, *args, **kwargs):
        return gradcheck(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

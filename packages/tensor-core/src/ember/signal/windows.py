"""``ember.signal.windows``: window functions, as ``torch.signal.windows`` (SciPy's definitions).

Each takes the length ``M`` and ``sym`` (True: symmetric, for filter design; False: periodic, for
spectral analysis, the first M points of the symmetric window of length M + 1), and the usual
``dtype`` (float32/float64), ``layout``, ``device`` and ``requires_grad``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import ember

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _checks(name: str, M: int, dtype, layout):
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not ember.strided:
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (ember.float32, ember.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")


def _prologue(name, M, dtype, layout, device, requires_grad):
    """(dtype, early result): the checks, then the empty and one-point windows."""
    dtype = ember.get_default_dtype() if dtype is None else dtype
    _checks(name, M, dtype, layout)
    if M == 0:
        return dtype, ember.empty((0,), dtype=dtype, device=device, requires_grad=requires_grad)
    if M == 1:
        return dtype, ember.ones((1,), dtype=dtype, device=device, requires_grad=requires_grad)
    return dtype, None


def _ramp(start: float, step: float, M: int, dtype, device):
    """start, start + step, ..., start + (M - 1) step, computed in float64 then cast."""
    k = ember.linspace(start, start + (M - 1) * step, M, dtype=ember.float64, device=device)
    return k, dtype


def _finish(values, dtype, requires_grad):
    out = values.to(dtype)
    return out.requires_grad_() if requires_grad else out


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True, dtype=None,
                layout=ember.strided, device=None, requires_grad: bool = False):
    """exp(-|n - center| / tau)."""
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    dtype, early = _prologue("exponential", M, dtype, layout, device, requires_grad)
    if early is not None:
        return early
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    k, _ = _ramp(-center / tau, 1.0 / tau, M, dtype, device)
    return _finish(ember.exp(-ember.abs(k)), dtype, requires_grad)


def cosine(M: int, *, sym: bool = True, dtype=None, layout=ember.strided, device=None, requires_grad: bool = False):
    """sin(pi (n + 1/2) / M) (M + 1 for the periodic window)."""
    dtype, early = _prologue("cosine", M, dtype, layout, device, requires_grad)
    if early is not None:
        return early
    step = math.pi / (M + 1 if not sym else M)
    k, _ = _ramp(0.5 * step, step, M, dtype, device)
    return _finish(ember.sin(k), dtype, requires_grad)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None, layout=ember.strided, device=None,
             requires_grad: bool = False):
    """exp(-(n - (M - 1) / 2)^2 / (2 std^2))."""
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    dtype, early = _prologue("gaussian", M, dtype, layout, device, requires_grad)
    if early is not None:
        return early
    start = -(M if not sym else M - 1) / 2.0
    scale = 1.0 / (std * math.sqrt(2))
    k, _ = _ramp(start * scale, scale, M, dtype, device)
    return _finish(ember.exp(-k * k), dtype, requires_grad)


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None, layout=ember.strided, device=None,
           requires_grad: bool = False):
    """I0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / I0(beta)."""
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    dtype, early = _prologue("kaiser", M, dtype, layout, device, requires_grad)
    if early is not None:
        return early
    step = 2.0 * beta / (M if not sym else M - 1)
    end = min(beta, -beta + (M - 1) * step)
    k = ember.linspace(-beta, end, M, dtype=ember.float64, device=device)
    b = ember.tensor(float(beta), dtype=ember.float64, device=device)
    return _finish(ember.i0(ember.sqrt((b * b - k * k).clamp(min=0))) / ember.i0(b), dtype, requires_grad)


def bartlett(M: int, *, sym: bool = True, dtype=None, layout=ember.strided, device=None,
             requires_grad: bool = False):
    """The triangular window 1 - |2n / (M - 1) - 1|."""
    dtype, early = _prologue("bartlett", M, dtype, layout, device, requires_grad)
    if early is not None:
        return early
    k, _ = _ramp(-1.0, 2.0 / (M if not sym else M - 1), M, dtype, device)
    return _finish(1 - ember.abs(k), dtype, requires_grad)


def general_cosine(M, *, a: Iterable, sym: bool = True, dtype=None, layout=ember.strided, device=None,
                   requires_grad: bool = False):
    """sum_i (-1)^i a_i cos(2 pi i n / (M - 1))."""
    if a is None:
        raise TypeError("Coefficients are required")
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    a = list(a)
    if not a:
        raise ValueError("Coefficients cannot be empty")
    dtype, early = _prologue("general_cosine", M, dtype, layout, device, requires_grad)
    if early is not None:
        return early
    k, _ = _ramp(0.0, 2 * math.pi / (M if not sym else M - 1), M, dtype, device)
    total = ember.zeros(M, dtype=ember.float64, device=device)
    for i, coef in enumerate(a):
        total = total + ((-1) ** i) * coef * ember.cos(i * k)
    return _finish(total, dtype, requires_grad)


def general_hamming(M, *, alpha: float = 0.54, sym: bool = True, dtype=None, layout=ember.strided, device=None,
                    requires_grad: bool = False):
    """alpha - (1 - alpha) cos(2 pi n / (M - 1))."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def hamming(M: int, *, sym: bool = True, dtype=None, layout=ember.strided, device=None, requires_grad: bool = False):
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def hann(M: int, *, sym: bool = True, dtype=None, layout=ember.strided, device=None, requires_grad: bool = False):
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype=None, layout=ember.strided, device=None, requires_grad: bool = False):
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def nuttall(M: int, *, sym: bool = True, dtype=None, layout=ember.strided, device=None, requires_grad: bool = False):
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)

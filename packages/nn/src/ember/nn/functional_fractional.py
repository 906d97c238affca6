"""Fractional max pooling (Graham, 2014): ``F.fractional_max_pool2d/3d`` and their
``_with_indices`` forms, composed from tensor ops (one gather over every window, a max over it)
so that autograd routes the gradient to each window's maximum.

Window starts follow PyTorch's pseudo-random sequence, so the same ``_random_samples`` give
the same result: for one dim of input size n, output size m and kernel k, with
alpha = (n - k) / (m - 1) and sample u in [0, 1), start_i = floor((i + u) alpha) - floor(u alpha)
for i < m - 1 and start_{m-1} = n - k (computed in double, as PyTorch's CPU kernel). Sample
column j of a plane drives dim j of (T,) H, W in the order PyTorch uses: W then H for 2-d,
T, H, W for 3-d.
"""

from __future__ import annotations

import ember
from ember import Tensor


def _tuple(v, n: int, what: str):
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            raise ValueError(f"{what} must be an int or a tuple of {n} ints")
        return tuple(v)
    return (v,) * n


def _starts(sample: Tensor, n: int, m: int, k: int) -> Tensor:
    """(planes, m) window starts for one dim from (planes,) samples."""
    u = sample.to(ember.float64).unsqueeze(1)
    if m == 1:
        return ember.full((sample.shape[0], 1), n - k, dtype=ember.int64)
    alpha = (n - k) / (m - 1)
    i = ember.arange(m - 1, dtype=ember.float64).unsqueeze(0)
    body = ((i + u) * alpha).floor().long() - (u * alpha).floor().long()
    return ember.cat([body, ember.full((sample.shape[0], 1), n - k, dtype=ember.int64)], 1)


def _fractional(input: Tensor, nd: int, kernel_size, output_size, output_ratio, samples, name: str):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: {list(input.shape)}")
    batched = input.ndim == nd + 2
    x = input if batched else input.unsqueeze(0)
    spatial = tuple(x.shape[2:])
    kernel = _tuple(kernel_size, nd, "kernel_size")
    if output_size is None:
        ratio = _tuple(output_ratio, nd, "output_ratio")
        output_size = tuple(int(s * r) for s, r in zip(spatial, ratio))
    out = _tuple(output_size, nd, "output_size")
    for s, k, o, dim_name in zip(spatial, kernel, out, ("time", "height", "width")[3 - nd:]):
        if k <= 0 or o <= 0:
            raise RuntimeError(f"{name}(): kernel_size and output_size must be greater than zero")
        if o + k - 1 > s:
            raise RuntimeError(f"{name}(): pool {dim_name} {k} too large relative to input {dim_name} {s}")
    N, C = x.shape[:2]
    planes = N * C
    if samples is None:
        samples = ember.rand(N, C, nd, dtype=x.dtype, device=x.device)
    if tuple(samples.shape) != (N, C, nd):
        raise RuntimeError(f"{name}(): expected _random_samples of shape {[N, C, nd]}, got {list(samples.shape)}")
    flat_samples = samples.reshape(planes, nd)
    # PyTorch's sample columns: (W, H) for 2-d, (T, H, W) for 3-d.
    columns = (1, 0) if nd == 2 else (0, 1, 2)
    strides = [1] * nd
    for d in range(nd - 2, -1, -1):
        strides[d] = strides[d + 1] * spatial[d + 1]
    index = ember.zeros((planes,) + (1,) * (2 * nd), dtype=ember.int64)
    for d in range(nd):
        start = _starts(flat_samples[:, columns[d]], spatial[d], out[d], kernel[d])  # (planes, o_d)
        pos = start.unsqueeze(2) + ember.arange(kernel[d]).unsqueeze(0).unsqueeze(0)  # (planes, o_d, k_d)
        shape = [planes] + [1] * (2 * nd)
        shape[1 + d], shape[1 + nd + d] = out[d], kernel[d]
        index = index + (pos * strides[d]).reshape(shape)
    full = (planes,) + out + kernel
    index = index.expand(full).reshape(planes, -1)
    values = x.reshape(planes, -1).gather(1, index).reshape((planes,) + out + (-1,))
    result, arg = values.max(-1)
    indices = index.reshape((planes,) + out + (-1,)).gather(-1, arg.unsqueeze(-1)).squeeze(-1)
    result = result.reshape((N, C) + out)
    indices = indices.reshape((N, C) + out)
    if not batched:
        result, indices = result.squeeze(0), indices.squeeze(0)
    return result, indices


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples=None):
    return _fractional(input, 2, kernel_size, output_size, output_ratio, _random_samples, "fractional_max_pool2d")


def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples=None):
    out, indices = fractional_max_pool2d_with_indices(input, kernel_size, output_size, output_ratio, False,
                                                      _random_samples)
    return (out, indices) if return_indices else out


def fractional_max_pool3d_with_indices(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples=None):
    return _fractional(input, 3, kernel_size, output_size, output_ratio, _random_samples, "fractional_max_pool3d")


def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples=None):
    out, indices = fractional_max_pool3d_with_indices(input, kernel_size, output_size, output_ratio, False,
                                                      _random_samples)
    return (out, indices) if return_indices else out

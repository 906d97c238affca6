"""Spatial transformers: ``affine_grid`` and ``grid_sample`` (2-d and 3-d), composed from core ops.

Every step is a differentiable core op (linspace/matmul for the grid; floor, clamp, fmod, gather and
where for the sampling), so gradients w.r.t. both ``input`` and ``grid`` come from their formulas.
Coordinate handling follows PyTorch's GridSampler.h (unnormalize, clip, reflect).
"""

from __future__ import annotations

import warnings

import ember
from ember import Tensor
from ember._src.autocast import composite as _autocast_composite
from ember._src.ops._common import type_name

__all__ = ["affine_grid", "grid_sample"]

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                  "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                  "grid_sample for details.")


def _linspace_from_neg_one(theta: Tensor, steps: int, align_corners: bool) -> Tensor:
    if steps <= 1:
        return ember.zeros(1, dtype=theta.dtype, device=theta.device)
    r = ember.linspace(-1, 1, steps, dtype=theta.dtype, device=theta.device)
    # Without align_corners the extreme points are pixel centres, not edges.
    return r if align_corners else r * (steps - 1) / steps


def affine_grid(theta: Tensor, size: list[int], align_corners: bool | None = None) -> Tensor:
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    given, size = size, list(size)
    if len(size) == 4:
        if theta.dim() != 3 or theta.shape[-2] != 2 or theta.shape[-1] != 3:
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size {given}. "
                             f"Got {theta.shape}.")
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.dim() != 3 or theta.shape[-2] != 3 or theta.shape[-1] != 4:
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size {given}. "
                             f"Got {theta.shape}.")
        spatial = size[-3:]
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
                      "of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    n = size[0]
    if theta.shape[0] != n:
        # PyTorch's text is its batched matmul's (the base grid [N, H*W, k+1] times theta transposed)
        width = len(spatial) + 1
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{n}, {width}] but got: "
                           f"[{theta.shape[0]}, {width}].")
    k = len(spatial)
    # Base grid (*spatial, k + 1): x varies along the last spatial dim, then y, then z; last entry 1.
    axes = []
    for i in range(k):
        steps = spatial[k - 1 - i]
        view = [1] * k
        view[k - 1 - i] = steps if steps > 1 else 1
        axes.append(_linspace_from_neg_one(theta, steps, align_corners).reshape(view).expand(*spatial))
    axes.append(ember.ones(spatial, dtype=theta.dtype, device=theta.device))
    base = ember.stack(axes, -1).reshape(1, -1, k + 1)
    grid = ember.matmul(base, theta.transpose(1, 2))
    return grid.reshape(n, *spatial, k)


def _check_sample(input: Tensor, grid: Tensor, mode: str, padding_mode: str) -> None:
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    for name, t in (("input", input), ("grid", grid)):
        if not isinstance(t, Tensor):
            raise TypeError(f"grid_sampler(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if input.device != grid.device:
        raise RuntimeError(f"grid_sampler(): expected input and grid to be on same device, but input is on "
                           f"{input.device} and grid is on {grid.device}")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but input has "
                           f"{input.dtype} and grid has {grid.dtype}")
    if input.ndim == 0 or grid.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != input.ndim - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.ndim - 2} in last dimension, but "
                           f"got grid with sizes {list(grid.shape)}")
    for i in range(2, input.ndim):
        if input.shape[i] <= 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input "
                               f"has sizes {list(input.shape)} with dimension {i} being empty")
    if input.ndim not in (4, 5) or input.ndim != grid.ndim:
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, "
                           f"but got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if mode == "bicubic" and input.ndim != 4:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.is_floating_point():
        kernel = f"grid_sampler_{input.ndim - 2}d_cpu_kernel_impl"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(input.dtype)}'")


def _reflect(x: Tensor, twice_low: int, twice_high: int) -> Tensor:
    if twice_low == twice_high:
        return ember.zeros_like(x)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = (x - low).abs()
    extra = ember.fmod(x, span)
    flips = ember.floor(x / span)
    return ember.where(ember.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _source_index(coord: Tensor, size: int, padding_mode: str, align_corners: bool, clip: bool = True) -> Tensor:
    """Grid coordinate in [-1, 1] -> pixel coordinate, with border/reflection applied (GridSampler.h)."""
    if align_corners:
        x = (coord + 1) / 2 * (size - 1)
    else:
        x = ((coord + 1) * size - 1) / 2
    return _pad_coordinate(x, size, padding_mode, align_corners) if clip else x


def _pad_coordinate(x: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """Border: clip into the image; reflection: mirror at the edges (or pixel edges), then clip."""
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
    if padding_mode in ("border", "reflection"):
        x = ember.clamp(x, 0, size - 1)
    return x


class _Taps:
    """Reads input values at integer pixel positions of every grid point; out-of-range reads give 0."""

    def __init__(self, input: Tensor, sizes: list, padding_mode: str, align_corners: bool) -> None:
        n, c = input.shape[:2]
        self.flat = input.reshape(n, c, -1)
        self.sizes = sizes  # (W, H[, D]): the order of the grid's last dim
        self.padding_mode, self.align_corners = padding_mode, align_corners
        strides, acc = [], 1
        for s in sizes:
            strides.append(acc)
            acc *= s
        self.strides = strides

    def read(self, positions: list, weight: Tensor | None = None) -> Tensor:
        """``weight * input`` at ``positions`` (per-axis float tensors (N, P) of whole numbers).

        As PyTorch, a tap outside the image adds nothing, even with a NaN or inf weight.
        """
        n, c = self.flat.shape[:2]
        inside = None
        linear = None
        for pos, size, stride in zip(positions, self.sizes, self.strides):
            ok = (pos >= 0) & (pos <= size - 1)  # False for NaN too
            inside = ok if inside is None else inside & ok
            # Masked positions read pixel 0: never cast a NaN or huge coordinate to an integer.
            idx = ember.where(ok, pos, 0).to(ember.int64) * stride
            linear = idx if linear is None else linear + idx
        p = linear.shape[1]
        vals = self.flat.gather(2, linear.unsqueeze(1).expand(n, c, p))
        if weight is not None:
            vals = vals * weight.unsqueeze(1)
        return ember.where(inside.unsqueeze(1), vals, ember.zeros((), dtype=vals.dtype, device=vals.device))


def _cubic_coefficients(t: Tensor) -> list:
    # Cubic convolution (Keys) with A = -0.75, as PyTorch's get_cubic_upsample_coefficients.
    a = -0.75

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _bicubic(taps: _Taps, coords: list) -> Tensor:
    ix, iy = coords
    x0, y0 = ember.floor(ix), ember.floor(iy)
    wx, wy = _cubic_coefficients(ix - x0), _cubic_coefficients(iy - y0)
    out = None
    w_, h_ = taps.sizes
    for j in range(4):
        row = None
        for i in range(4):
            # Each tap applies the padding mode itself (GridSampler.h get_value_bounded).
            px = x0 + (i - 1)
            py = y0 + (j - 1)
            px = _pad_coordinate(px, w_, taps.padding_mode, taps.align_corners)
            py = _pad_coordinate(py, h_, taps.padding_mode, taps.align_corners)
            term = taps.read([px, py], wx[i])
            row = term if row is None else row + term
        term = row * wy[j].unsqueeze(1)
        out = term if out is None else out + term
    return out


@_autocast_composite("fp32")
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    _check_sample(input, grid, mode, padding_mode)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    n, c = input.shape[:2]
    k = input.ndim - 2
    dtype = input.dtype
    if dtype in (ember.float16, ember.bfloat16):  # sampled in float32, rounded once at the end (as PyTorch)
        input, grid = input.float(), grid.float()
    out_spatial = tuple(grid.shape[1:-1])
    sizes = list(reversed(input.shape[2:]))  # grid's last dim is (x, y[, z]) = (W, H[, D])
    taps = _Taps(input, sizes, padding_mode, align_corners)
    g = grid.reshape(n, -1, k)
    coords = [_source_index(g[..., i], sizes[i], padding_mode, align_corners, clip=mode != "bicubic")
              for i in range(k)]
    if mode == "nearest":
        out = taps.read([ember.round(x) for x in coords])
        if grid.requires_grad:
            # PyTorch gives the grid a zero gradient here, not none: join it through a branch never taken.
            zero = ember.zeros((), dtype=out.dtype, device=out.device)
            out = out + ember.where(ember.zeros((), dtype=ember.bool, device=out.device), g.sum(), zero)
    elif mode == "bicubic":
        out = _bicubic(taps, coords)
    else:
        lows = [ember.floor(x) for x in coords]
        out = None
        for corner in range(1 << k):
            weight = None
            positions = []
            for i in range(k):
                upper = (corner >> i) & 1
                pos = lows[i] + upper
                # The weight of a corner is the distance to the opposite corner, per axis.
                w = coords[i] - lows[i] if upper else lows[i] + 1 - coords[i]
                weight = w if weight is None else weight * w
                positions.append(pos)
            term = taps.read(positions, weight)
            out = term if out is None else out + term
        if padding_mode == "zeros":
            # PyTorch's kernel multiplies NaN weights into the out-of-image taps: a NaN or infinite
            # grid coordinate gives NaN, not the 0 of an ordinary point outside the image.
            finite = ember.isfinite(g).all(-1)
            out = ember.where(finite.unsqueeze(1), out, ember.full((), float("nan"), dtype=out.dtype))
    return out.reshape(n, c, *out_spatial).to(dtype)

"""Top-level names PyTorch exposes for nn kernels with ATen's integer-coded arguments
(``torch.grid_sampler``, ``torch.affine_grid_generator``, ``torch.max_pool3d``,
``torch.ctc_loss``). They live in ember-nn, above the core, and ``ember.<name>`` finds them
through the core's optional-package lookup (ember/__init__.py)."""

from __future__ import annotations

from ember import Tensor

from . import functional as F

_INTERPOLATION = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDING = {0: "zeros", 1: "border", 2: "reflection"}
_REDUCTION = {0: "none", 1: "mean", 2: "sum"}


def _code(table: dict, value, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value not in table:
        raise RuntimeError(f"{what}: unknown code {value!r} (expected one of {sorted(table)})")
    return table[value]


def grid_sampler(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                 align_corners: bool) -> Tensor:
    return F.grid_sample(input, grid, _code(_INTERPOLATION, interpolation_mode, "grid_sampler"),
                         _code(_PADDING, padding_mode, "grid_sampler"), bool(align_corners))


def grid_sampler_2d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    if input.ndim != 4:
        raise RuntimeError(f"grid_sampler(): expected 4D input and grid with same number of dimensions, but got "
                           f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    if input.ndim != 5:
        raise RuntimeError(f"grid_sampler(): expected 5D input and grid with same number of dimensions, but got "
                           f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if interpolation_mode == 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def affine_grid_generator(theta: Tensor, size, align_corners: bool) -> Tensor:
    return F.affine_grid(theta, list(size), bool(align_corners))


def max_pool3d(input: Tensor, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False) -> Tensor:
    return F.max_pool3d(input, kernel_size, stride if stride not in ((), []) else None, padding, dilation,
                        ceil_mode)


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: int = 1, zero_infinity: bool = False) -> Tensor:
    if isinstance(reduction, bool) or not isinstance(reduction, int) or reduction not in _REDUCTION:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _REDUCTION[reduction],
                      zero_infinity)


NAMES = ("grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator", "max_pool3d", "ctc_loss")

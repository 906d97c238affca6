"""Top-level names PyTorch exposes for nn kernels with ATen's integer-coded arguments
(``torch.grid_sampler``, ``torch.affine_grid_generator``, ``torch.max_pool3d``,
``torch.ctc_loss``, ``torch.embedding_bag``). They live in ember-nn, above the core, and ``ember.<name>`` finds them
through the core's optional-package lookup (ember/__init__.py)."""

from __future__ import annotations

import ember
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


_BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


def embedding_bag(weight: Tensor, indices: Tensor, offsets: Tensor, scale_grad_by_freq: bool = False, mode: int = 0,
                  sparse: bool = False, per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None):
    """ATen's form of ``F.embedding_bag``: ``(output, offset2bag, bag_size, max_indices)``. The output is
    F.embedding_bag's (and its gradient); the other three are what PyTorch's CPU kernel returns beside it
    (its backward's bookkeeping): the bag of each index (left empty by the sum mode's fast path, i.e. sum
    without padding_idx), each bag's count of non-padding indices (zeros for sum), and for max the index
    into ``weight`` that won each (bag, column) (mean: the counts again; sum: zeros); empty bags give 0.
    Checked against PyTorch 2.13's CPU kernel (tests/test_api_surface_s20.py)."""
    if isinstance(mode, bool) or not isinstance(mode, int):
        raise TypeError(f"embedding_bag(): argument 'mode' (position 5) must be int, not {type(mode).__name__}")
    if mode not in _BAG_MODES:
        raise RuntimeError("`mode` must be sum, mean, or max.")
    name = _BAG_MODES[mode]
    output = F.embedding_bag(indices, weight, offsets, None, 2, scale_grad_by_freq, name, sparse, per_sample_weights,
                             include_last_offset, padding_idx)
    recorded = ember.is_grad_enabled() and any(t is not None and t.requires_grad for t in (weight, per_sample_weights))
    with ember.no_grad():
        n, bags, itype = indices.shape[0], output.shape[0], indices.dtype
        starts = ember.zeros(n + 1, dtype=ember.int64).index_add(0, offsets[:bags].long(),
                                                                  ember.ones(bags, dtype=ember.int64))
        bag = starts[:n].cumsum(0) - 1
        keep = ember.ones(n, dtype=ember.bool) if padding_idx is None else indices != padding_idx % weight.shape[0]
        counts = ember.zeros(bags, dtype=ember.int64).index_add(0, bag, keep.long())
        offset2bag = bag.to(itype) if name != "sum" or padding_idx is not None else indices.new_zeros((0,))
        # sum leaves zeros: one per offset (the last one included) when nothing needs a gradient, one per bag
        # when something does (PyTorch's autograd entry); the other modes one count per bag.
        zeros = bags if recorded else offsets.shape[0]
        bag_size = indices.new_zeros((zeros,)) if name == "sum" else counts.to(itype)
        if name == "max":
            # The winning index of each (bag, column): the first kept position holding the bag's maximum.
            rows = weight.detach()[indices.long()]
            pos = ember.arange(n).unsqueeze(1).expand(n, weight.shape[1])
            hit = (rows == output.detach()[bag.clamp_min(0)]) & keep.unsqueeze(1)
            first = ember.full((bags + 1, weight.shape[1]), n, dtype=ember.int64).scatter_reduce(
                0, ember.where(hit, bag.unsqueeze(1), bags).expand(n, weight.shape[1]),
                ember.where(hit, pos, n), "amin")[:bags]
            max_indices = ember.where(first < n, indices.long()[first.clamp_max(max(n - 1, 0))], 0).to(itype)
        else:
            max_indices = bag_size.clone()
    return output, offset2bag, bag_size, max_indices


NAMES = ("grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator", "max_pool3d", "ctc_loss",
         "embedding_bag")

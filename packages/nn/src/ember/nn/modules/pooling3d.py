"""3-d pooling layers: ``MaxPool3d``, ``AvgPool3d``, ``LPPool3d``, adaptive forms and ``MaxUnpool3d``."""

from __future__ import annotations

from ember import Tensor

from .. import functional as F
from ._utils import _triple
from .pooling import (
    _AdaptiveAvgPoolNd,
    _AdaptiveMaxPoolNd,
    _AvgPoolWithDivisor,
    _LPPoolNd,
    _MaxPoolNd,
    _MaxUnpoolNd,
)

__all__ = ["AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "AvgPool3d", "LPPool3d", "MaxPool3d", "MaxUnpool3d"]


class MaxPool3d(_MaxPoolNd):
    """Max over sliding windows of (N, C, D, H, W) or (C, D, H, W) inputs."""

    def forward(self, input: Tensor):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool3d(_AvgPoolWithDivisor):
    """Mean over sliding windows of (N, C, D, H, W) or (C, D, H, W) inputs."""

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class LPPool3d(_LPPoolNd):
    """(sum of x^p over each window)^(1/p) over (N, C, D, H, W) or (C, D, H, W) inputs."""

    def forward(self, input: Tensor) -> Tensor:
        return F.lp_pool3d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Max pooling to a fixed (D, H, W), whatever the input size; ``None`` keeps that input dim."""

    def forward(self, input: Tensor):
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Average pooling to a fixed (D, H, W), whatever the input size; ``None`` keeps that input dim."""

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool3d(input, self.output_size)


class MaxUnpool3d(_MaxUnpoolNd):
    """Partial inverse of ``MaxPool3d``: puts each value back at its index, zeros elsewhere."""

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        self.kernel_size = _triple(kernel_size)
        self.stride = _triple(stride if stride is not None else kernel_size)
        self.padding = _triple(padding)

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding, output_size)

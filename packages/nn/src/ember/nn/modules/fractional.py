"""``nn.FractionalMaxPool2d/3d`` (``F.fractional_max_pool2d/3d``): max pooling over
pseudo-randomly placed windows whose count gives a fractional reduction (an output size or a
ratio of the input size)."""

from __future__ import annotations

from ember import Tensor

from .. import functional_fractional as _frac
from .module import Module

__all__ = ["FractionalMaxPool2d", "FractionalMaxPool3d"]


class _FractionalMaxPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples=None) -> None:
        super().__init__()
        name = type(self).__name__
        self.kernel_size = kernel_size
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = output_size
        self.output_ratio = output_ratio
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if output_ratio is not None:
            ratios = output_ratio if isinstance(output_ratio, (list, tuple)) else (output_ratio,) * self._nd
            if not all(0 < r < 1 for r in ratios):
                raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")
            self.output_ratio = tuple(ratios)

    def forward(self, input: Tensor):
        fn = _frac.fractional_max_pool2d if self._nd == 2 else _frac.fractional_max_pool3d
        return fn(input, self.kernel_size, self.output_size, self.output_ratio, return_indices=self.return_indices,
                  _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    _nd = 3

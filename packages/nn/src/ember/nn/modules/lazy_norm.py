"""Lazy norm layers (``LazyBatchNorm1d/2d/3d``, ``LazyInstanceNorm1d/2d/3d``): ``num_features`` from input.shape[1]."""

from __future__ import annotations

import ember
from ember import Tensor

from ..parameter import UninitializedBuffer, UninitializedParameter
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, _BatchNorm, _NormBase
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, _InstanceNorm
from .lazy import LazyModuleMixin

__all__ = ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d"]


class _LazyNormBase(LazyModuleMixin, _NormBase):
    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        # affine/track_running_stats start False so the base makes no tensors that are about to be replaced.
        super().__init__(0, eps, momentum, False, False, device=device, dtype=dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = ember.tensor(0, dtype=ember.long, device=device)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]
        with ember.no_grad():
            if self.affine:
                self.weight.materialize((self.num_features,))
                if self.bias is not None:
                    self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    """``BatchNorm1d`` whose ``num_features`` is inferred from ``input.size(1)``."""

    cls_to_become = BatchNorm1d
    _check_input_dim = BatchNorm1d._check_input_dim


class LazyBatchNorm2d(_LazyNormBase, _BatchNorm):
    """``BatchNorm2d`` whose ``num_features`` is inferred from ``input.size(1)``."""

    cls_to_become = BatchNorm2d
    _check_input_dim = BatchNorm2d._check_input_dim


class LazyBatchNorm3d(_LazyNormBase, _BatchNorm):
    """``BatchNorm3d`` whose ``num_features`` is inferred from ``input.size(1)``."""

    cls_to_become = BatchNorm3d
    _check_input_dim = BatchNorm3d._check_input_dim


class LazyInstanceNorm1d(_LazyNormBase, _InstanceNorm):
    """``InstanceNorm1d`` whose ``num_features`` is inferred from ``input.size(1)``."""

    cls_to_become = InstanceNorm1d
    _no_batch_dim = InstanceNorm1d._no_batch_dim


class LazyInstanceNorm2d(_LazyNormBase, _InstanceNorm):
    """``InstanceNorm2d`` whose ``num_features`` is inferred from ``input.size(1)``."""

    cls_to_become = InstanceNorm2d
    _no_batch_dim = InstanceNorm2d._no_batch_dim


class LazyInstanceNorm3d(_LazyNormBase, _InstanceNorm):
    """``InstanceNorm3d`` whose ``num_features`` is inferred from ``input.size(1)``."""

    cls_to_become = InstanceNorm3d
    _no_batch_dim = InstanceNorm3d._no_batch_dim

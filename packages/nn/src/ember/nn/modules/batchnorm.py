"""Batch normalization: ``BatchNorm1d/2d/3d``, ``SyncBatchNorm`` and the base they share with
instance norm."""

from __future__ import annotations

import ember
from ember import Tensor
from ember._src import plugins
from ember.autograd import Function

from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"]


class _NormBase(Module):
    """Affine parameters and running statistics (mean, var, num_batches_tracked) of a norm layer."""

    _version = 2  # version 2 added num_batches_tracked
    __constants__ = ["track_running_stats", "momentum", "eps", "num_features", "affine"]

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = Parameter(ember.empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(ember.empty(num_features, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", ember.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ember.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", ember.tensor(0, dtype=ember.long, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        # Checkpoints older than version 2 have no num_batches_tracked: keep ours (or 0) instead of failing.
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                tracked = self.num_batches_tracked
                usable = tracked is not None and tracked.device.type != "meta"
                state_dict[key] = tracked if usable else ember.tensor(0, dtype=ember.long)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            # momentum=None: a cumulative moving average over every batch seen so far.
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        # In eval, batch statistics are used only when there are no running ones.
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_running else None,
                            self.running_var if use_running else None, self.weight, self.bias, bn_training, factor,
                            self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L) inputs, per channel C."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) inputs, per channel C."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch norm over (N, C, D, H, W) inputs, per channel C."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


def _distributed_world(group):
    """ember-distributed's plugin when a process group of more than one process is running, else
    None (ember-nn sits below ember-distributed and reaches it only through its plugin)."""
    found = plugins.load("distributed")
    if found is None or not found.is_available() or not found.is_initialized():
        return None
    return found if found.get_world_size(group) > 1 else None


class _AllReduceSum(Function):
    """The sum over the group's processes; its gradient is the sum of every process's gradient."""

    @staticmethod
    def forward(ctx, tensor, dist, group):
        ctx.dist, ctx.group = dist, group
        total = tensor.clone()
        dist.all_reduce(total, group)
        return total

    @staticmethod
    def backward(ctx, grad):
        total = grad.clone()
        ctx.dist.all_reduce(total, ctx.group)
        return total, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch norm whose statistics cover the whole batch across the processes of ``process_group``
    (in training, when ember.distributed runs more than one process); otherwise ``BatchNorm``."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group=None, device=None, dtype=None, *,
                 bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if input.size(1) == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        dist = _distributed_world(self.process_group) if self.training else None
        if dist is None:
            return super().forward(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        return self._synced_batch_norm(input, dist, factor)

    def _synced_batch_norm(self, input: Tensor, dist, factor: float) -> Tensor:
        channels = input.size(1)
        dims = [0, *range(2, input.dim())]
        x = input if input.dtype in (ember.float32, ember.float64) else input.float()
        count = ember.full((1,), float(input.numel() // channels), dtype=x.dtype, device=x.device)
        # One all-reduce of (sum, sum of squares, count) per channel gives the whole batch's moments.
        total = _AllReduceSum.apply(ember.cat([x.sum(dims), (x * x).sum(dims), count]), dist, self.process_group)
        n = total[2 * channels]
        if float(n.detach()) <= 1 and self.track_running_stats:  # (n carries autograd: no warning)
            raise ValueError("Expected more than 1 value per channel when training, got input size "
                             f"{list(input.shape)}")
        mean = total[:channels] / n
        var = (total[channels:2 * channels] / n - mean * mean).clamp_min(0)
        if self.running_mean is not None and self.track_running_stats:
            with ember.no_grad():
                self.running_mean.mul_(1 - factor).add_(mean.to(self.running_mean.dtype), alpha=factor)
                unbiased = var * (n / (n - 1))
                self.running_var.mul_(1 - factor).add_(unbiased.to(self.running_var.dtype), alpha=factor)
        shape = [1, channels] + [1] * (input.dim() - 2)
        out = (x - mean.view(shape)) * ember.rsqrt(var.view(shape) + self.eps)
        if self.weight is not None:
            out = out * self.weight.view(shape)
        if self.bias is not None:
            out = out + self.bias.view(shape)
        return out.to(input.dtype)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """``module`` with every ``BatchNorm*d`` inside replaced by a ``SyncBatchNorm`` sharing its
        parameters and running statistics."""
        converted = module
        if isinstance(module, _BatchNorm):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group)
            if module.affine:
                with ember.no_grad():
                    converted.weight = module.weight
                    converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
            if hasattr(module, "qconfig"):
                converted.qconfig = module.qconfig
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        del module
        return converted

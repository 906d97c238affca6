"""``ember.distributed.tensor.parallel``: tensor parallelism on DTensors (``parallelize_module``
with ``ColwiseParallel``, ``RowwiseParallel``, ``SequenceParallel``, ``PrepareModuleInput``,
``PrepareModuleOutput``) and ``loss_parallel``."""

from ._api import parallelize_module
from ._loss import loss_parallel
from ._styles import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    PrepareModuleInputOutput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
)

__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleInputOutput",
           "PrepareModuleOutput", "RowwiseParallel",
           "SequenceParallel", "loss_parallel", "parallelize_module"]

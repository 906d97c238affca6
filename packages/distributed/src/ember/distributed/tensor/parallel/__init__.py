"""``ember.distributed.tensor.parallel``: tensor parallelism on DTensors (``parallelize_module``
with ``ColwiseParallel``, ``RowwiseParallel``, ``SequenceParallel``, ``PrepareModuleInput``,
``PrepareModuleOutput``)."""

from ._api import parallelize_module
from ._styles import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
)

__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleOutput", "RowwiseParallel",
           "SequenceParallel", "parallelize_module"]

"""``torch.distributed.tensor.parallel.style``: the parallel styles' module path, the same classes
as ``ember.distributed.tensor.parallel``."""

from ._styles import (  # noqa: F401 - re-exported
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    PrepareModuleInputOutput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
)

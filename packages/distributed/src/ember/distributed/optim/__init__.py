"""``ember.distributed.optim``: ``ZeroRedundancyOptimizer`` (optimizer state sharded over ranks)."""

from ._zero import ZeroRedundancyOptimizer

__all__ = ["ZeroRedundancyOptimizer"]

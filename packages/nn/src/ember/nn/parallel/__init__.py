"""``ember.nn.parallel``: ``DistributedDataParallel`` lives in ember-distributed.

ember-nn sits below ember-distributed and never imports it; the class is found at attribute
access through the core's plugin registry (entry point ``distributed`` of group
``ember.plugins``), so ``ember.nn.parallel.DistributedDataParallel`` works as in PyTorch
whenever ember-distributed is installed.
"""

from ember._src import plugins

__all__ = ["DistributedDataParallel"]


def __getattr__(name: str):
    if name == "DistributedDataParallel":
        found = plugins.load("distributed")
        if found is None:
            raise AttributeError("ember.nn.parallel.DistributedDataParallel needs the 'ember-distributed' package")
        return found.DistributedDataParallel
    raise AttributeError(f"module 'ember.nn.parallel' has no attribute '{name}'")

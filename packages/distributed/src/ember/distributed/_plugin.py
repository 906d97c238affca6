"""The object ember-nn reaches through the ``ember.plugins`` entry point ``distributed``.

``ember.nn.parallel.DistributedDataParallel``, ``nn.SyncBatchNorm``'s all-reduce and
``DistributedSampler``'s default rank and world size come from here: ember-nn sits below this
package and may not import it.
"""

from __future__ import annotations


class DistributedPlugin:
    def install(self) -> None:
        pass

    @staticmethod
    def is_available() -> bool:
        from . import _mpi

        return _mpi.is_available()

    @staticmethod
    def is_initialized() -> bool:
        from ._world import is_initialized

        return is_initialized()

    @staticmethod
    def get_rank(group=None) -> int:
        from ._world import get_rank

        return get_rank(group)

    @staticmethod
    def get_world_size(group=None) -> int:
        from ._world import get_world_size

        return get_world_size(group)

    @staticmethod
    def all_reduce(tensor, group=None) -> None:
        """Sums ``tensor`` in place over ``group`` (nn.SyncBatchNorm's statistics and their gradients)."""
        from ._collectives import all_reduce

        all_reduce(tensor, group=group)

    @property
    def DistributedDataParallel(self):  # noqa: N802 - the class's name
        from ._ddp import DistributedDataParallel

        return DistributedDataParallel


plugin = DistributedPlugin()

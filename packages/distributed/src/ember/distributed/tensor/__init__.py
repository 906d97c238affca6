"""``ember.distributed.tensor``: ``DTensor`` with ``Shard``/``Replicate``/``Partial`` placements,
operators on DTensors by sharding propagation (``_dispatch``, ``_rules``), ``distribute_tensor``
and ``distribute_module``."""

from ._api import distribute_module
from ._dispatch import install as _install
from ._dtensor import DTensor, distribute_tensor
from ._placements import Partial, Placement, Replicate, Shard

_install()

__all__ = ["DTensor", "Partial", "Placement", "Replicate", "Shard", "distribute_module", "distribute_tensor"]

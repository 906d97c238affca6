"""``ember.distributed.tensor``: ``DTensor`` placements and redistribution (see ``_dtensor``)."""

from ._dtensor import DTensor, distribute_tensor
from ._placements import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "Partial", "Placement", "Replicate", "Shard", "distribute_tensor"]

"""``ember.distributed.tensor.placement_types`` (PyTorch's module path for the placements)."""

from ._placements import Partial, Placement, Replicate, Shard

__all__ = ["Partial", "Placement", "Replicate", "Shard"]

"""``ember.distributed.fsdp``: FSDP2's ``fully_shard`` (parameters sharded as DTensors on dim 0)."""

from ._fully_shard import FSDPModule, fully_shard
from ._policy import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy

__all__ = ["CPUOffloadPolicy", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy", "fully_shard"]

"""``torch.distributed._composable.fsdp``: FSDP2's old module path, the same objects as
``ember.distributed.fsdp``."""

from ...fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard  # noqa: F401

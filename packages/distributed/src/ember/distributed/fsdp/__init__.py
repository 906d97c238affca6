"""``ember.distributed.fsdp``: FSDP2's ``fully_shard`` (parameters sharded as DTensors on dim 0) and
FSDP1's ``FullyShardedDataParallel`` wrapper API built on it."""

from ._fsdp1 import (
    BackwardPrefetch,
    CPUOffload,
    FullOptimStateDictConfig,
    FullStateDictConfig,
    FullyShardedDataParallel,
    LocalStateDictConfig,
    MixedPrecision,
    OptimStateDictConfig,
    ShardedOptimStateDictConfig,
    ShardedStateDictConfig,
    ShardingStrategy,
    StateDictConfig,
    StateDictSettings,
    StateDictType,
)
from ._fully_shard import FSDPModule, fully_shard
from ._policy import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy

__all__ = ["BackwardPrefetch", "CPUOffload", "CPUOffloadPolicy", "FSDPModule", "FullOptimStateDictConfig",
           "FullStateDictConfig", "FullyShardedDataParallel", "LocalStateDictConfig", "MixedPrecision",
           "MixedPrecisionPolicy", "OffloadPolicy", "OptimStateDictConfig", "ShardedOptimStateDictConfig",
           "ShardedStateDictConfig", "ShardingStrategy", "StateDictConfig", "StateDictSettings", "StateDictType",
           "fully_shard"]

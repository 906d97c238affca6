"""``torch.distributed.fsdp.fully_sharded_data_parallel``: the module path FSDP1's names are often
imported from. The same objects as ``ember.distributed.fsdp``."""

from ._fsdp1 import (  # noqa: F401 - re-exported
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

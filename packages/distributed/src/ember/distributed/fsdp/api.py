"""``torch.distributed.fsdp.api``: FSDP1's enums and configuration classes, the same objects as
``ember.distributed.fsdp``."""

from ._fsdp1 import (  # noqa: F401 - re-exported
    BackwardPrefetch,
    CPUOffload,
    FullOptimStateDictConfig,
    FullStateDictConfig,
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

"""``torch.distributed._composable``: where ``fully_shard`` lived before ``torch.distributed.fsdp``
(``from torch.distributed._composable.fsdp import fully_shard``)."""

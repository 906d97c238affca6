"""``torch.distributed.distributed_c10d``: the module PyTorch's process groups and collectives live
in, which programs also import from directly (``from torch.distributed.distributed_c10d import
_get_default_group, GroupMember``). The same objects as ``ember.distributed``."""

from . import *  # noqa: F403 - every public name of ember.distributed
from ._groups import ProcessGroup, _require_init, is_non_member


def _get_default_group() -> ProcessGroup:
    """The default process group (ValueError before ``init_process_group``, as PyTorch's)."""
    return _require_init()


def _rank_not_in_group(group) -> bool:
    """Whether this rank is outside ``group`` (``None``: the default group, which holds every rank)."""
    return group is not None and is_non_member(group)

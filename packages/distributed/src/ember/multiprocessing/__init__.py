"""``ember.multiprocessing``: Python's ``multiprocessing`` plus ``spawn``, as ``torch.multiprocessing``.

Every name of the standard module is available here (``Process``, ``Queue``, ``get_context``...);
``spawn``/``start_processes`` run one function in several processes and propagate a child's
exception to the parent.
"""

import multiprocessing as _mp
from multiprocessing import *  # noqa: F403 - the same public names as the standard module

from ._spawn import (
    ProcessContext,
    ProcessException,
    ProcessExitedException,
    ProcessRaisedException,
    SpawnContext,
    spawn,
    start_processes,
)

__all__ = [*_mp.__all__, "ProcessContext", "ProcessException", "ProcessExitedException",
           "ProcessRaisedException", "SpawnContext", "spawn", "start_processes", "get_all_sharing_strategies",
           "get_sharing_strategy", "set_sharing_strategy"]

# PyTorch's two ways of passing shared tensors between processes. ember's shared storages are memfds
# and always travel as file descriptors; "file_system" is accepted (programs set it to dodge a
# limit on open descriptors) and reported back, without changing how storages travel
# (docs/deviations.md).
_all_sharing_strategies = {"file_descriptor", "file_system"}
_sharing_strategy = "file_descriptor"


def get_all_sharing_strategies() -> set:
    """The strategies ``set_sharing_strategy`` accepts."""
    return set(_all_sharing_strategies)


def get_sharing_strategy() -> str:
    """The strategy last set (``"file_descriptor"`` by default)."""
    return _sharing_strategy


def set_sharing_strategy(new_strategy: str) -> None:
    """Sets the strategy for sharing CPU tensors between processes (one of
    ``get_all_sharing_strategies()``)."""
    global _sharing_strategy
    assert new_strategy in _all_sharing_strategies
    _sharing_strategy = new_strategy

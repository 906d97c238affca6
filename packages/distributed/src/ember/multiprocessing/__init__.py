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
           "ProcessRaisedException", "SpawnContext", "spawn", "start_processes"]

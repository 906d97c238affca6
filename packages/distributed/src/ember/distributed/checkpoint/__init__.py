"""``ember.distributed.checkpoint``: sharded checkpoints (``save``/``load``), loadable at another
world size or layout; the ``state_dict`` helpers live in ``.state_dict``.

The format is ember's own and safe to load: a JSON ``.metadata`` file (written last, atomically)
describing every tensor's global shape, dtype and saved pieces, and one raw-bytes file per rank.
Nothing in a checkpoint is ever unpickled or executed. ``async_save`` stages the same files in
the caller and writes them in a background thread, returning a ``Future``.
"""

from ._async import async_save
from ._filesystem import FileSystemReader, FileSystemWriter
from ._format import Metadata
from ._planners import DefaultLoadPlanner, DefaultSavePlanner
from ._save_load import CheckpointException, load, save
from .stateful import Stateful

state_dict_saver = state_dict_loader = default_planner = None  # set below: PyTorch's module paths

__all__ = ["CheckpointException", "DefaultLoadPlanner", "DefaultSavePlanner", "FileSystemReader", "FileSystemWriter",
           "Metadata", "Stateful", "async_save", "load", "save"]


def _aliases():
    import sys
    import types

    contents = {"state_dict_saver": {"save": save, "async_save": async_save},
                "state_dict_loader": {"load": load},
                "default_planner": {"DefaultSavePlanner": DefaultSavePlanner, "DefaultLoadPlanner": DefaultLoadPlanner}}
    for name, names in contents.items():
        module = types.ModuleType(f"{__name__}.{name}")
        module.__dict__.update(names)
        sys.modules[module.__name__] = module
        globals()[name] = module


_aliases()

"""``ember.nn.parallel``: ``DataParallel``, ``data_parallel`` and ``DistributedDataParallel``.

Without GPUs (this build), ``DataParallel`` does what PyTorch's does on a machine with none: it
keeps the module and runs it unchanged, so a program written for several GPUs runs on the CPU.

``DistributedDataParallel`` lives in ember-distributed. ember-nn sits below it and never imports
it; the class is found at attribute access through the core's plugin registry (entry point
``distributed`` of group ``ember.plugins``), so ``ember.nn.parallel.DistributedDataParallel``
works as in PyTorch whenever ember-distributed is installed.
"""

from __future__ import annotations

from ember._src import plugins

from ..modules.module import Module

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]


def __getattr__(name: str):
    if name == "DistributedDataParallel":
        found = plugins.load("distributed")
        if found is None:
            raise AttributeError("ember.nn.parallel.DistributedDataParallel needs the 'ember-distributed' package")
        return found.DistributedDataParallel
    raise AttributeError(f"module 'ember.nn.parallel' has no attribute '{name}'")


def _check_devices(device_ids, output_device) -> None:
    for d in list(device_ids or []) + ([output_device] if output_device is not None else []):
        name = str(d)
        if not (name == "cpu" or name.startswith("cpu:")):
            raise RuntimeError(f"DataParallel: device {d!r} is not available (this ember build has no GPUs)")


class DataParallel(Module):
    """Runs ``module`` on every listed device; with no accelerator, on the CPU as it is."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        _check_devices(device_ids, output_device)
        self.module = module
        self.device_ids = []
        self.output_device = None
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim: int = 0, module_kwargs=None):
    """The functional form of DataParallel: ``module(*inputs, **module_kwargs)`` on the CPU."""
    _check_devices(device_ids, output_device)
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))

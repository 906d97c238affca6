"""``ember.distributed.algorithms.ddp_comm_hooks``: hooks for ``DistributedDataParallel.register_comm_hook``.

``register_ddp_comm_hook(DDPCommHookType.X, model, state)`` registers a built-in hook by name.
The batched PowerSGD and quantization hooks are named here as in PyTorch but ember does not
implement them; registering one raises NotImplementedError.
"""

from __future__ import annotations

import enum
import functools

from . import debugging_hooks, default_hooks, powerSGD_hook

__all__ = ["DDPCommHookType", "register_ddp_comm_hook"]


def _register(model, state, comm_hook):
    model.register_comm_hook(state, comm_hook)


def _register_powersgd(model, state, comm_hook, matrix_approximation_rank):
    # PyTorch's: ``state`` is the process group; the PowerSGD state is made from it
    powersgd_state = powerSGD_hook.PowerSGDState(process_group=state,
                                                 matrix_approximation_rank=matrix_approximation_rank)
    model.register_comm_hook(powersgd_state, comm_hook)


def _not_implemented(model, state, name):
    raise NotImplementedError(f"ember does not implement the {name} DDP comm hook")


class DDPCommHookType(enum.Enum):
    """The built-in comm hooks, each member's value registering its hook on ``model``."""

    ALLREDUCE = functools.partial(_register, comm_hook=default_hooks.allreduce_hook)
    FP16_COMPRESS = functools.partial(_register, comm_hook=default_hooks.fp16_compress_hook)
    BF16_COMPRESS = functools.partial(_register, comm_hook=default_hooks.bf16_compress_hook)
    QUANTIZE_PER_TENSOR = functools.partial(_not_implemented, name="QUANTIZE_PER_TENSOR")
    QUANTIZE_PER_CHANNEL = functools.partial(_not_implemented, name="QUANTIZE_PER_CHANNEL")
    POWER_SGD = functools.partial(_register_powersgd, comm_hook=powerSGD_hook.powerSGD_hook,
                                  matrix_approximation_rank=1)
    POWER_SGD_RANK2 = functools.partial(_register_powersgd, comm_hook=powerSGD_hook.powerSGD_hook,
                                        matrix_approximation_rank=2)
    BATCHED_POWER_SGD = functools.partial(_not_implemented, name="BATCHED_POWER_SGD")
    BATCHED_POWER_SGD_RANK2 = functools.partial(_not_implemented, name="BATCHED_POWER_SGD_RANK2")
    NOOP = functools.partial(_register, comm_hook=debugging_hooks.noop_hook)


def register_ddp_comm_hook(comm_hook_type: DDPCommHookType, model, state=None) -> None:
    """Registers the built-in hook ``comm_hook_type`` on the DDP ``model`` with ``state``."""
    comm_hook_type.value(model=model, state=state)
